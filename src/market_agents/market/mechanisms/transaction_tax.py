"""A financial transaction tax (``exchange.transaction_tax``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from market_agents.market.mechanism import Mechanism
from market_agents.market.types import BUY
from market_agents.plugins import MECHANISMS


@MECHANISMS.register
class TransactionTax(Mechanism):
    """Each side of every trade pays ``transaction_tax`` x the trade's value (price x
    quantity), rounded to the nearest tick of cash; the tax is kept in the exchange's pot, so
    total cash stays conserved (``Exchange.conservation_ok`` counts the pot).

    A buy on an account without leverage is admitted only if its free cash pays for the
    shares and the tax on them and on its resting buys (``insufficient_funds`` otherwise), so
    a trade never leaves it owing tax. Traders see the rate (``MarketView.fee_rate``; the LLM
    prompt states it). The Tobin tax of the FTT literature (e.g. Westerhoff 2003; Pellizzari &
    Westerhoff 2009, agent-based: a tax dampens volatility in a dealer market less than in an
    order book); 10 bps (``0.001``) is the order of the EU's 2013 proposal.

    Activity: ``ftt_trades``, trades taxed, and ``ftt_paid``, the tax paid by both sides in
    currency units."""

    name = "transaction_tax"
    key = "transaction_tax"
    settings = Annotated[float, Field(gt=0, lt=0.1, description="fraction of a trade's value "
                                      "each side pays (0.001 = 10 bps)")]
    activity_labels = {"ftt_trades": ("ftt.n", "{:.1f}"), "ftt_paid": ("ftt.paid", "{:.2f}")}

    def __init__(self, config, ex):
        super().__init__(config, ex)
        self.rate = self.fee_rate(config)
        self.trades = 0
        self.paid = 0  # ticks of cash

    @classmethod
    def fee_rate(cls, config) -> float:
        """The tax rate: what each side pays, as a fraction of the value."""
        return float(cls.setting(config) or 0.0)

    def tax(self, qty: int, price: int) -> int:
        """The tax one side pays on ``qty`` shares at ``price`` (ticks), in ticks."""
        return int(self.rate * qty * price + 0.5)

    def admit(self, acct, order, limit) -> str | None:
        """Refuse a buy its unlevered account cannot pay the tax on (see the class)."""
        if order.side != BUY or acct.leverage > 1.0:
            return None
        ref = limit if limit is not None else self.ex.reference(order.asset, order.side)
        need = ref * order.qty + self.tax(order.qty, ref) + self.tax(1, acct.committed_cash)
        return "insufficient_funds" if acct.cash - acct.committed_cash < need else None

    def on_fill(self, fill) -> None:
        """Charge both sides."""
        due = self.tax(fill.qty, fill.price)
        self.ex.charge(fill.buyer, due)
        self.ex.charge(fill.seller, due)
        self.trades += 1
        self.paid += 2 * due

    def acted(self) -> bool:
        """Whether any trade was taxed."""
        return self.trades > 0

    def activity(self) -> dict[str, int | float]:
        """``ftt_trades`` and ``ftt_paid`` (currency units, both sides)."""
        return {"ftt_trades": self.trades,
                "ftt_paid": round(self.paid * self.config.exchange.tick_size, 2)}

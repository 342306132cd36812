"""Margin calls on leveraged accounts (``exchange.max_leverage``, ``maintenance_margin``)."""

from __future__ import annotations

from market_agents.market.mechanism import Mechanism
from market_agents.market.types import BUY, SELL, Cancel, Order
from market_agents.plugins import MECHANISMS


@MECHANISMS.register
class MarginCall(Mechanism):
    """Liquidate a leveraged account whose equity falls below ``maintenance_margin`` of its
    gross position value (both marked at the mid): cancel its orders and close every position
    with a marketable limit 2 % through the mid, again each tick until the account is flat or
    back above maintenance. Under a call auction the order waits for the next auction.

    Always installed (any account may be leveraged); switched on in a run with a leveraged
    account. Activity: ``margin_calls``, accounts called (an account counts again only after
    it has left the call: flat or above maintenance), and ``forced_sale_volume``, the shares
    its liquidation orders (logged as kind ``margin_call``) traded."""

    name = "leverage"
    SLIPPAGE = 0.02
    activity_labels = {"margin_calls": ("margin", "{:.2f}"),
                       "forced_sale_volume": ("forced", "{:.1f}")}

    def __init__(self, config, ex):
        super().__init__(config, ex)
        self.cfg = config.exchange
        self.calls: list[list[int]] = []  # [tick, slot] per margin call
        self.called: set[int] = set()  # slots under liquidation
        self.leveraged: list | None = None
        self.orders: set[int] = set()  # ids of its liquidation orders
        self.volume = 0

    @classmethod
    def installed(cls, config) -> bool:
        """Always: any account may be leveraged."""
        return True

    def end_tick(self) -> None:
        """Issue margin calls on leveraged accounts below the maintenance margin, and liquidate
        them with marketable limit orders."""
        ex = self.ex
        if ex.halted:
            return
        if self.leveraged is None:  # accounts are all open before the first tick
            # Once, not every tick: scanning every account each tick cost O(N) per tick.
            self.leveraged = [a for a in ex.accounts.values() if a.leverage > 1.0]
        for acct in self.leveraged:
            gross = sum(abs(s) * ex.mid_ticks(i) for i, s in enumerate(acct.shares))
            if not gross or ex.equity(acct) >= self.cfg.maintenance_margin * gross:
                self.called.discard(acct.slot)
                continue
            if acct.slot not in self.called:
                self.called.add(acct.slot)
                self.calls.append([ex.tick, acct.slot])
            ex.submit(acct.slot, Cancel())
            for asset, held in enumerate(acct.shares):
                if held:
                    side = SELL if held > 0 else BUY
                    price = round(ex.mid[asset] * (1 + self.SLIPPAGE * side), 2)
                    order = Order(side, abs(held), price, asset, ttl=self._ttl(ex.tick))
                    # its id before it is sent: it may fill within submit
                    self.orders.add(ex.next_id)
                    ex.submit(acct.slot, order, kind="margin_call")

    def on_fill(self, fill) -> None:
        """Count the shares its liquidation orders trade."""
        if self.orders and (fill.buy_id in self.orders or fill.sell_id in self.orders):
            self.volume += fill.qty

    def _ttl(self, tick: int) -> int:
        """Ticks a forced order lives: this tick (book) or until the next auction clears."""
        if self.cfg.mechanism != "call_auction":
            return 1
        interval = self.cfg.auction_interval
        return interval - tick % interval + 1

    def switched_on(self) -> bool:
        """When the run has a leveraged account."""
        return any(a.leverage > 1.0 for a in self.ex.accounts.values())

    def acted(self) -> bool:
        """Whether it called any account."""
        return bool(self.calls)

    def activity(self) -> dict[str, int | float]:
        """``margin_calls`` and ``forced_sale_volume`` (shares)."""
        return {"margin_calls": len(self.calls), "forced_sale_volume": self.volume}

    def events(self) -> list[list[int]]:
        """``[tick, slot]`` of each margin call."""
        return self.calls

"""Position limits (``exchange.position_limit``)."""

from __future__ import annotations

from market_agents.market.mechanism import Mechanism
from market_agents.market.types import BUY
from market_agents.plugins import MECHANISMS


@MECHANISMS.register
class PositionLimit(Mechanism):
    """Refuse an order that would take the trader's position in an asset, counting its open
    orders on the same side, beyond ``position_limit`` shares long or short; an order that
    brings the position back toward the limit is always allowed."""

    name = "position_limit"
    measures = ("reject_ratio",)
    refusals = ("position_limit",)
    refusal_labels = {"position_limit": "rej:limit"}

    def __init__(self, config, ex):
        super().__init__(config, ex)
        self.cap = config.exchange.position_limit
        self.refused = 0

    @classmethod
    def installed(cls, config) -> bool:
        """When ``exchange.position_limit`` is set."""
        return config.exchange.position_limit is not None

    def admit(self, acct, order, limit) -> str | None:
        """``position_limit`` when ``order`` would take the position beyond the cap."""
        a = order.asset
        exposure = (acct.shares[a] + acct.committed_buy[a] if order.side == BUY
                    else acct.shares[a] - acct.committed_sell[a])
        after = exposure + order.side * order.qty
        if abs(after) > self.cap and abs(after) > abs(exposure):
            self.refused += 1
            return "position_limit"
        return None

    def acted(self) -> bool:
        """Whether it refused any order."""
        return self.refused > 0

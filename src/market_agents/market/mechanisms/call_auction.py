"""The periodic call auction (``exchange.mechanism: call_auction``, ``auction_interval``)."""

from __future__ import annotations

from market_agents.market.mechanism import Mechanism
from market_agents.plugins import MECHANISMS


@MECHANISMS.register
class CallAuction(Mechanism):
    """Orders wait in the book and trade only at a uniform price every ``auction_interval``
    ticks. The matching is the exchange's own (``Exchange._auction``: a matching mechanism is
    not a rule on top of one); this entry says when it is switched on and that it acted when
    anything traded after the burn-in."""

    name = "call_auction"

    @classmethod
    def installed(cls, config) -> bool:
        """When ``exchange.mechanism`` is ``call_auction``."""
        return config.exchange.mechanism == "call_auction"

    def acted(self) -> bool:
        """Whether anything traded after the burn-in (outcomes' ``volume``)."""
        burn_in = self.config.simulation.burn_in
        return any(row[0] >= burn_in for row in self.ex.trade_rows)

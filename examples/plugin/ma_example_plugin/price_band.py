"""The ``price_band`` mechanism: a collar on limit prices (``exchange.price_band``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from market_agents.market.mechanism import Mechanism
from market_agents.plugins import MECHANISMS


@MECHANISMS.register
class PriceBand(Mechanism):
    """Refuse a limit order priced more than ``exchange.price_band`` (a fraction) away from the
    last trade: the static price collars of exchanges (e.g. Xetra's static volatility range).

    A mechanism names itself (``name``: outcomes' ``mechanisms``), its switch under
    ``exchange`` (``key``) and the switch's type (``settings``), the reasons it refuses orders
    with (``refusals``, counted as ``rejects_<reason>``) and its activity counts
    (``activity_labels``, for ``ma summary`` and the paper)."""

    name = "price_band"
    key = "price_band"
    settings = Annotated[float, Field(gt=0, lt=1, description="widest distance of a limit "
                                      "from the last trade, a fraction of it")]
    refusals = ("price_band",)
    refusal_labels = {"price_band": "rej:band"}
    activity_labels = {"band_refusals": ("band", "{:.1f}")}

    def __init__(self, config, ex):
        super().__init__(config, ex)
        self.band = self.setting(config)
        self.refused = 0

    def admit(self, acct, order, limit):
        """``price_band`` for a limit beyond the band around the last trade."""
        if limit is None:
            return None
        last = self.ex.last[order.asset]
        if abs(limit / last - 1.0) > self.band:
            self.refused += 1
            return "price_band"
        return None

    def acted(self):
        """Whether it refused any order."""
        return self.refused > 0

    def activity(self):
        """``band_refusals``: limit orders refused."""
        return {"band_refusals": self.refused}

"""Statistical arbitrageurs (``statarb``): two assets, the rich leg sold and the cheap one
bought."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from market_agents.agents.base import Trader, ref_price, withdraw
from market_agents.market.types import BUY, SELL, Cancel, MarketView, Order
from market_agents.plugins import TRADERS

if TYPE_CHECKING:
    from market_agents.config import Config


@TRADERS.register
class StatArb(Trader):
    """Two assets: trades the relative mispricing of asset 0 against asset 1 (each priced
    against its own V^pub), selling the rich leg and buying the cheap one."""

    name = "statarb"
    default_share = 0.0
    draw_rank = 50

    def __init__(self, slot: int, rng: np.random.Generator):
        super().__init__(slot, rng)
        self.threshold = rng.uniform(0.002, 0.006)
        self.qty = int(rng.integers(2, 6))

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Sell the rich leg and buy the cheap one when the two assets' value gaps diverge."""
        out = withdraw(view)
        if len(view.assets) < 2 or any(a.halted for a in view.assets[:2]):
            return out
        a0, a1 = view.assets[0], view.assets[1]
        z = math.log(ref_price(a0) / a0.public_value) - math.log(ref_price(a1) / a1.public_value)
        if abs(z) < self.threshold:
            return out
        rich, cheap = (a0, a1) if z > 0 else (a1, a0)
        out.append(Order(SELL, self.qty, round(ref_price(rich) * 0.997, 2), rich.asset, ttl=1))
        out.append(Order(BUY, self.qty, round(ref_price(cheap) * 1.003, 2), cheap.asset, ttl=1))
        return out

    @classmethod
    def check(cls, config: Config) -> None:
        """It trades two assets."""
        if config.fundamentals.n_assets < 2:
            raise ValueError(f"population.mix.{cls.name} needs fundamentals.n_assets: 2")

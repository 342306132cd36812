"""Leveraged trend followers (``leveraged``): positions financed on margin, liquidated by the
exchange's margin rule below maintenance."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from market_agents.agents.base import Opening, RunContext, Trader, ref_price, withdraw
from market_agents.market.types import BUY, SELL, Cancel, MarketView, Order
from market_agents.plugins import TRADERS

if TYPE_CHECKING:
    from market_agents.config import Config


@TRADERS.register
class LeveragedTrader(Trader):
    """A leveraged trend follower (the leveraged funds of Thurner, Farmer & Geanakoplos 2012,
    trading on a trend signal): on a strong trend signal it targets a position worth ``use`` x
    its maximum leverage x its equity on the side of the trend, financed by margin (borrowed
    cash when long, shares sold short when short), and holds it until an opposite strong
    signal reverses it. Gains are not pyramided: the position never exceeds the one its
    starting equity allowed. Losses raise its leverage, so a fast adverse move (news, the
    scheduled shock, another trader's forced sale) can push its equity below the maintenance
    margin, where the exchange's margin rule liquidates it."""

    name = "leveraged"
    default_share = 0.0
    draw_rank = 40
    USE = (0.8, 1.0)  # share of the maximum leverage it targets
    THRESHOLD = (0.002, 0.006)  # |log move| over the look-back that counts as a strong signal

    def __init__(self, slot: int, rng: np.random.Generator, leverage: float):
        super().__init__(slot, rng)
        self.leverage = leverage
        self.lookback = int(rng.integers(5, 20))
        self.threshold = rng.uniform(*self.THRESHOLD)
        self.use = rng.uniform(*self.USE)
        self.slippage = rng.uniform(0.002, 0.006)
        self.max_shares: int | None = None  # set at the first decision from starting equity

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Target a leveraged position on the side of a strong trend signal, and hold it until
        an opposite strong signal."""
        out = withdraw(view)
        exposure = self.use * self.leverage * max(view.wealth, 0.0) / len(view.assets)
        if self.max_shares is None:
            self.max_shares = int(exposure / ref_price(view.assets[0]))
        for a in view.assets:
            p = a.recent_prices
            if a.halted or len(p) <= self.lookback:
                continue
            move = math.log(p[-1] / p[-1 - self.lookback])
            if abs(move) < self.threshold:
                continue  # no strong signal: hold the position
            side = BUY if move > 0 else SELL
            price = ref_price(a) * (1 + side * self.slippage)
            target = side * min(self.max_shares, int(exposure / price))
            if target != a.shares:
                qty = target - a.shares
                out.append(Order(BUY if qty > 0 else SELL, abs(qty), round(price, 2), a.asset,
                                 ttl=1))
        return out

    @classmethod
    def build(cls, slot: int, rng: np.random.Generator, run: RunContext) -> LeveragedTrader:
        """A trader that targets ``exchange.max_leverage``."""
        return cls(slot, rng, run.config.exchange.max_leverage)

    @classmethod
    def opening(cls, config: Config, llm: bool) -> Opening:
        """A margin account: ``leveraged_cash``, no shares, leverage ``exchange.max_leverage``;
        an LLM trader in a leveraged slot opens an ordinary account."""
        if llm:
            return super().opening(config, llm)
        return Opening(config.population.leveraged_cash, 0, config.exchange.max_leverage)

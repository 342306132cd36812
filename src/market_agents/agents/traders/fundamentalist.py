"""Fundamentalists (``fundamentalist``): a holding that rises as the price falls below V^pub."""

from __future__ import annotations

import math

import numpy as np

from market_agents.agents.base import (
    RunContext,
    Trader,
    opening_holdings,
    ref_price,
    toward,
    withdraw,
)
from market_agents.market.types import BUY, SELL, Cancel, MarketView, Order
from market_agents.plugins import TRADERS


@TRADERS.register
class Fundamentalist(Trader):
    """Holds more of the asset the further its price lies below V^pub, less above it.

    The desired holding is h* = h0·(1 + tanh(κ·ln(V^pub/P))) around the opening holding h0
    (Chiarella, Iori & Perelló 2009: a CARA demand in the expected log return to value;
    Majewski, Ciliberti & Bouchaud 2020: value demand saturating in the mispricing). A holding
    is a function of the mispricing, not the sum of past orders, so it stays inside
    [0, 2·h0] and returns to h0 whenever the price is at value: the fundamentalists never sell
    out, and so never leave the price to the trend followers (before this, fixed-size orders
    drained them from 20 shares to 1–2 and long runs drifted into +105 % bubbles). The order
    is a limit at V^pub·(1 ∓ threshold): marketable when the book is far from value, resting
    on the side of value otherwise. Under a fee on each trade (``MarketView.fee_rate``) the
    mispricing it acts on is shrunk by the round trip's cost, 2 x the fee: a no-trade band
    around value (the transaction-cost band of Constantinides 1986).
    """

    name = "fundamentalist"
    default_share = 0.35
    draw_rank = 10

    def __init__(self, slot: int, rng: np.random.Generator, news_interval: int = 10):
        super().__init__(slot, rng)
        self.news_interval = news_interval
        self.threshold = rng.uniform(0.0005, 0.003)
        # κ: half the swing at a mispricing of 1–4 % (atanh(0.5) = 0.549). A sharper demand
        # (half the swing at 0.3–1.5 %) pinned the price to V^pub within 0.13 % and reverted
        # every trade between releases: a lag-1 bounce of the mid (issue 23).
        self.kappa = 0.549 / rng.uniform(0.01, 0.04)
        self.max_qty = int(rng.integers(4, 12))  # shares per decision: positions built in steps
        self.h0: list[int] | None = None

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Move the holding toward h0·(1 + tanh(κ·ln(V^pub/P))) with a limit at
        V^pub·(1 ∓ threshold)."""
        out: list[Order | Cancel] = withdraw(view)
        if self.h0 is None:
            self.h0 = opening_holdings(view)
        for a in view.assets:
            if a.halted:
                continue
            v, h0 = a.public_value, self.h0[a.asset]
            gap = math.log(v / ref_price(a))
            if view.fee_rate:  # a round trip pays the fee twice: no trade on a smaller gap
                gap = math.copysign(max(abs(gap) - 2 * view.fee_rate, 0.0), gap)
            target = int(round(h0 * (1.0 + math.tanh(self.kappa * gap))))
            side = BUY if target > a.shares else SELL
            # Priced on V^pub, so it lives until the next scheduled release: a resting order on
            # stale news is picked off after the release and drags the price to the new value
            # over several ticks (momentum at lags 2–10).
            ttl = self.news_interval - view.tick % self.news_interval
            out.extend(toward(a, target, v * (1 - side * self.threshold), self.max_qty, ttl=ttl))
        return out

    @classmethod
    def build(cls, slot: int, rng: np.random.Generator, run: RunContext) -> Fundamentalist:
        """Its orders live until the next news release (``fundamentals.news_interval``)."""
        return cls(slot, rng, run.config.fundamentals.news_interval)

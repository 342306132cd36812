"""Trend followers (``trend``): a holding that rises after a rise, on an average of past
returns."""

from __future__ import annotations

import math

import numpy as np

from market_agents.agents.base import Trader, opening_holdings, ref_price, toward, withdraw
from market_agents.market.types import BUY, SELL, AssetView, Cancel, MarketView, Order
from market_agents.plugins import TRADERS


@TRADERS.register
class TrendFollower(Trader):
    """Holds more of the asset after a rise, less after a fall.

    Its trend signal is an exponential moving average m of the log price changes it has seen
    between its decisions (weight λ per decision), and its desired holding is
    h* = h0·(1 + tanh(γ·m)): the saturating trend demand on an EMA of past returns of
    Majewski, Ciliberti & Bouchaud (2020), the chartists of Chiarella & Iori (2002). The
    average spans 10–33 decisions (200–700 ticks) and a position is built 2–8 shares a
    decision, so it is opened and closed gradually: a look-back shorter than the 20-tick
    decision interval made each trend follower buy on a move and sell it back at its next
    decision (a reversal at lag 20, acf −0.17), and a fast average (0.2–0.5 a decision) with
    2–7 shares left momentum at lags 2–7 (the robust portmanteau rejected in 45–60 % of
    seeds). Trend horizons far longer than the trading interval are what Majewski, Ciliberti
    & Bouchaud (2020) estimate. Bounded in [0, 2·h0] like the fundamentalists', so the trend
    followers together can never absorb more than the fundamentalists can supply. Its orders
    are immediate-or-cancel limits slightly through the reference price: a remainder left
    resting for a tick inside the market makers' spread moved the mid, and the next tick's
    quotes moved it back (a lag-1 bounce, issue 23).
    """

    name = "trend"
    default_share = 0.25
    draw_rank = 20

    def __init__(self, slot: int, rng: np.random.Generator):
        super().__init__(slot, rng)
        self.weight = rng.uniform(0.03, 0.1)  # λ: EMA weight of the newest change
        # γ: half the swing at an average change of 0.2–0.8 % per decision interval.
        self.gamma = 0.549 / rng.uniform(0.002, 0.008)
        self.slippage = rng.uniform(0.001, 0.003)
        self.qty = int(rng.integers(2, 9))  # shares per decision
        self.h0: list[int] | None = None
        self.seen: list[float] = []  # the reference price at the last decision, per asset
        self.trend: list[float] = []  # m, per asset

    def signal(self, a: AssetView) -> float:
        """Update and return the EMA of log price changes between decisions (the first
        decision starts from the oldest price in the view's history)."""
        i = a.asset
        while len(self.seen) <= i:
            p = a.recent_prices
            self.seen.append(p[0] if p else ref_price(a))
            self.trend.append(0.0)
        price = ref_price(a)
        self.trend[i] += self.weight * (math.log(price / self.seen[i]) - self.trend[i])
        self.seen[i] = price
        return self.trend[i]

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Move the holding toward h0·(1 + tanh(γ·m)), slightly through the reference
        price."""
        out: list[Order | Cancel] = withdraw(view)
        if self.h0 is None:
            self.h0 = opening_holdings(view)
        for a in view.assets:
            if a.halted:
                continue
            h0 = self.h0[a.asset]
            target = int(round(h0 * (1.0 + math.tanh(self.gamma * self.signal(a)))))
            side = BUY if target > a.shares else SELL
            out.extend(toward(a, target, ref_price(a) * (1 + side * self.slippage), self.qty,
                              ttl=0))
        return out

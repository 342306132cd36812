"""Noise traders (``noise``) and the market's trading activity they share
(:func:`activity_path`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from market_agents import rng as streams_mod
from market_agents.agents.base import RunContext, Trader, opening_holdings, ref_price, withdraw
from market_agents.market.types import BUY, SELL, Cancel, MarketView, Order
from market_agents.plugins import TRADERS


@TRADERS.register
class NoiseTrader(Trader):
    """Trades for reasons unrelated to value: a random side and size, mostly limit orders near
    the mid, now and then an aggressive one.

    - **Side.** It leans back toward the opening holding h0,
      P(buy) = (1 − tanh((h − h0)/(3·h0)))/2, so a noise trader's holding is a mean-reverting
      random walk around h0 rather than one reflected at zero, which drifted toward the cash
      side and bought the market up over long runs (a liquidity trader with an inventory
      target; Chiarella & Iori 2002's noise traders hold no position at all).
    - **Size.** Pareto with tail exponent 1.2, at least 1 and at most 60 shares: order sizes in
      real markets have a power-law tail (Gopikrishnan et al. 2000; Maslov & Mills 2001), and
      the rare large order is what moves the price between news releases; a uniform 1–7 shares
      left 64 % of the return variance on the releases.
    - **Aggression.** With probability p·A_t (p drawn once, 0.28–0.70) the order is an
      immediate-or-cancel limit 0.5 % + through the mid, else a limit near the mid with the
      exchange's default life. A_t is the market's trading activity (:func:`activity_path`),
      common to every noise trader: liquidity demand arrives in spells, so volatility does too
      (Clark 1973; Andersen 1996).
    """

    name = "noise"
    default_share = 0.40
    draw_rank = 30
    SIZE_TAIL = 1.2  # Pareto exponent of order sizes
    MAX_SIZE = 60  # shares

    def __init__(self, slot: int, rng: np.random.Generator,
                 activity: Sequence[float] | None = None):
        super().__init__(slot, rng)
        self.market_prob = rng.uniform(0.28, 0.7)
        self.width = rng.uniform(0.001, 0.004)
        # A_t by tick, one list shared by every noise trader of the run (a copy each cost
        # 2.4 million floats at N = 10,000); None: constant activity 1, outside a run
        self.activity = activity
        self.h0: list[int] | None = None

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """A random side (leaning toward h0) and Pareto size: a limit order near the reference
        price, or, more often when activity is high, an aggressive immediate-or-cancel one."""
        out: list[Order | Cancel] = withdraw(view)
        if self.h0 is None:
            self.h0 = opening_holdings(view)
        activity = 1.0 if self.activity is None else self.activity[view.tick]
        for a in view.assets:
            # Draw the same variates whether or not the market is halted, so the draws of
            # later decisions never depend on halts.
            u = self.rng.random()
            aggressive = self.rng.random() < self.market_prob * activity
            offset = abs(self.rng.normal(0.0, self.width))
            u_size = 1.0 - self.rng.random()  # in (0, 1]: a Pareto draw by inversion
            qty = min(self.MAX_SIZE, math.ceil(u_size ** (-1.0 / self.SIZE_TAIL)))
            if a.halted:
                continue
            h0 = max(self.h0[a.asset], 1)
            side = BUY if u < 0.5 * (1.0 - math.tanh((a.shares - h0) / (3 * h0))) else SELL
            mid = ref_price(a)
            if aggressive:
                price = mid * (1 + side * (0.005 + offset))
                out.append(Order(side, qty, round(price, 2), a.asset, ttl=0))
            else:
                out.append(Order(side, qty, round(mid * (1 - side * offset), 2), a.asset))
        return out

    @classmethod
    def build(cls, slot: int, rng: np.random.Generator, run: RunContext) -> NoiseTrader:
        """A noise trader on the run's trading activity, drawn once (from its own stream) for
        every noise trader of the run."""
        activity = run.shared(ACTIVITY, lambda: activity_path(
            run.config.simulation.ticks,
            run.streams.generator(streams_mod.TRADING_ACTIVITY)).tolist())
        return cls(slot, rng, activity)


def activity_path(ticks: int, rng: np.random.Generator) -> np.ndarray:
    """The market's trading activity A_t, shape ``(ticks,)``: A_t = exp(max(x_t, 0)) for a
    stationary Gaussian AR(1) x_t with standard deviation 0.7 and a half-life of 1,000 ticks.

    Activity is normal (1) about half the time and rises in spells of hundreds of ticks up to
    a few times normal: a latent information-arrival or liquidity-demand process that drives
    trading and so volatility (the mixture-of-distributions model, Clark 1973; its persistent
    version, Andersen 1996). Spells far longer than the 20-tick decision interval give the
    clustering of |r| at lags of hundreds of ticks that the market makers' EWMA alone did not
    (median acf(|r|) at lag 50 0.011, under its band, before; issue 23). Only bursts: a spell of
    activity below normal left news releases most of the variance, and the calendar's
    heteroskedasticity made Ljung–Box reject in more seeds (measured in docs/market.md).

    Raises:
        ValueError: if ``ticks`` is negative.
    """
    if ticks < 0:
        raise ValueError(f"ticks must be >= 0, got {ticks}")
    phi = 0.5 ** (1.0 / ACTIVITY_HALF_LIFE)
    eps = (rng.standard_normal(ticks) * (ACTIVITY_SD * math.sqrt(1.0 - phi * phi))).tolist()
    x = [0.0] * ticks
    level = eps[0] / math.sqrt(1.0 - phi * phi) if ticks else 0.0  # x_0: the stationary law
    # A loop, not scipy.signal.lfilter: importing scipy.signal costs 1.3 s, ten runs' worth of
    # a 600-tick market; this costs about 2 ms for 20,000 ticks.
    for t in range(ticks):
        if t:
            level = phi * level + eps[t]
        x[t] = level
    return np.exp(np.maximum(np.array(x), 0.0))


ACTIVITY = "trading_activity"  # its key among the run's shared draws
ACTIVITY_SD = 0.7  # standard deviation of x_t
ACTIVITY_HALF_LIFE = 1000.0  # ticks

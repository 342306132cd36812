"""Market makers (``market_maker``): the first ``population.n_market_makers`` slots, quoting
both sides every tick."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from market_agents.agents.base import Opening, RunContext, Trader, ref_price, withdraw
from market_agents.market.types import BUY, SELL, AssetView, Cancel, MarketView, Order
from market_agents.plugins import TRADERS

if TYPE_CHECKING:
    from market_agents.config import Config


@TRADERS.register
class MarketMaker(Trader):
    """Quotes both sides every tick around the mid (moved at once by public news), skewed
    against its inventory, with a spread that widens with its estimate of volatility.

    The volatility estimate is an exponentially weighted moving average of squared mid log
    changes with a half-life of 100–500 ticks (a RiskMetrics-style EWMA, J.P. Morgan 1996),
    and the half-spread is 0.08–0.16 % plus 1.9–3.75 times it, at most 0.5 %:
    a dealer that prices the risk of holding inventory by recent volatility quotes wider after
    turbulence and stays wider for a while, so a calm or turbulent spell outlives the news
    that started it — volatility clustering at lags of tens of ticks (Cont 2001, fact 8).
    The 20-tick window it replaced fell off a cliff 20 ticks after a large move and left
    acf(|r|) at zero by lag 50 (issue 23).

    On a news release it also picks off the orders left standing at the old price: an
    immediate-or-cancel order for ``SNIPE`` x its quote size on the side of the news, limited
    at its own new quote on that side, so it takes only the orders now beyond its spread —
    stale-quote sniping (Budish, Cramton & Shim 2015; Foucault, Kozhan & Tham 2017). Its
    quotes alone (5–11 shares) left a large release to resting orders priced before it: a
    −18 % release at V^pub ≈ 115 kept the mid at the old price, the makers then centred on
    that mid, and it stayed 22 % above V^pub for 80 ticks (confirmatory base, 20,000 ticks).
    """

    name = "market_maker"
    in_mix = False  # the first population.n_market_makers slots
    every_tick = True
    HALF_LIFE = (100.0, 500.0)  # ticks, of the EWMA of squared mid log changes
    START_VOL = 0.001  # per-tick volatility assumed before the first change is seen
    # A designated market maker's maximum-spread obligation (exchanges require their liquidity
    # providers to quote within a maximum spread; Venkataraman & Waisburd 2007): without it a
    # wide spread moved the mid more, which widened the spread again, and on the confirmatory
    # base 6 of 20 seeds of 20,000 ticks spiralled 19-69 % away from V^pub (issue 23).
    MAX_HALF_SPREAD = 0.005
    SNIPE = 10  # size of its order against stale quotes at a release, in quote sizes
    MAX_STEP = 2.0  # most the centre moves in a tick without news, in half-spreads

    def __init__(self, slot: int, rng: np.random.Generator, target_shares: int):
        super().__init__(slot, rng)
        self.half_spread = rng.uniform(0.0008, 0.0016)
        self.vol_mult = rng.uniform(1.9, 3.75)
        self.inventory_aversion = rng.uniform(0.00025, 0.00035)
        self.size = int(rng.integers(5, 12))
        self.trade_weight = rng.uniform(0.0, 0.1)
        self.ewma_weight = 1.0 - 0.5 ** (1.0 / rng.uniform(*self.HALF_LIFE))
        self.target = target_shares
        self.seen_value: dict[int, float] = {}
        self.seen_last: dict[int, float] = {}
        self.news_since_trade: dict[int, float] = {}
        self.variance: dict[int, float] = {}  # EWMA of squared mid log changes, per asset
        self.seen_mid: dict[int, float] = {}
        self.seen_ref: dict[int, float] = {}  # the last centre before the inventory skew
        self.seen_half: dict[int, float] = {}  # the last half-spread, a fraction of the centre

    def volatility(self, a: AssetView) -> float:
        """Update and return the EWMA estimate of the per-tick volatility of ``a``'s mid."""
        mid, prev = ref_price(a), self.seen_mid.get(a.asset)
        var = self.variance.get(a.asset, self.START_VOL**2)
        if prev is not None:
            var += self.ewma_weight * (math.log(mid / prev) ** 2 - var)
        self.seen_mid[a.asset], self.variance[a.asset] = mid, var
        return math.sqrt(var)

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Cancel the old quotes and quote both sides around the reference price."""
        out = withdraw(view)
        for a in view.assets:
            if a.halted:
                continue
            asset, value, last_price = a.asset, a.public_value, a.last_price
            # Public news moves the quotes at once: a jump, not a drift toward V^pub. The
            # centre is the mid with a small weight (0–10 %) on the last trade; with traders
            # that hold target positions the mid no longer chases resting orders, and a larger
            # weight on the last trade made the mid bounce (acf lag 1 down to −0.08).
            news = value - self.seen_value.get(asset, value)
            self.seen_value[asset] = value
            if last_price != self.seen_last.get(asset):
                self.seen_last[asset] = last_price
                pending = 0.0
            else:
                pending = self.news_since_trade.get(asset, 0.0)
            pending += news
            self.news_since_trade[asset] = pending
            w = self.trade_weight
            ref = w * (last_price + pending) + (1 - w) * (ref_price(a) + news)
            prev = self.seen_ref.get(asset)
            if prev is not None:
                # Without news the centre moves at most one quoted spread a tick: a mid that
                # jumps further was made by a hole in the book (one order that took every
                # quote on a side), not by a price.
                step = self.MAX_STEP * self.seen_half[asset] * prev
                ref = min(max(ref, prev + news - step), prev + news + step)
            self.seen_ref[asset] = ref
            vol = self.volatility(a)
            skew = self.inventory_aversion * (a.shares - self.target) / self.size
            center = ref * (1.0 - skew)
            # A fee on each trade (view.fee_rate: a transaction tax) is a cost of every fill,
            # so it quotes that much wider on each side: its round trip pays it twice, and a
            # spread that did not cover it would lose on every one (Roll 1984's spread covers
            # the dealer's costs).
            self.seen_half[asset] = min(self.half_spread + self.vol_mult * vol,
                                        self.MAX_HALF_SPREAD) + view.fee_rate
            half = center * self.seen_half[asset]
            bid, ask = round(center - half, 2), round(center + half, 2)
            out.append(Order(BUY, self.size, bid, asset, ttl=1))
            out.append(Order(SELL, self.size, ask, asset, ttl=1))
            if news > 0:  # stale offers below its new bid
                out.append(Order(BUY, self.SNIPE * self.size, bid, asset, ttl=0))
            elif news < 0:  # stale bids above its new offer
                out.append(Order(SELL, self.SNIPE * self.size, ask, asset, ttl=0))
        return out

    @classmethod
    def build(cls, slot: int, rng: np.random.Generator, run: RunContext) -> MarketMaker:
        """A maker whose inventory skew centres on its opening holding."""
        return cls(slot, rng, run.config.population.mm_initial_shares)

    @classmethod
    def opening(cls, config: Config, llm: bool) -> Opening:
        """The makers' own endowment: ``mm_initial_cash`` and ``mm_initial_shares``."""
        pop = config.population
        return Opening(pop.mm_initial_cash, pop.mm_initial_shares, 1.0)

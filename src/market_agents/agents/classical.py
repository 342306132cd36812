"""Classical traders: market makers, fundamentalists, trend followers, noise traders, leveraged
trend followers and a two-asset statistical arbitrageur.

Every trader values the asset from V^pub (information parity), draws its own parameters once
from its private generator, and sends marketable limit orders rather than naked market orders,
so no single order can sweep the book to an absurd price.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from market_agents.agents.base import Trader
from market_agents.market.types import BUY, SELL, AssetView, Cancel, MarketView, Order


def withdraw(view: MarketView) -> list[Order | Cancel]:
    """Start a decision by cancelling the trader's resting orders (nothing to send if none)."""
    return [Cancel()] if view.open_orders else []


def ref_price(a: AssetView) -> float:
    """The asset's reference price: its mid, else its last trade."""
    return a.mid_price if a.mid_price > 0 else a.last_price


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

    kind = "market_maker"
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
            self.seen_half[asset] = min(self.half_spread + self.vol_mult * vol,
                                        self.MAX_HALF_SPREAD)
            half = center * self.seen_half[asset]
            bid, ask = round(center - half, 2), round(center + half, 2)
            out.append(Order(BUY, self.size, bid, asset, ttl=1))
            out.append(Order(SELL, self.size, ask, asset, ttl=1))
            if news > 0:  # stale offers below its new bid
                out.append(Order(BUY, self.SNIPE * self.size, bid, asset, ttl=0))
            elif news < 0:  # stale bids above its new offer
                out.append(Order(SELL, self.SNIPE * self.size, ask, asset, ttl=0))
        return out


def opening_holdings(view: MarketView) -> list[int]:
    """The trader's holding of each asset at its first decision (its opening position: no
    trader but the market makers trades before its first decision)."""
    return [max(0, a.shares) for a in view.assets]


def toward(a: AssetView, target: int, price: float, max_qty: int,
           ttl: int | None = None) -> list[Order]:
    """The order that moves the holding of ``a.asset`` toward ``target`` by at most
    ``max_qty`` shares at the limit ``price`` (nothing when it is there)."""
    qty = target - a.shares
    if qty == 0:
        return []
    return [Order(BUY if qty > 0 else SELL, min(abs(qty), max_qty), round(price, 2), a.asset,
                  ttl=ttl)]


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
    on the side of value otherwise.
    """

    kind = "fundamentalist"

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
            target = int(round(h0 * (1.0 + math.tanh(self.kappa * math.log(v / ref_price(a))))))
            side = BUY if target > a.shares else SELL
            # Priced on V^pub, so it lives until the next scheduled release: a resting order on
            # stale news is picked off after the release and drags the price to the new value
            # over several ticks (momentum at lags 2–10).
            ttl = self.news_interval - view.tick % self.news_interval
            out.extend(toward(a, target, v * (1 - side * self.threshold), self.max_qty, ttl=ttl))
        return out


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

    kind = "trend"

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

    kind = "noise"
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


ACTIVITY_SD = 0.7  # standard deviation of x_t
ACTIVITY_HALF_LIFE = 1000.0  # ticks


class LeveragedTrader(Trader):
    """A leveraged trend follower (the leveraged funds of Thurner, Farmer & Geanakoplos 2012,
    trading on a trend signal): on a strong trend signal it targets a position worth ``use`` x
    its maximum leverage x its equity on the side of the trend, financed by margin (borrowed
    cash when long, shares sold short when short), and holds it until an opposite strong
    signal reverses it. Gains are not pyramided: the position never exceeds the one its
    starting equity allowed. Losses raise its leverage, so a fast adverse move (news, the
    scheduled shock, another trader's forced sale) can push its equity below the maintenance
    margin, where the exchange's margin rule liquidates it."""

    kind = "leveraged"
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


class StatArb(Trader):
    """Two assets: trades the relative mispricing of asset 0 against asset 1 (each priced
    against its own V^pub), selling the rich leg and buying the cheap one."""

    kind = "statarb"

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


CLASSICAL = {
    "fundamentalist": Fundamentalist,
    "trend": TrendFollower,
    "noise": NoiseTrader,
    "statarb": StatArb,
}

"""Classical traders: market makers, fundamentalists, trend followers, noise traders, leveraged
trend followers and a two-asset statistical arbitrageur.

Every trader values the asset from V^pub (information parity), draws its own parameters once
from its private generator, and sends marketable limit orders rather than naked market orders,
so no single order can sweep the book to an absurd price.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from market_agents.agents.base import Trader
from market_agents.market.types import BUY, SELL, AssetView, Cancel, MarketView, Order


@lru_cache(maxsize=64)
def realized_vol(prices: tuple[float, ...]) -> float:
    """Root mean square of recent log changes of the mid price (0 with too little history).

    Cached: every market maker reads the same price tuple in a tick."""
    if len(prices) < 3:
        return 0.0
    logs = [math.log(p) for p in prices]
    steps = zip(logs, logs[1:], strict=False)
    return math.sqrt(sum((b - a) ** 2 for a, b in steps) / (len(logs) - 1))


def withdraw(view: MarketView) -> list[Order | Cancel]:
    """Start a decision by cancelling the trader's resting orders (nothing to send if none)."""
    return [Cancel()] if view.open_orders else []


def ref_price(a: AssetView) -> float:
    """The asset's reference price: its mid, else its last trade."""
    return a.mid_price if a.mid_price > 0 else a.last_price


class MarketMaker(Trader):
    """Quotes both sides every tick around a blend of the last trade and the mid, skewed against
    its inventory; widens its spread when recent volatility rises (volatility clustering)."""

    kind = "market_maker"
    every_tick = True

    def __init__(self, slot: int, rng: np.random.Generator, target_shares: int):
        super().__init__(slot, rng)
        self.half_spread = rng.uniform(0.0008, 0.0016)
        self.vol_mult = rng.uniform(0.75, 1.5)
        self.inventory_aversion = rng.uniform(0.00025, 0.00035)
        self.size = int(rng.integers(3, 8))
        self.trade_weight = rng.uniform(0.55, 0.65)
        self.target = target_shares
        self.seen_value: dict[int, float] = {}
        self.seen_last: dict[int, float] = {}
        self.news_since_trade: dict[int, float] = {}

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Cancel the old quotes and quote both sides around the reference price."""
        out = withdraw(view)
        for a in view.assets:
            if a.halted:
                continue
            asset, value, last_price = a.asset, a.public_value, a.last_price
            # Centring on the mid alone chases orders resting inside the spread (positive
            # autocorrelation); on the last trade alone it bounces (negative). A blend of the
            # two leaves mid-price returns close to unpredictable. Public news moves the quotes
            # at once: a jump, not a drift toward V^pub.
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
            vol = realized_vol(a.recent_prices)
            skew = self.inventory_aversion * (a.shares - self.target) / self.size
            center = ref * (1.0 - skew)
            half = center * (self.half_spread + self.vol_mult * vol)
            out.append(Order(BUY, self.size, round(center - half, 2), asset, ttl=1))
            out.append(Order(SELL, self.size, round(center + half, 2), asset, ttl=1))
        return out


class Fundamentalist(Trader):
    """Buys below V^pub and sells above it, more the larger the gap; otherwise rests a passive
    order on the side of value."""

    kind = "fundamentalist"

    def __init__(self, slot: int, rng: np.random.Generator):
        super().__init__(slot, rng)
        self.threshold = rng.uniform(0.001, 0.006)
        self.intensity = rng.uniform(300.0, 900.0)  # shares per unit of relative mispricing
        self.max_qty = int(rng.integers(4, 12))

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Buy below V^pub, sell above it, more the larger the gap; else rest a passive order
        on the side of value."""
        out = withdraw(view)
        for a in view.assets:
            if a.halted:
                continue
            v = a.public_value
            if a.best_ask is not None and v > a.best_ask * (1 + self.threshold):
                gap = v / a.best_ask - 1
                qty = min(self.max_qty, max(1, int(self.intensity * gap)))
                out.append(Order(BUY, qty, round(v * (1 - self.threshold), 2), a.asset))
            elif a.best_bid is not None and v < a.best_bid * (1 - self.threshold):
                gap = 1 - v / a.best_bid
                qty = min(self.max_qty, max(1, int(self.intensity * gap)))
                out.append(Order(SELL, qty, round(v * (1 + self.threshold), 2), a.asset))
            else:
                side = BUY if ref_price(a) < v else SELL
                price = v * (1 - side * self.threshold)
                out.append(Order(side, max(1, self.max_qty // 3), round(price, 2), a.asset))
        return out


class TrendFollower(Trader):
    """Extrapolates the move over its look-back window with a marketable order."""

    kind = "trend"

    def __init__(self, slot: int, rng: np.random.Generator):
        super().__init__(slot, rng)
        self.lookback = int(rng.integers(3, 20))
        self.threshold = rng.uniform(0.0005, 0.003)
        self.qty = int(rng.integers(2, 8))
        self.slippage = rng.uniform(0.002, 0.006)

    def signal(self, a: AssetView) -> int:
        """+1 (buy) after a rise over ``lookback`` ticks past ``threshold``, -1 after a fall,
        else 0.
        """
        p = a.recent_prices
        if len(p) <= self.lookback:
            return 0
        move = math.log(p[-1] / p[-1 - self.lookback])
        return BUY if move > self.threshold else SELL if move < -self.threshold else 0

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Trade in the direction of :meth:`signal`, slightly through the reference price."""
        out = withdraw(view)
        for a in view.assets:
            side = self.signal(a)
            if side and not a.halted:
                price = ref_price(a) * (1 + side * self.slippage)
                out.append(Order(side, self.qty, round(price, 2), a.asset, ttl=1))
        return out


class NoiseTrader(Trader):
    """Trades for reasons unrelated to value: random side, mostly limit orders near the mid."""

    kind = "noise"

    def __init__(self, slot: int, rng: np.random.Generator):
        super().__init__(slot, rng)
        self.market_prob = rng.uniform(0.2, 0.5)
        self.width = rng.uniform(0.001, 0.004)
        self.max_qty = int(rng.integers(2, 8))

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """A random side and quantity: a limit order near the reference price, or now and then
        an aggressive one."""
        out = withdraw(view)
        for a in view.assets:
            # Draw the same variates whether or not the market is halted, so the draws of
            # later decisions never depend on halts.
            side = BUY if self.rng.random() < 0.5 else SELL
            aggressive = self.rng.random() < self.market_prob
            offset = abs(self.rng.normal(0.0, self.width))
            qty = int(self.rng.integers(1, self.max_qty + 1))
            if a.halted:
                continue
            mid = ref_price(a)
            if aggressive:
                price = mid * (1 + side * (0.005 + offset))
                out.append(Order(side, qty, round(price, 2), a.asset, ttl=1))
            else:
                out.append(Order(side, qty, round(mid * (1 - side * offset), 2), a.asset))
        return out


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

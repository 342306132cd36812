"""The classical traders of issue 23: bounded target positions, and market makers whose spread
follows volatility up to a maximum-spread obligation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.agents.classical import (
    Fundamentalist,
    MarketMaker,
    NoiseTrader,
    TrendFollower,
    activity_path,
)
from market_agents.analysis import realism
from market_agents.market.types import BUY, SELL, AssetView, MarketView, Order


def view(mid: float, value: float, shares: int, tick: int = 100, cash: float = 20_000.0,
         history: tuple[float, ...] | None = None) -> MarketView:
    prices = history if history is not None else (mid,) * 20
    asset = AssetView(0, value, mid, mid, mid * 0.999, mid * 1.001, 5, 5, prices, False, shares)
    return MarketView(tick, 7, (asset,), cash, cash + shares * mid, None, 1.0, ())


def orders(actions) -> list[Order]:
    return [a for a in actions if isinstance(a, Order)]


@settings(max_examples=60, deadline=None)
@given(st.floats(0.2, 5.0), st.one_of(st.just(20), st.integers(0, 60)), st.integers(0, 2**16))
def test_a_fundamentalists_order_never_takes_its_holding_outside_0_to_twice_its_start(
        ratio, shares, seed):
    trader = Fundamentalist(7, np.random.default_rng(seed))
    trader.decide(view(100.0, 100.0, 20))  # the first decision reads the opening holding
    for order in orders(trader.decide(view(100.0 * ratio, 100.0, shares))):
        after = shares + order.side * order.qty
        # Toward [0, 40]: never past its far end, and never away from it.
        assert 0 <= after <= 40 or abs(after - 20) < abs(shares - 20)
        if shares == 20 and ratio > 1.02:  # at its start and well above value: sells
            assert order.side == SELL
        if shares == 20 and ratio < 0.98:
            assert order.side == BUY


@settings(max_examples=40, deadline=None)
@given(st.floats(-0.2, 0.2), st.integers(0, 2**16))
def test_a_trend_followers_target_is_bounded_whatever_the_trend(move, seed):
    trader = TrendFollower(7, np.random.default_rng(seed))
    trader.decide(view(100.0, 100.0, 20))
    for _ in range(30):  # a persistent trend of `move` per decision
        price = trader.seen[0] * np.exp(move)
        for order in orders(trader.decide(view(price, 100.0, 20))):
            assert order.qty <= trader.qty
            assert order.side == (BUY if move > 0 else SELL)
    assert abs(trader.trend[0]) <= abs(move) + 1e-12


def test_noise_traders_lean_back_toward_their_opening_holding():
    buys = {}
    for shares in (0, 20, 60):
        n = 0
        for seed in range(400):
            trader = NoiseTrader(7, np.random.default_rng(seed))
            trader.decide(view(100.0, 100.0, 20))
            n += sum(o.side == BUY for o in orders(trader.decide(view(100.0, 100.0, shares))))
        buys[shares] = n / 400
    assert buys[0] > 0.6 > buys[20] > 0.4 > buys[60]


def test_market_makers_quote_within_their_maximum_spread_however_volatile():
    maker = MarketMaker(0, np.random.default_rng(1), 290)
    maker.decide(view(100.0, 100.0, 290))
    maker.variance[0] = 0.05**2  # a 5 % per-tick volatility estimate
    bid, ask = sorted(orders(maker.decide(view(100.0, 100.0, 290))), key=lambda o: o.side)[::-1]
    assert bid.side == BUY and ask.side == SELL
    assert (ask.price - bid.price) / 2 <= 100.0 * MarketMaker.MAX_HALF_SPREAD + 0.011
    # ... and in calm markets the spread follows the estimate: narrower than the cap.
    calm = MarketMaker(0, np.random.default_rng(1), 290)
    calm.decide(view(100.0, 100.0, 290))
    quotes = orders(calm.decide(view(100.0, 100.0, 290)))
    assert max(o.price for o in quotes) - min(o.price for o in quotes) < 2 * 100.0 * 0.005
    assert SELL in {o.side for o in quotes}


def test_noise_order_sizes_have_a_pareto_tail_capped_at_the_maximum():
    sizes = []
    for seed in range(300):
        trader = NoiseTrader(7, np.random.default_rng(seed))
        for tick in range(100, 120):
            sizes += [o.qty for o in orders(trader.decide(view(100.0, 100.0, 20, tick=tick)))]
    sizes = np.array(sizes)
    assert sizes.min() >= 1 and sizes.max() == NoiseTrader.MAX_SIZE
    # P(size > s) = s^-1.2 below the cap: the share above 10 shares is 10^-1.2 = 6.3 %
    assert np.mean(sizes > 10) == pytest.approx(10 ** -NoiseTrader.SIZE_TAIL, abs=0.01)


def test_aggressive_noise_orders_are_ioc_and_more_frequent_when_activity_is_high():
    def aggressive_share(level: float) -> float:
        n = ioc = 0
        for seed in range(200):
            trader = NoiseTrader(7, np.random.default_rng(seed), [level] * 200)
            for o in orders(trader.decide(view(100.0, 100.0, 20))):
                n += 1
                ioc += o.ttl == 0
                # an aggressive order is priced at least 0.5 % through the mid
                assert o.ttl != 0 or abs(o.price / 100.0 - 1) >= 0.0049
        return ioc / n

    normal, busy = aggressive_share(1.0), aggressive_share(2.0)
    assert 0.4 < normal < 0.6  # p ~ U(0.28, 0.70)
    assert busy > normal + 0.2


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_trading_activity_is_normal_or_a_burst_lasting_hundreds_of_ticks(seed):
    a = activity_path(20_000, np.random.default_rng(seed))
    assert a.shape == (20_000,) and (a >= 1.0).all()
    # persistent: a spell far outlives the 20-tick decision interval (half-life 1,000 ticks)
    x = np.log(a)
    if x.std() > 0.05:
        assert realism.acf_many(x - x.mean(), 100)[99] > 0.5


def test_trading_activity_spends_about_half_its_time_normal():
    normal = [np.mean(activity_path(20_000, np.random.default_rng(s)) == 1.0) for s in range(40)]
    assert 0.35 < np.median(normal) < 0.65
    assert activity_path(0, np.random.default_rng(0)).shape == (0,)
    with pytest.raises(ValueError):
        activity_path(-1, np.random.default_rng(0))

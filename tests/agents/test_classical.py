"""The classical traders of issue 23: bounded target positions, and market makers whose spread
follows volatility up to a maximum-spread obligation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.agents.classical import (
    Fundamentalist,
    MarketMaker,
    NoiseTrader,
    TrendFollower,
)
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

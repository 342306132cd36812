"""Trend followers (agents/traders/trend.py): a bounded target position."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.agents.traders.trend import TrendFollower
from market_agents.market.types import BUY, SELL
from tests.agents.traders.support import orders, view


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

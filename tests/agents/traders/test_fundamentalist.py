"""Fundamentalists (agents/traders/fundamentalist.py): a bounded target position."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.agents.traders.fundamentalist import Fundamentalist
from market_agents.market.types import BUY, SELL
from tests.agents.traders.support import orders, view


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

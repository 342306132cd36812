"""Market makers (agents/traders/market_maker.py): a spread that follows volatility up to a
maximum-spread obligation."""

from __future__ import annotations

import numpy as np

from market_agents.agents.traders.market_maker import MarketMaker
from market_agents.market.types import BUY, SELL
from tests.agents.traders.support import orders, view


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

"""Statistical arbitrageurs (agents/traders/statarb.py): the rich leg sold, the cheap one bought,
and only in a two-asset market."""

from __future__ import annotations

import numpy as np
import pytest

from market_agents.agents.traders.statarb import StatArb
from market_agents.config import load_config
from market_agents.errors import ConfigError
from market_agents.market.types import BUY, SELL, AssetView, MarketView


def two_assets(mid0: float, mid1: float) -> MarketView:
    assets = tuple(AssetView(i, 100.0, mid, mid, mid - 0.05, mid + 0.05, 5, 5, (mid,) * 20,
                             False, 20) for i, mid in enumerate((mid0, mid1)))
    return MarketView(60, 7, assets, 20_000.0, 24_000.0, None, 1.0, ())


def test_it_sells_the_rich_leg_and_buys_the_cheap_one():
    trader = StatArb(7, np.random.default_rng(1))
    sell, buy = trader.decide(two_assets(102.0, 99.0))  # asset 0 rich against its V^pub
    assert (sell.side, sell.asset, buy.side, buy.asset) == (SELL, 0, BUY, 1)
    assert sell.qty == buy.qty == trader.qty
    assert trader.decide(two_assets(100.0, 100.0)) == []  # no gap: nothing


def test_a_mix_with_statarb_needs_two_assets(baseline_path):
    with pytest.raises(ConfigError, match=r"population\.mix\.statarb needs "
                       r"fundamentals\.n_assets: 2"):
        load_config(baseline_path, ["population.mix.statarb=0.05", "population.mix.noise=0.35"])
    two = load_config(baseline_path, ["population.mix.statarb=0.05", "population.mix.noise=0.35",
                                      "fundamentals.n_assets=2"])
    assert two.population.mix["statarb"] == 0.05

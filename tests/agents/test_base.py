"""The trader contract (agents/base.py): what a type inherits, the run context's shared draws,
and the order helpers."""

from __future__ import annotations

import numpy as np

from market_agents.agents.base import (
    Opening,
    RunContext,
    Trader,
    opening_holdings,
    ref_price,
    toward,
    withdraw,
)
from market_agents.config import Config
from market_agents.market.types import BUY, SELL, AssetView, Cancel, MarketView, Order
from market_agents.rng import Streams


class Idle(Trader):
    name = "idle"

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        return []


def asset(mid: float, last: float = 100.0, shares: int = 20) -> AssetView:
    return AssetView(0, 100.0, last, mid, None, None, 0, 0, (), False, shares)


def test_a_type_inherits_the_ordinary_contract():
    cfg = Config()
    trader = Idle.build(3, np.random.default_rng(0), RunContext(cfg, Streams(0)))
    assert isinstance(trader, Idle) and trader.slot == 3
    assert Idle.opening(cfg, llm=False) == Opening(20_000.0, 20, 1.0)
    assert Idle.in_mix and Idle.default_share is None and not Idle.every_tick
    assert Idle.check(cfg) is None


def test_a_shared_draw_is_made_once_per_run():
    run, made = RunContext(Config(), Streams(0)), []
    for _ in range(3):
        value = run.shared("x", lambda: made.append(1) or [1.0, 2.0])
    assert made == [1] and value == [1.0, 2.0]


def test_order_helpers():
    a = asset(101.0)
    assert ref_price(a) == 101.0 and ref_price(asset(0.0, last=99.5)) == 99.5
    assert toward(a, 20, 100.0, 5) == []
    assert toward(a, 30, 100.004, 4) == [Order(BUY, 4, 100.0, 0, ttl=None)]
    assert toward(a, 17, 100.0, 5, ttl=0) == [Order(SELL, 3, 100.0, 0, ttl=0)]
    view = MarketView(5, 1, (asset(100.0, shares=-2),), 0.0, 0.0, None, 1.0, ())
    assert withdraw(view) == [] and opening_holdings(view) == [0]
    assert withdraw(view._replace(open_orders=((1, 0, BUY, 99.0, 1),))) == [Cancel()]

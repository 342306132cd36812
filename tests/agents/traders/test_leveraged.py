"""Leveraged trend followers (agents/traders/leveraged.py): they use their leverage, and open
a margin account unless an LLM trader sits in their slot."""

from __future__ import annotations

import numpy as np

from market_agents.agents.traders.leveraged import LeveragedTrader
from market_agents.config import Config
from market_agents.market.types import BUY, SELL, AssetView, MarketView


def view(prices: list[float], shares: int = 0, wealth: float = 2_500.0) -> MarketView:
    asset = AssetView(0, 100.0, prices[-1], prices[-1], prices[-1] - 0.05, prices[-1] + 0.05,
                      5, 5, tuple(prices), False, shares)
    return MarketView(60, 7, (asset,), wealth, wealth, None, 4.0)


def test_leveraged_trader_targets_its_leverage_on_a_strong_signal():
    trader = LeveragedTrader(7, np.random.default_rng(3), 4.0)
    up = [100.0 * 1.002**i for i in range(21)]  # +4 % over 20 ticks: a strong up-trend
    (order,) = trader.decide(view(up))
    price = up[-1] * (1 + trader.slippage)
    assert order.side == BUY and order.qty == int(trader.use * 4.0 * 2_500.0 / price)
    assert order.qty * price > 3 * 2_500.0  # levered: more than 3x its equity
    # A strong down-trend reverses it to the same size short; a flat market leaves it alone.
    (flip,) = trader.decide(view(up[::-1], shares=order.qty))
    assert flip.side == SELL and flip.qty > order.qty
    assert trader.decide(view([100.0] * 21, shares=order.qty)) == []


def test_a_leveraged_slot_opens_a_margin_account_unless_an_llm_trader_sits_in_it():
    cfg = Config.model_validate({"population": {"leveraged_cash": 1_000.0},
                                 "exchange": {"max_leverage": 3.0}})
    assert LeveragedTrader.opening(cfg, llm=False) == (1_000.0, 0, 3.0)
    assert LeveragedTrader.opening(cfg, llm=True) == (20_000.0, 20, 1.0)

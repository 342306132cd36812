"""What the trader types' tests share: a one-asset view and the orders among actions."""

from __future__ import annotations

from market_agents.market.types import AssetView, MarketView, Order


def view(mid: float, value: float, shares: int, tick: int = 100, cash: float = 20_000.0,
         history: tuple[float, ...] | None = None) -> MarketView:
    """Slot 7's view of one asset at ``mid`` (a one-cent-wide book around it), V^pub
    ``value``."""
    prices = history if history is not None else (mid,) * 20
    asset = AssetView(0, value, mid, mid, mid * 0.999, mid * 1.001, 5, 5, prices, False, shares)
    return MarketView(tick, 7, (asset,), cash, cash + shares * mid, None, 1.0, ())


def orders(actions) -> list[Order]:
    """The orders among ``actions`` (cancels left out)."""
    return [a for a in actions if isinstance(a, Order)]

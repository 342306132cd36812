"""What traders send to the exchange and what they are allowed to see.

Prices in orders are floats in currency units; the exchange works in integer ticks
(``tick_size``) so that cash and shares are conserved exactly.
"""

from __future__ import annotations

from typing import NamedTuple

BUY = 1
SELL = -1


# Orders and cancels are NamedTuples: tens of thousands are made per run, and a
# NamedTuple is three times cheaper to build than a frozen dataclass.
class Order(NamedTuple):
    """A limit order (``price`` set) or a market order (``price=None``, immediate-or-cancel).

    ``ttl=0`` makes a limit order immediate-or-cancel too: it trades what it can at once and
    the rest is cancelled, never resting (an IOC order, as on every electronic exchange)."""

    side: int  # BUY or SELL
    qty: int
    price: float | None = None
    asset: int = 0
    ttl: int | None = None  # ticks to live; None: the exchange default; 0: IOC


class Cancel(NamedTuple):
    """Cancel one resting order by id, or every resting order of the trader (``order_id=None``)."""

    order_id: int | None = None
    asset: int | None = None


# Views are NamedTuples for the same reason: one is built per trader per decision.
class AssetView(NamedTuple):
    """What any trader sees of one asset: V^pub (never V), last and mid prices, best quotes and
    sizes, recent prices and whether it is halted.
    """

    asset: int
    public_value: float  # V^pub: the only value signal any trader sees
    last_price: float
    mid_price: float
    best_bid: float | None
    best_ask: float | None
    bid_size: int
    ask_size: int
    recent_prices: tuple[float, ...]  # last `history` mid prices, oldest first
    halted: bool
    shares: int  # the viewer's position in this asset


class MarketView(NamedTuple):
    """Everything one trader may know at a decision: public market data, its own account and
    the rules it trades under (its position limit and leverage, the fee on each trade)."""

    tick: int
    slot: int
    assets: tuple[AssetView, ...]
    cash: float
    wealth: float  # cash + shares marked at mid
    position_limit: int | None
    max_leverage: float  # 1.0 for unlevered traders
    open_orders: tuple[tuple[int, int, int, float, int], ...] = ()
    # (order_id, asset, side, price, remaining qty)
    fee_rate: float = 0.0  # fraction of a trade's value each side pays (a transaction tax)

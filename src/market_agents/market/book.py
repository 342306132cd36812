"""A limit order book for one asset: price-time priority in integer price ticks.

The book only stores and matches orders. Who may trade, and what a fill does to cash and
shares, is the exchange's business: matching reports each fill through a callback.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterator


class Resting:
    """A resting limit order: id, owner slot, side (+1 buy, -1 sell), price and remaining
    quantity in integer ticks and shares, and the tick it expires.
    """

    __slots__ = ("id", "owner", "side", "price", "qty", "expiry")

    def __init__(self, oid: int, owner: int, side: int, price: int, qty: int, expiry: int):
        self.id = oid
        self.owner = owner
        self.side = side
        self.price = price
        self.qty = qty
        self.expiry = expiry


# fill(resting_order, qty, price_ticks) -> qty actually filled (may be less: the taker ran
# out of funds); the book reduces the resting order by what was filled.
FillFn = Callable[[Resting, int, int], int]


class Book:
    """One asset's limit order book: price levels per side, each a FIFO queue (price-time
    priority), prices in integer ticks.
    """

    def __init__(self) -> None:
        self.levels: dict[int, dict[int, deque[Resting]]] = {1: {}, -1: {}}
        self.prices: dict[int, list[int]] = {1: [], -1: []}  # ascending

    # --- queries ------------------------------------------------------------------------------
    def best(self, side: int) -> int | None:
        """The best price of ``side`` (+1: highest bid, -1: lowest ask), or None when empty."""
        prices = self.prices[side]
        if not prices:
            return None
        return prices[-1] if side == 1 else prices[0]

    def size_at(self, side: int, price: int | None) -> int:
        """The resting quantity of ``side`` at ``price`` (0 for None)."""
        if price is None:
            return 0
        return sum(o.qty for o in self.levels[side].get(price, ()))

    def orders(self, side: int) -> Iterator[Resting]:
        """In priority order: best price first, then time."""
        prices = self.prices[side]
        for p in reversed(prices) if side == 1 else prices:
            yield from self.levels[side][p]

    def is_crossed(self) -> bool:
        """Whether the best bid meets or passes the best ask."""
        bid, ask = self.best(1), self.best(-1)
        return bid is not None and ask is not None and bid >= ask

    # --- mutation -----------------------------------------------------------------------------
    def add(self, order: Resting) -> None:
        """Queue ``order`` at the back of its price level."""
        level = self.levels[order.side].get(order.price)
        if level is None:
            level = self.levels[order.side][order.price] = deque()
            bisect.insort(self.prices[order.side], order.price)
        level.append(order)

    def remove(self, order: Resting) -> None:
        """Take ``order`` out of its level (a fill, a cancel or an expiry)."""
        level = self.levels[order.side][order.price]
        level.remove(order)
        if not level:
            del self.levels[order.side][order.price]
            prices = self.prices[order.side]
            del prices[bisect.bisect_left(prices, order.price)]

    def match(self, side: int, qty: int, limit: int | None, owner: int, fill: FillFn,
              on_self: Callable[[Resting], None]) -> int:
        """Match an incoming order against the opposite side; return the unfilled quantity.

        A resting order of the same owner is cancelled instead of traded (self-trade
        prevention), so no trader can print volume with itself.
        """
        opp = -side
        while qty > 0:
            best = self.best(opp)
            if best is None:
                break
            if limit is not None and (best > limit if side == 1 else best < limit):
                break
            head = self.levels[opp][best][0]
            if head.owner == owner:
                on_self(head)
                continue
            done = fill(head, min(qty, head.qty), best)
            if done <= 0:
                break
            qty -= done
            head.qty -= done
            if head.qty == 0:
                self.remove(head)
        return qty

    def clearing_price(self, reference: int) -> tuple[int, int] | None:
        """The call-auction price: most volume, then least imbalance, then nearest reference."""
        if not self.is_crossed():
            return None
        bids = sorted(self.levels[1].items(), reverse=True)
        asks = sorted(self.levels[-1].items())
        best: tuple[int, int, int, int] | None = None  # (-volume, imbalance, distance, price)
        for p in sorted(set(self.prices[1]) | set(self.prices[-1])):
            demand = sum(sum(o.qty for o in q) for bp, q in bids if bp >= p)
            supply = sum(sum(o.qty for o in q) for ap, q in asks if ap <= p)
            vol = min(demand, supply)
            if vol == 0:
                continue
            key = (-vol, abs(demand - supply), abs(p - reference), p)
            if best is None or key < best:
                best = key
        return None if best is None else (best[3], -best[0])

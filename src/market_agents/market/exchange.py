"""The exchange: books, accounts, order rules, halts and the trade and order logs.

Cash is held in integer price ticks (cents at the default tick size) so that total cash and
total shares are conserved exactly; :meth:`Exchange.conservation_ok` checks it.
Market rules (the circuit breaker, position limits, margin calls, a transaction tax) are
mechanisms on the exchange's events (:mod:`market_agents.market.mechanism`) that act only
through its public methods: :meth:`Exchange.halt`, :meth:`Exchange.charge`,
:meth:`Exchange.submit`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from market_agents.config import ExchangeConfig
from market_agents.market.book import Book, Resting
from market_agents.market.types import BUY, Cancel, Order

# The largest order the exchange represents: integer ticks and share counts stay exact and far
# from float overflow (a price of 1e308 would overflow when converted to ticks).
MAX_ORDER_QTY = 10**9
MAX_PRICE_TICKS = 10**12
# A limit within this fraction of a tick of the grid is on the grid: in floats 100.01 / 0.01 is
# 10000.999999999998, and rounding that down would move every on-grid buy a tick lower.
GRID_TOLERANCE = 1e-9
# Why the exchange itself refuses an order (orders.parquet ``reason``), in the order it checks:
# malformed, halted, then each mechanism's refusals (their own ``admit``), then funds. Outcomes
# count each reason of :meth:`Exchange.refusal_reasons` as ``rejects_<reason>`` in every run.
CHECKED_FIRST = ("invalid", "halted")
CHECKED_LAST = ("insufficient_funds",)
# Labels of the exchange's own activity outcomes and refusals (``ma summary``, the paper).
ACTIVITY_LABELS = {"n_halts": ("halts", "{:.2f}"), "halted_ticks": ("halted", "{:.1f}")}
REFUSAL_LABELS = {"invalid": "rej:inval", "halted": "rej:halt",
                  "insufficient_funds": "rej:funds"}


def limit_ticks(price: float, side: int, tick_size: float) -> int:
    """A limit price as integer ticks, rounded towards the passive side (issue 25).

    A buy limited at 100.006 rests at 100.00 and a sell at 99.994 at 100.00 (tick 0.01), so no
    order trades beyond the limit its trader set; rounding to the nearest tick once let a buy
    at 100.006 pay 100.01 (PAMS PR #48 fixed the same). A price within ``GRID_TOLERANCE`` of a
    tick (plus the float resolution of large prices) counts as on the grid and keeps its tick.

    Args:
        price: the limit in currency units, positive and finite.
        side: ``BUY`` (rounded down) or ``SELL`` (rounded up).
        tick_size: the exchange's tick size.

    Returns:
        The limit in ticks; 0 for a buy limited below one tick (``order_problem`` refuses it).
    """
    x = price / tick_size
    near = round(x)  # an int
    off = abs(x - near)
    # the plain tolerance first: most limits are on the grid, and math.ulp only widens it
    if off <= GRID_TOLERANCE or off <= GRID_TOLERANCE + 4 * math.ulp(x):
        return near
    return math.floor(x) if side == BUY else math.ceil(x)


class _PriceOf(dict):
    """Integer ticks -> the price in currency units (rounded to 10 decimals), each computed
    once: rounding is the dearest step of logging a price, and a run logs about 15,000."""

    def __init__(self, tick_size: float):
        super().__init__()
        self.tick_size = tick_size

    def __missing__(self, ticks: int) -> float:
        price = self[ticks] = round(ticks * self.tick_size, 10)
        return price


def order_limit(order: Order, n_assets: int, tick_size: float) -> tuple[str | None, int | None]:
    """``order``'s problem (:func:`order_problem`) and, for a well-formed limit order, its
    limit in ticks (:func:`limit_ticks`; None for a market order or a refused one): the
    exchange rounds each limit once."""
    side, qty, price, asset = order.side, order.qty, order.price, order.asset
    if side not in (1, -1) or not 0 <= asset < n_assets or qty <= 0 or (
            price is not None and not (math.isfinite(price) and price > 0)):
        return "invalid", None
    if qty > MAX_ORDER_QTY:
        return "qty_out_of_range", None
    if price is None:
        return None, None
    if price / tick_size > MAX_PRICE_TICKS:
        return "price_out_of_range", None
    limit = limit_ticks(price, side, tick_size)
    return ("price_out_of_range", None) if limit < 1 else (None, limit)


def order_problem(order: Order, n_assets: int, tick_size: float) -> str | None:
    """Why the exchange cannot take ``order`` at all (None: well formed): ``invalid`` (side,
    asset, quantity below 1, a price that is not a positive finite number),
    ``qty_out_of_range`` or ``price_out_of_range`` (beyond what it represents exactly, or a
    buy limited below one tick: rounded down to the grid it would be a price of zero)."""
    return order_limit(order, n_assets, tick_size)[0]


@dataclass
class Account:
    """A trader's account, in integer ticks and shares: cash, shares per asset, leverage,
    what open orders commit, and the open orders themselves.
    """

    slot: int
    kind: str
    is_llm: bool
    cash: int  # price ticks
    shares: list[int]
    leverage: float = 1.0  # > 1: may borrow cash and sell short up to this multiple of equity
    committed_cash: int = 0
    committed_sell: list[int] = field(default_factory=list)
    committed_buy: list[int] = field(default_factory=list)
    open_orders: dict[int, Resting] = field(default_factory=dict)
    order_asset: dict[int, int] = field(default_factory=dict)


class Fill(NamedTuple):
    """One fill: ``qty`` shares of ``asset`` at ``price`` (integer ticks) from ``seller`` to
    ``buyer``; ``taker_side`` is the side of the order that met the resting one
    (``buy_id``/``sell_id``: the two orders' ids)."""

    asset: int
    buyer: Account
    seller: Account
    qty: int
    price: int
    taker_side: int
    buy_id: int
    sell_id: int


class Exchange:
    """The exchange of one run: a book per asset (or a periodic call auction), accounts, order
    checks (funds, short sales, position limits, halts), fills, expiries and the order and trade
    logs. Cash is integer ticks, so conservation of cash and shares is exact.

    Args:
        cfg: the ``exchange`` config.
        n_assets: 1 or 2.
        start_prices: the opening price of each asset (currency units).
    """

    def __init__(self, cfg: ExchangeConfig, n_assets: int, start_prices: list[float]):
        self.cfg = cfg
        self.n_assets = n_assets
        self.books = [Book() for _ in range(n_assets)]
        self.accounts: dict[int, Account] = {}
        self.tick = 0
        self.next_id = 1
        self.expiries: list[tuple[int, int, int, int]] = []  # (expiry, id, owner, asset)
        self.last = [self.to_ticks(p) for p in start_prices]
        self.mid = [float(p) for p in start_prices]
        self.halted_until = -1
        self.halts: list[list[int]] = []
        self.mechanisms: list[Any] = []  # market.mechanism.Mechanism instances
        self._admit: list = []  # the installed mechanisms' hooks, by event
        self._on_fill: list = []
        self._end_tick: list = []
        self.pot = 0  # cash the mechanisms charged (ticks): counted in the conserved total
        self.tick_volume = [0] * n_assets
        self.tick_trades = [0] * n_assets
        # Logs are lists of row tuples (cheap to append); see ORDER_COLUMNS, TRADE_COLUMNS.
        self.order_rows: list[tuple] = []
        self.trade_rows: list[tuple] = []
        self._initial: tuple[int, list[int]] | None = None
        # Read on every order: the settings once, and each tick count's price once (rounding
        # to 10 decimals is the dearest step of logging a price).
        self._tick_size = cfg.tick_size
        self._order_ttl = cfg.order_ttl
        self._call_auction = cfg.mechanism == "call_auction"
        self.price_of = _PriceOf(cfg.tick_size)  # ticks -> price: to_price, as a mapping

    # --- units --------------------------------------------------------------------------------
    def to_ticks(self, price: float) -> int:
        """A price in currency units as integer ticks (at least 1)."""
        return max(1, int(round(price / self.cfg.tick_size)))

    def to_price(self, ticks: int) -> float:
        """Integer ticks as a price in currency units."""
        return self.price_of[ticks]

    # --- accounts -----------------------------------------------------------------------------
    def open_account(self, slot: int, kind: str, is_llm: bool, cash: float, shares: int,
                     leverage: float = 1.0) -> Account:
        """Open the account of ``slot`` with ``cash`` (currency units) and ``shares`` of each
        asset; ``leverage`` > 1 may borrow cash and sell short up to that multiple of equity.
        """
        self.open_accounts([(slot, kind, is_llm, cash, shares, leverage)])
        return self.accounts[slot]

    def open_accounts(self, rows: Iterable[tuple[int, str, bool, float, int, float]]) -> None:
        """:meth:`open_account` for each ``(slot, kind, is_llm, cash, shares, leverage)`` row,
        in order, each opening cash converted to ticks once (a population of 10,000 slots
        opens a handful of different accounts)."""
        n, accounts, in_ticks = self.n_assets, self.accounts, {}
        for slot, kind, is_llm, cash, shares, leverage in rows:
            ticks = in_ticks.get(cash)
            if ticks is None:
                ticks = in_ticks[cash] = self.to_ticks(cash) if cash > 0 else 0
            accounts[slot] = Account(slot, kind, is_llm, ticks, [shares] * n, leverage, 0,
                                     [0] * n, [0] * n)

    def install(self, mechanisms: Iterable[Any]) -> None:
        """Run ``mechanisms`` (:class:`market_agents.market.mechanism.Mechanism`, which
        imports this module) at the exchange's events, in the order given."""
        for m in mechanisms:
            self.mechanisms.append(m)
            for hooks, hook in ((self._admit, m.admit), (self._on_fill, m.on_fill),
                                (self._end_tick, m.end_tick)):
                if hook is not None:
                    hooks.append(hook)

    def charge(self, acct: Account, ticks: int) -> None:
        """Move ``ticks`` of cash from ``acct`` to the exchange's pot (a mechanism's fee)."""
        acct.cash -= ticks
        self.pot += ticks

    def credit(self, acct: Account, ticks: int) -> None:
        """Move ``ticks`` of cash from the exchange's pot to ``acct`` (a mechanism's rebate)."""
        acct.cash += ticks
        self.pot -= ticks

    def seal(self) -> None:
        """Record the totals that must be conserved (after all accounts are open)."""
        self._initial = self._totals()

    def _totals(self) -> tuple[int, list[int]]:
        cash = self.pot + sum(a.cash for a in self.accounts.values())
        shares = [sum(a.shares[i] for a in self.accounts.values()) for i in range(self.n_assets)]
        return cash, shares

    def conservation_ok(self) -> bool:
        """Whether total cash (the accounts' and the mechanisms' pot) and shares equal their
        totals at the opening (checked at the end of every run).
        """
        return self._initial is not None and self._totals() == self._initial

    def equity(self, acct: Account) -> float:
        """The account's equity in ticks: cash plus shares marked at the mid."""
        held = 0.0  # shares marked at the mid, in ticks
        mid, tick = self.mid, self._tick_size
        for asset, s in enumerate(acct.shares):
            held += s * (mid[asset] / tick)
        return acct.cash + held

    def mid_ticks(self, asset: int) -> float:
        """The mid price of ``asset`` in ticks."""
        return self.mid[asset] / self.cfg.tick_size

    # --- market state -------------------------------------------------------------------------
    @property
    def halted(self) -> bool:
        """Whether trading is halted this tick (by a mechanism: the circuit breaker)."""
        return self.tick < self.halted_until

    def halt(self, until: int) -> None:
        """Halt trading until tick ``until`` (recorded once per halt)."""
        if not self.halted:
            self.halts.append([self.tick, until])
            self.halted_until = until

    def begin_tick(self, tick: int) -> None:
        """Start tick ``tick``: reset the tick's volume and trades, expire orders whose time is
        up."""
        self.tick = tick
        self.tick_volume = [0] * self.n_assets
        self.tick_trades = [0] * self.n_assets
        expiries = self.expiries
        accounts = self.accounts
        while expiries and expiries[0][0] <= tick:
            _, oid, owner, asset = heapq.heappop(expiries)
            order = accounts[owner].open_orders.get(oid)
            if order is not None:
                self._drop(owner, order, asset)

    def end_tick(self) -> None:
        """Close the tick: run the call auction when one is due, update the mids, then the
        mechanisms' ``end_tick`` (circuit breaker, margin calls)."""
        if self.cfg.mechanism == "call_auction" and self.tick % self.cfg.auction_interval == 0:
            for asset in range(self.n_assets):
                self._auction(asset)
        self.update_mids()
        for hook in self._end_tick:
            hook()

    def update_mids(self) -> None:
        """Set each asset's mid from its book: the midpoint of the best quotes, the last trade
        when the book is empty, unchanged when one side is empty."""
        for asset, book in enumerate(self.books):
            bid, ask = book.best(BUY), book.best(-BUY)
            if bid is not None and ask is not None and bid < ask:
                self.mid[asset] = (bid + ask) / 2 * self.cfg.tick_size
            elif bid is None and ask is None:
                self.mid[asset] = self.to_price(self.last[asset])

    # --- orders -------------------------------------------------------------------------------
    def submit(self, slot: int, action: Order | Cancel, kind: str | None = None) -> int:
        """Check, log and execute one action of ``slot``.

        Args:
            slot: the account it is for.
            action: an order or a cancel.
            kind: the order log's ``kind`` of an order a mechanism sends on the account's
                behalf (e.g. ``margin_call``); None: the trader's own (``limit`` or ``market``).

        Returns:
            The order's id (0 for a cancel).
        """
        acct = self.accounts[slot]
        if isinstance(action, Cancel):
            self._log(acct, -1 if action.asset is None else action.asset, 0, "cancel", 0, 0, None,
                      None)
            targets = list(acct.open_orders.values()) if action.order_id is None else [
                acct.open_orders[action.order_id]] if action.order_id in acct.open_orders else []
            for order in targets:
                asset = acct.order_asset[order.id]
                if action.asset is None or action.asset == asset:
                    self._drop(slot, order, asset)
            return 0
        if kind is None:
            kind = "market" if action.price is None else "limit"
        if kind == "market" and self._call_auction and (
                0 <= action.asset < self.n_assets and action.side in (1, -1)):
            # A market order joins the next auction as a limit 10 % through the last price,
            # and is funded (checked and committed) at that limit like any other.
            last = self.to_price(self.last[action.asset])
            action = action._replace(price=round(last * (1 + 0.1 * action.side), 10))
        reason, limit = order_limit(action, self.n_assets, self._tick_size)
        if reason is None:
            reason = self._check(acct, action, limit)
        oid = self.next_id
        self.next_id += 1
        self._log(acct, action.asset, oid, kind, action.side, action.qty, action.price, reason,
                  None if limit is None else self.to_price(limit))
        if reason is None:
            self._execute(acct, action, oid, limit)
        return oid

    def _check(self, acct: Account, o: Order, limit: int | None) -> str | None:
        """Why a well-formed order is refused (None: accepted); ``limit`` is its price in ticks."""
        if self.tick < self.halted_until:  # self.halted
            return "halted"
        for admit in self._admit:
            reason = admit(acct, o, limit)
            if reason is not None:
                return reason
        a = o.asset
        ref = limit if limit is not None else self.reference(a, o.side)
        if acct.leverage <= 1.0:
            if o.side == BUY and acct.cash - acct.committed_cash < ref * o.qty:
                return "insufficient_funds"
            if o.side != BUY and acct.shares[a] - acct.committed_sell[a] < o.qty:
                return "insufficient_funds"
        else:
            equity = self.equity(acct)
            after = acct.shares[a] + o.side * o.qty
            reduces = abs(after) <= abs(acct.shares[a])
            if not reduces and (equity <= 0 or abs(after) * ref > acct.leverage * equity):
                return "insufficient_funds"
        return None

    def reference(self, asset: int, side: int) -> int:
        """The price (ticks) a market order of ``side`` is checked at: the best quote it
        would meet, else the last trade."""
        best = self.books[asset].best(-side)
        return best if best is not None else self.last[asset]

    def _execute(self, acct: Account, o: Order, oid: int, limit: int | None) -> None:
        if self._call_auction:  # orders wait for the next auction
            self._rest(acct, o, oid, limit)
            return
        book = self.books[o.asset]
        left = o.qty
        opposite = book.prices[-o.side]  # book.best(-o.side), without the call
        best = (opposite[0] if o.side == BUY else opposite[-1]) if opposite else None
        # Most orders do not cross: they skip the matching machinery and rest at once.
        if best is not None and (limit is None or (best <= limit if o.side == BUY
                                                   else best >= limit)):
            def fill(resting: Resting, qty: int, price: int) -> int:
                if acct.leverage <= 1.0 and o.side == BUY:
                    qty = min(qty, (acct.cash - acct.committed_cash) // price)
                if qty > 0:
                    self._settle(o.asset, acct, self.accounts[resting.owner], resting, o.side,
                                 qty, price, oid)
                return qty

            left = book.match(o.side, o.qty, limit, acct.slot, fill,
                              lambda r: self._drop(acct.slot, r, o.asset))
        if left > 0 and limit is not None and o.ttl != 0:  # ttl 0: IOC, the rest cancelled
            self._rest(acct, o, oid, limit, left)

    def _rest(self, acct: Account, o: Order, oid: int, limit: int, qty: int | None = None) -> None:
        qty = o.qty if qty is None else qty
        asset = o.asset
        expiry = self.tick + (o.ttl if o.ttl is not None else self._order_ttl)
        order = Resting(oid, acct.slot, o.side, limit, qty, expiry)
        self.books[asset].add(order)
        acct.open_orders[oid] = order
        acct.order_asset[oid] = asset
        if o.side == BUY:  # self._commit(acct, asset, order, +1), inline: one per resting order
            acct.committed_buy[asset] += qty
            acct.committed_cash += qty * limit
        else:
            acct.committed_sell[asset] += qty
        heapq.heappush(self.expiries, (expiry, oid, acct.slot, asset))

    def _commit(self, acct: Account, asset: int, order: Resting, sign: int, qty: int | None = None
                ) -> None:
        q = order.qty if qty is None else qty
        if order.side == BUY:
            acct.committed_buy[asset] += sign * q
            acct.committed_cash += sign * q * order.price
        else:
            acct.committed_sell[asset] += sign * q

    def _drop(self, slot: int, order: Resting, asset: int) -> None:
        acct = self.accounts[slot]
        q = order.qty
        if order.side == BUY:  # self._commit(acct, asset, order, -1), inline
            acct.committed_buy[asset] -= q
            acct.committed_cash -= q * order.price
        else:
            acct.committed_sell[asset] -= q
        self.books[asset].remove(order)
        del acct.open_orders[order.id]
        del acct.order_asset[order.id]

    def _settle(self, asset: int, taker: Account, maker: Account, resting: Resting,
                taker_side: int, qty: int, price: int, taker_id: int) -> None:
        """Move cash and shares for one fill; ``resting`` is the maker's order, ``taker_id``
        the id of the order that met it."""
        self._commit(maker, asset, resting, -1, qty)
        if resting.qty == qty:
            del maker.open_orders[resting.id]
            del maker.order_asset[resting.id]
        buyer, seller = (taker, maker) if taker_side == BUY else (maker, taker)
        buyer.cash -= qty * price
        seller.cash += qty * price
        buyer.shares[asset] += qty
        seller.shares[asset] -= qty
        self.last[asset] = price
        self.tick_volume[asset] += qty
        self.tick_trades[asset] += 1
        if self._on_fill:
            buy_id, sell_id = (taker_id, resting.id) if taker_side == BUY else (resting.id,
                                                                                taker_id)
            fill = Fill(asset, buyer, seller, qty, price, taker_side, buy_id, sell_id)
            for hook in self._on_fill:
                hook(fill)
        self.trade_rows.append((self.tick, asset, self.to_price(price), qty, buyer.slot,
                                seller.slot, taker_side, buyer.is_llm, seller.is_llm))

    def _auction(self, asset: int) -> None:
        book = self.books[asset]
        cleared = book.clearing_price(self.last[asset])
        if cleared is None:
            return
        price, volume = cleared
        buys = [o for o in book.orders(BUY) if o.price >= price]
        sells = [o for o in book.orders(-BUY) if o.price <= price]
        i = j = 0
        while volume > 0 and i < len(buys) and j < len(sells):
            b, s = buys[i], sells[j]
            q = min(b.qty, s.qty, volume)
            buyer = self.accounts[b.owner]
            # The buyer committed cash at its limit; release that, then pay the clearing price.
            self._commit(buyer, asset, b, -1, q)
            self._settle(asset, buyer, self.accounts[s.owner], s, BUY, q, price, b.id)
            for o in (b, s):
                o.qty -= q
                if o.qty == 0:
                    book.remove(o)
                    owner = self.accounts[o.owner]
                    owner.open_orders.pop(o.id, None)
                    owner.order_asset.pop(o.id, None)
            volume -= q
            i += b.qty == 0
            j += s.qty == 0

    # --- log ---------------------------------------------------------------------------------
    def _log(self, acct: Account, asset: int, oid: int, kind: str, side: int, qty: int,
             price: float | None, reason: str | None, rounded: float | None = None) -> None:
        """One order-log row; ``reason`` None means accepted. ``price`` is the limit as the
        trader wrote it, ``rounded`` the limit the exchange used (on the tick grid, rounded
        towards the passive side: :func:`limit_ticks`)."""
        self.order_rows.append((self.tick, acct.slot, asset, oid, kind, side, qty, price,
                                "accepted" if reason is None else "rejected", reason,
                                acct.is_llm, rounded))

    @property
    def order_log(self) -> dict[str, list]:
        """The order log as columns (``ORDER_COLUMNS``)."""
        return _columns(ORDER_COLUMNS, self.order_rows)

    @property
    def trade_log(self) -> dict[str, list]:
        """The trade log as columns (``TRADE_COLUMNS``)."""
        return _columns(TRADE_COLUMNS, self.trade_rows)


def refusal_reasons(mechanisms: Iterable[Any]) -> tuple[str, ...]:
    """Every reason an exchange may refuse an order with, given the registered ``mechanisms``
    (classes, installed or not), in the order it checks them: what outcomes count as
    ``rejects_<reason>`` (manifest ``reject_reasons``)."""
    own = [r for m in mechanisms for r in m.refusals]
    return (*CHECKED_FIRST, *dict.fromkeys(own), *CHECKED_LAST)


ORDER_COLUMNS = ("tick", "slot", "asset", "order_id", "kind", "side", "qty", "price", "status",
                 "reason", "is_llm", "rounded_price")
TRADE_COLUMNS = ("tick", "asset", "price", "qty", "buyer", "seller", "aggressor", "buyer_llm",
                 "seller_llm")


def _columns(names: tuple[str, ...], rows: list[tuple]) -> dict[str, list]:
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    return {name: list(col) for name, col in zip(names, cols, strict=True)}

"""The trader contract: one method, ``decide(view) -> list[Order | Cancel]``, and what a trader
type tells the run about itself (its name, its place in the population, how it is built, the
account it opens with), plus the order helpers the built-in types share.

A trader sees only its :class:`MarketView` (public data and its own account) and never touches
the exchange or the book. Each trader owns a private generator from the run's named streams.

A trader type is a :class:`Trader` subclass registered under the name configs use
(``@TRADERS.register``, :mod:`market_agents.plugins`): one module of ``agents/traders/`` for a
built-in type, an entry point of group ``market_agents.traders`` for an installed one. The run
asks the registry, never a list of names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from market_agents.market.types import BUY, SELL, AssetView, Cancel, MarketView, Order
from market_agents.rng import Streams

if TYPE_CHECKING:
    from market_agents.config import Config


class Opening(NamedTuple):
    """The account a slot opens with: cash (currency units), shares (of each asset) and the
    leverage of its margin account (1: no borrowing)."""

    cash: float
    shares: int
    leverage: float


class RunContext:
    """What a trader type is built from besides its slot and its generator: the run's config,
    its named streams, and the draws shared by every trader of a type (the noise traders'
    trading activity), each made once, on first request, from its own stream."""

    def __init__(self, config: Config, streams: Streams):
        self.config = config
        self.streams = streams
        self._shared: dict[str, Any] = {}

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """The run-wide value under ``key``, made by ``make()`` the first time it is asked for
        (so a run without the type that needs it never draws it)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]


class Trader(ABC):
    """A trader in one slot, with its own random stream; it decides from a
    :class:`MarketView` on its activation schedule (market makers every tick).

    The class attributes and class methods below are the trader type's contract with the run
    (``sim/simulation.py``): a subclass sets ``name`` and overrides what differs.
    """

    name: ClassVar[str]
    """The name configs use (``population.mix``, ``population.slot_types``) and agents.parquet's
    ``type``; the registry's key."""
    in_mix: ClassVar[bool] = True
    """Whether it takes a share of ``population.mix``. Market makers (the first
    ``n_market_makers`` slots) and the LLM trader (the slots ``population.llm_share`` chooses,
    whatever their type) do not."""
    default_share: ClassVar[float | None] = None
    """Its share in the default mix, filled in for a config that leaves it out; None: outside
    the default mix, present only when a config gives it (a plug-in leaves it None, so that
    installing it changes no config's hash)."""
    draw_rank: ClassVar[int] = 1000
    """Where its slots come in the population draw (lower first, then by name): the built-in
    types that share the mix take 10, 20, ... in the order of every run made so far (each
    module sets its own), and a plug-in keeps the default and comes after them."""
    every_tick: ClassVar[bool] = False
    """It decides every tick (market makers quote), not on the activation schedule."""
    leverage: float = 1.0

    def __init__(self, slot: int, rng: np.random.Generator):
        self.slot = slot
        self.rng = rng

    @abstractmethod
    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """The trader's orders and cancels for this decision, from what it sees (V^pub only)."""

    @classmethod
    def build(cls, slot: int, rng: np.random.Generator, run: RunContext) -> Trader:
        """The trader of ``slot`` in a run: by default ``cls(slot, rng)``; a type that needs
        settings from the config or a shared draw reads them from ``run``."""
        return cls(slot, rng)

    @classmethod
    def opening(cls, config: Config, llm: bool) -> Opening:
        """The account a slot of this type opens with (``llm``: an LLM trader sits in it): by
        default the population's ``initial_cash`` and ``initial_shares``, unlevered."""
        pop = config.population
        return Opening(pop.initial_cash, pop.initial_shares, 1.0)

    @classmethod
    def check(cls, config: Config) -> None:
        """Refuse a config this type cannot trade in, when the config gives it a share of
        ``population.mix`` (called by ``Config``'s cross-checks).

        Raises:
            ValueError: a one-line message naming the keys at fault.
        """
        return None


# --- order helpers shared by the built-in types ----------------------------------------------


def withdraw(view: MarketView) -> list[Order | Cancel]:
    """Start a decision by cancelling the trader's resting orders (nothing to send if none)."""
    return [Cancel()] if view.open_orders else []


def ref_price(a: AssetView) -> float:
    """The asset's reference price: its mid, else its last trade."""
    return a.mid_price if a.mid_price > 0 else a.last_price


def opening_holdings(view: MarketView) -> list[int]:
    """The trader's holding of each asset at its first decision (its opening position: no
    trader but the market makers trades before its first decision)."""
    return [max(0, a.shares) for a in view.assets]


def toward(a: AssetView, target: int, price: float, max_qty: int,
           ttl: int | None = None) -> list[Order]:
    """The order that moves the holding of ``a.asset`` toward ``target`` by at most
    ``max_qty`` shares at the limit ``price`` (nothing when it is there)."""
    qty = target - a.shares
    if qty == 0:
        return []
    return [Order(BUY if qty > 0 else SELL, min(abs(qty), max_qty), round(price, 2), a.asset,
                  ttl=ttl)]

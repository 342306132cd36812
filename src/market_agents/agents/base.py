"""The trader contract: one method, ``decide(view) -> list[Order | Cancel]``.

A trader sees only its :class:`MarketView` (public data and its own account) and never touches
the exchange or the book. Each trader owns a private generator from the run's named streams.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from market_agents.market.types import Cancel, MarketView, Order


class Trader(ABC):
    """A trader in one slot, with its own random stream; it decides from a
    :class:`MarketView` on its activation schedule (market makers every tick).
    """

    kind: str = "trader"
    leverage: float = 1.0
    every_tick: bool = False  # market makers quote each tick; the rest follow the schedule

    def __init__(self, slot: int, rng: np.random.Generator):
        self.slot = slot
        self.rng = rng

    @abstractmethod
    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """The trader's orders and cancels for this decision, from what it sees (V^pub only)."""

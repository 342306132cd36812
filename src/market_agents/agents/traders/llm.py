"""The LLM trader type (``llm``): what the run needs to know of an LLM slot before any LLM is
asked, and nothing of the LLM layer.

The slots ``population.llm_share`` chooses become LLM traders whatever type the population
draw gave them (the slot keeps its draws: turning a slot into an LLM trader changes that slot's
decisions and nothing else). They decide together, through one pool
(:class:`market_agents.agents.llm_trader.LLMTraderPool`), which the run imports only when it
has LLM slots: a classical run loads no module of the LLM layer
(``tests/sim/test_classical_imports.py``), so this module must stay light.
"""

from __future__ import annotations

import numpy as np

from market_agents.agents.base import RunContext, Trader
from market_agents.market.types import Cancel, MarketView, Order
from market_agents.plugins import TRADERS


@TRADERS.register
class LLMTrader(Trader):
    """An LLM slot: agents.parquet's ``type`` of every LLM trader. It takes no share of
    ``population.mix`` and opens the ordinary account of the slot's type (``Trader.opening``
    with ``llm=True``); it is never built as one trader, since the pool decides for every LLM
    slot at once."""

    name = "llm"
    in_mix = False

    @classmethod
    def build(cls, slot: int, rng: np.random.Generator, run: RunContext) -> Trader:
        """Never: the LLM slots' decisions are the pool's.

        Raises:
            TypeError: always.
        """
        raise TypeError(f"slot {slot}: an LLM trader is decided by the LLM traders' pool "
                        "(agents/llm_trader.py), not built alone")

    def decide(self, view: MarketView) -> list[Order | Cancel]:
        """Never called (see :meth:`build`)."""
        raise TypeError("an LLM trader decides through the LLM traders' pool")

"""The LLM trader type (agents/traders/llm.py): registered, outside the mix, an ordinary
account, decided by the pool and never built alone; it loads nothing of the LLM layer."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from market_agents.agents.base import RunContext
from market_agents.agents.traders.llm import LLMTrader
from market_agents.config import Config
from market_agents.plugins import TRADERS
from market_agents.rng import Streams


def test_it_is_registered_outside_the_mix_with_an_ordinary_account():
    assert TRADERS.get("llm", "test") is LLMTrader
    cfg = Config()
    assert not LLMTrader.in_mix and "llm" not in cfg.population.mix
    assert LLMTrader.opening(cfg, llm=True) == (20_000.0, 20, 1.0)


def test_it_is_never_built_alone():
    with pytest.raises(TypeError, match="pool"):
        LLMTrader.build(7, np.random.default_rng(0), RunContext(Config(), Streams(0)))


def test_reading_the_registry_loads_no_module_of_the_llm_layer():
    code = ("import sys; from market_agents.plugins import TRADERS; TRADERS.names(); "
            "print(sorted(m for m in sys.modules if m.startswith('market_agents.llm')"
            " or m == 'market_agents.agents.llm_trader'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"

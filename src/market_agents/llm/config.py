"""The `population.llm` block of the simulation config, by the names the LLM layer uses.

The classes are declared in :mod:`market_agents.config_llm` (below the config and this layer,
so that loading a config loads nothing of the LLM layer); this module names them for the
providers, the client and the callers that import them from here.
"""

from __future__ import annotations

from market_agents.config_llm import (
    FREE_KINDS,
    KINDS,
    LLMConfig,
    ProviderSettings,
    TokenProfile,
)

__all__ = ["FREE_KINDS", "KINDS", "LLMConfig", "ProviderSettings", "TokenProfile"]

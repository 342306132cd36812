"""The price table and the cost of a call, by the names the LLM layer uses.

Declared in :mod:`market_agents.prices` (below the config and this layer, so that a classical
run records its price table without loading the LLM layer); this module names the same objects
for the client and the callers that import them from here.
"""

from __future__ import annotations

from market_agents.prices import (
    DEFAULT_PATH,
    PRICES_ENV,
    ModelPrice,
    PriceTable,
    _load,
    cost,
    load_prices,
    planned_cost,
    run_prices,
    usage_cost,
)

__all__ = ["DEFAULT_PATH", "PRICES_ENV", "ModelPrice", "PriceTable", "_load", "cost",
           "load_prices", "planned_cost", "run_prices", "usage_cost"]

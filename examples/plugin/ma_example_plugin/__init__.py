"""An example plug-in of market_agents: the trader type ``contrarian`` and the mechanism
``price_band``, each one module registered on import (the entry points in pyproject.toml name
the modules)."""

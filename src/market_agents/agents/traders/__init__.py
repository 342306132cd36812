"""The built-in trader types, one module each; each registers its class under the name configs
use (``@TRADERS.register``, :mod:`market_agents.plugins`, which imports every module here whose
name does not start with ``_``). The contract they implement is
:class:`market_agents.agents.base.Trader`.

- ``market_maker.py``: market makers (the first ``population.n_market_makers`` slots).
- ``fundamentalist.py``, ``trend.py``, ``noise.py`` (with the trading activity the noise traders
  share), ``leveraged.py``, ``statarb.py``: the classical types that share ``population.mix``.
- ``llm.py``: the LLM trader type (the slots ``population.llm_share`` chooses); its decisions are
  made by the pool in ``agents/llm_trader.py``, which this package never imports.

An installed package adds a type through an entry point of group ``market_agents.traders``.
"""

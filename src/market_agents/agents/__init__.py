"""Traders.

- ``base.py``: the trader contract, ``decide(view) -> list[Order | Cancel]``.
- ``classical.py``: the classical strategies (market makers, fundamentalists, trend followers,
  noise traders and their common trading activity, leveraged trend followers, stat-arb).
- ``llm_trader.py``: the LLM traders, the one bridge between the market and the LLM layer.
"""

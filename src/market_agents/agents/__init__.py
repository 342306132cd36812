"""Traders.

- ``base.py``: the trader contract, ``decide(view) -> list[Order | Cancel]``, and what a trader
  type tells the run (its name, its share of the mix, how it is built, its opening account),
  plus the order helpers the built-in types share.
- ``traders/``: the trader types, one module each, registered by the name configs use
  (market makers, fundamentalists, trend followers, noise traders and their common trading
  activity, leveraged trend followers, stat-arb, and the LLM trader type).
- ``llm_trader.py``: the LLM traders' pool, the one bridge between the market and the LLM layer.
"""

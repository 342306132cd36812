"""Traders: the classical strategies (market makers, fundamentalists, trend, noise, leveraged,
stat-arb) and the LLM traders (``llm_trader.py``, the one bridge between the market and the LLM
layer)."""

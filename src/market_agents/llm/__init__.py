"""The LLM layer: requests, providers, cache, pricing and budget.

It never imports `market_agents.market` or `market_agents.agents`; `agents/llm_trader.py`
is the only bridge between the market and this package.
"""

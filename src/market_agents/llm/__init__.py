"""The LLM layer: requests, providers, cache, pricing and budget.

It never imports `market_agents.market` or `market_agents.agents`; `agents/llm_trader.py`
is the only bridge between the market and this package::

    types.py        plain data that crosses the layer: requests, usage, responses, results
    config.py       the population.llm block, by this layer's names (declared in config_llm.py)
    prompting.py    market snapshot -> messages (FROZEN: hashed into the freeze, with
                    prompt_sets.yaml, the persona sets it reads)
    schema.py       what an LLM trader may answer (FROZEN)
    structured.py   how each provider is asked for a JSON answer, which keywords it is sent
    client.py       one client in front of every provider: cache, budget, claim, provider,
                    price, store
    calls.py        what one call can end in: the errors that stop a run, the retry policy,
                    the replay's stand-in provider, the rules that judge a stored answer
    cache.py        the response cache: the record of an experiment
    filesystem.py   where a cache may live (no network filesystem in SQLite's WAL mode)
    budget.py       run, route and decision caps
    pricing.py      the price table and the cost of a call (declared in prices.py)
    interrupt.py    a paying command told to stop while calls are in flight
    library.py      the frozen decision library, replayed by nearest neighbour
    providers/      the providers behind one async interface
"""

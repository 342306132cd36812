"""Bazaar: one LLM agent trades one commodity against scripted quotes, with an LLM evaluation
through the shared LLM layer and a verifiers adapter.

The engine, which stands alone (no LLM layer, no market)::

    tiers.py        the parameters of one episode family (pure data)
    scenario.py     everything random in an episode, drawn up front from the seed
    flow.py         the scripted counterparties: the quote a taker sees, the flow a maker meets
    engine.py       reset(seed) -> observation, step(text) -> (observation, reward, done, info)
    parser.py       the text protocol (buy Q, sell Q, pass, quote BP BQ AP AQ)
    prompts.py      the system prompt per tier and the per-turn JSON state
    policies.py     scripted policies, the anchors a model is measured against
    anchors.py      the anchors beside the public Bazaar figures, and the orderings to show
    exploits.py     the exploit pass: deterministic reward farms against the honest anchor
    play.py         episodes with a policy, and replays of recorded messages

The bridges: ``llm_eval.py`` (``ma bazaar eval`` through the LLM layer's cache, prices and
caps), ``mock_agent.py`` (a mock player for the mock provider) and ``verifiers_env.py`` (the
``verifiers`` adapter)."""

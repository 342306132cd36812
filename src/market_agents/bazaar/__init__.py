"""Bazaar: one LLM agent trades one commodity against scripted quotes (tiers, scenario, engine,
parser, scripted policies, anchors, exploit pass), with an LLM evaluation through the shared LLM
layer (``llm_eval.py``) and a verifiers adapter (``verifiers_env.py``)."""

"""A mock Bazaar player for the LLM layer's mock provider (free-text rule).

It answers in the text protocol with some prose around the command, plays a noisy version of
the scripted anchors, and sends a fixed share of malformed answers (no command, words for
numbers, crossed quotes, oversize orders), so the evaluation pipeline is exercised end to end
at no cost. Deterministic from the request, like the rest of the mock.
"""

from __future__ import annotations

import json

import numpy as np

from market_agents.bazaar.prompts import PROMPT_VERSION
from market_agents.bazaar.tiers import TIERS

MALFORMED_RATE = 0.1
MALFORMED = (
    "Let me think about the market before committing.",
    "I will buy two units.",
    "quote 101 2 99 2",
    "sell -1",
    "buy 999",
)


def _state(request) -> dict | None:
    users = [m.content for m in request.messages if m.role == "user"]
    if not users:
        return None
    text = users[-1]
    start = text.find("{")
    try:
        return json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None


def answer(request, rng: np.random.Generator) -> str:
    """The mock player's reply to a Bazaar request: a noisy anchor-like command in prose, or
    now and then a malformed one; ``pass`` when the episode is over.
    """
    tier = TIERS.get(request.prompt_id.removeprefix(PROMPT_VERSION + "-"))
    state = _state(request)
    if tier is None or state is None or state.get("done"):
        return "pass"
    if rng.random() < MALFORMED_RATE:
        return str(MALFORMED[int(rng.integers(len(MALFORMED)))])
    index, bid, ask = state["index"], state["bid"], state["ask"]
    note = f"The index is {index:g}; the scripted quote is {bid:g} / {ask:g}."
    if tier.is_maker and rng.random() < 0.8:
        half = max(0.75, 1.5 * tier.vol + tier.spread / 2) * float(rng.uniform(0.6, 1.4))
        bq = min(tier.max_size, int(state["cash"] // max(index - half, 0.01)))
        aq = min(tier.max_size, state["inventory"])
        if bq > 0 and aq > 0:
            return (f"{note} I will make a market around the index.\n"
                    f"quote {index - half:.2f} {bq} {index + half:.2f} {aq}")
    money = state.get("buying_power", state["cash"]) * float(rng.uniform(0.3, 1.0))
    if ask < index and rng.random() < 0.85:
        qty = min(state["ask_size"], int(money // ask))
        if qty > 0:
            return f"{note} The ask is below the index, so buying is cheap.\nbuy {qty}"
    if bid > index and state["inventory"] > 0 and rng.random() < 0.85:
        qty = min(state["bid_size"], state["inventory"])
        return f"{note} The bid is above the index, so I sell.\nsell {qty}"
    if rng.random() < 0.1 and state["inventory"] > 0:
        return f"{note} A small speculative sale.\nsell 1"
    return f"{note} Nothing is mispriced; I could buy or sell but I will wait.\npass"


def register() -> None:
    """Plug :func:`answer` into the mock provider for Bazaar's prompt ids."""
    # why: the mock provider is the LLM layer, loaded only when an evaluation plugs this in
    from market_agents.llm.providers.mock import register_text_rule

    register_text_rule(PROMPT_VERSION, answer)

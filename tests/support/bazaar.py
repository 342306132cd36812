"""The Bazaar rule the fake provider plays for the verifiers adapter and the openai_compatible
evaluation tests: a fixed, stateless rule (``reply``), so a test can compute the expected
reward by playing the same rule through the engine directly (``act``)."""

from __future__ import annotations

import json
from typing import Any

from market_agents.testing.fakeserver import FakeAPI, messages

# The fake server reports this many input and output tokens per answer.
TOKENS = (10, 5)


def reply(state_text: str) -> str:
    """Unreadable on the very first attempt of an episode (exercises the illegal path), then
    trade real edges one unit at a time with some prose around the command."""
    obs = json.loads(state_text[state_text.index("{"):])
    if obs["turn"] == 0 and obs["last"] == "episode start":
        return "Let me look at the book first."
    if obs["ask"] < obs["index"]:
        return f"The ask {obs['ask']} is below the index, so:\nbuy 1"
    if obs["bid"] > obs["index"] and obs["inventory"] > 0:
        return f"The bid {obs['bid']} is above the index.\nsell 1"
    return "Nothing mispriced; I could buy but I will wait.\npass"


def answer(body: dict[str, Any], digest: bytes) -> str:
    """The fake server's answer function: ``reply`` to the last user message."""
    return reply([text for role, text in messages(body) if role == "user"][-1])


def bazaar_server(server: str = "vllm") -> FakeAPI:
    """A fake OpenAI-compatible server playing ``reply`` (use as a context manager; the SDK's
    base URL is ``f"{api.url}/v1"``); ``server``: which server's request checks it applies
    (``fakeserver.SERVERS``)."""
    return FakeAPI(answer=answer, tokens=TOKENS, server=server)


def act(state: dict) -> str:
    """The same rule, for playing an episode through the engine directly."""
    return reply(json.dumps(state))


def think_answer(body: dict[str, Any], digest: bytes) -> str:
    """``reply`` after a reasoning block that names another command (which must not count)."""
    return f"<think>\nMaybe I should just\nsell 9\n</think>\n{answer(body, digest)}"


def think_only_answer(body: dict[str, Any], digest: bytes) -> str:
    """Reasoning and no answer: the command sits inside the block, closed on even turns and
    cut off (no closing tag, as when max_tokens ends the reply) on odd ones."""
    text = [t for role, t in messages(body) if role == "user"][-1]
    turn = json.loads(text[text.index("{"):])["turn"]
    inner = f"<think>\nThe ask looks cheap.\n{reply(text).splitlines()[-1]}"
    return inner if turn % 2 else inner + "\n</think>"

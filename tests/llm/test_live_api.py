"""One real decision per provider. Paid (≈0.0005 USD each): runs only with --runapi and a key in
.env or the environment."""

import os

import pytest

from market_agents.llm import schema
from market_agents.llm.client import LLMClient
from market_agents.llm.config import LLMConfig
from market_agents.llm.providers.registry import KEY_ENV, load_env
from tests.support.llm import decision_request

MODELS = {"openai": "gpt-5.4-nano", "anthropic": "claude-haiku-5-5"}


@pytest.mark.api
@pytest.mark.parametrize("kind", list(MODELS))
def test_one_live_decision(kind):
    load_env()
    if not os.environ.get(KEY_ENV[kind]):
        pytest.skip(f"{KEY_ENV[kind]} is not set")
    cfg = LLMConfig(provider_mix={kind: 1.0}, models={kind: MODELS[kind]}, usd_cap=0.05)
    client = LLMClient.from_settings(cfg)
    [r] = client.complete_many([decision_request(kind, kind, MODELS[kind])],
                               schema.parse_decision)
    client.close()
    assert r.error_class in (None, "refusal", "schema", "invalid_json", "truncated")
    assert r.usage.input > 0 and r.usd_spent > 0

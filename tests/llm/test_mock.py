import asyncio
import json

import numpy as np
import pytest

from market_agents.llm import schema
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers import mock
from market_agents.llm.types import LLMRequest, Message
from tests.support.llm import decision_request

N = 4000


def _answers(n=N, **kw):
    p = mock.MockProvider("mock", ProviderSettings())
    return [p.answer(decision_request(agent=f"slot{i}", tick=i % 50, **kw)) for i in range(n)]


def test_deterministic_from_request():
    p = mock.MockProvider("mock", ProviderSettings())
    req = decision_request()
    assert p.answer(req) == p.answer(req)
    other = decision_request(agent="slot2")
    assert [p.answer(decision_request(agent=f"slot{i}"))[0] for i in range(20)].count(
        p.answer(other)[0]) < 20


@pytest.mark.slow(4)  # CPU s on 2 cores: out of the quick subset
def test_valid_rate_is_about_95_percent_with_both_kinds_of_invalid():
    kinds = {"ok": 0, "invalid_json": 0, "schema": 0}
    for text, _ in _answers():
        try:
            schema.parse_decision(text)
            kinds["ok"] += 1
        except ValueError as exc:  # ValidationError is a ValueError
            kinds[schema.error_class(exc)] += 1
    rate = kinds["ok"] / N
    assert abs(rate - 0.95) < 4 * (0.05 * 0.95 / N) ** 0.5, kinds  # within 4 SE
    assert kinds["invalid_json"] > 0.01 * N and kinds["schema"] > 0.01 * N


def test_synthetic_usage_near_planning_profile():
    usage = [u for _, u in _answers(1000)]
    assert abs(np.mean([u.input for u in usage]) - 760) < 10
    assert abs(np.mean([u.output for u in usage]) - 230) < 10
    assert all(0 <= u.reasoning <= u.output for u in usage)


def test_rule_leans_toward_public_value():
    def actions(mid, vpub):
        out = []
        for text, _ in _answers(600, mid=mid, vpub=vpub):
            try:
                out.append(schema.parse_decision(text).action)
            except ValueError:
                pass
        return out

    cheap, dear = actions(465.0, 475.0), actions(485.0, 475.0)
    assert cheap.count("buy") > 0.8 * len(cheap)
    assert dear.count("sell") > 0.8 * len(dear)
    halted = [json.loads(t)["action"] for t, _ in _answers(100, halted=True)
              if t.startswith("{") and t.endswith("}")]
    assert set(halted) <= {"hold", "short"}  # 'short' is an injected schema violation


def test_text_rule_and_latency():
    mock.register_text_rule("bazaar-", lambda req, rng: f"quote {int(rng.integers(10))}")
    try:
        p = mock.MockProvider("mock", ProviderSettings(latency_s=0.01))
        req = LLMRequest("mock", "claude-haiku-5-5", (Message("user", "make a market"),),
                         json_schema=None, prompt_id="bazaar-taker-v1")
        resp = asyncio.run(p.complete(req))
        assert resp.text.startswith("quote ") and resp.model == "claude-haiku-5-5"
        assert 0.005 <= resp.latency_s < 0.015
        plain = LLMRequest("mock", "m", (Message("user", "hi"),), prompt_id="other")
        assert "no rule" in asyncio.run(p.complete(plain)).text
    finally:
        mock._TEXT_RULES.pop("bazaar-")


@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_invalid_rate_is_configurable(rate):
    p = mock.MockProvider("mock", ProviderSettings(invalid_rate=rate))
    ok = 0
    for i in range(200):
        try:
            schema.parse_decision(p.answer(decision_request(agent=f"s{i}"))[0])
            ok += 1
        except ValueError:
            pass
    assert ok == (200 if rate == 0.0 else 0)

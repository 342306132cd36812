"""The client's contract, on the mock and on scripted providers: replay, order, retries,
failures, corruption, budget halts, preflight errors."""

import json

import pytest

from market_agents.errors import ConfigError, MarketAgentsError
from market_agents.llm import schema
from market_agents.llm.budget import Budget
from market_agents.llm.cache import CacheError, ResponseCache
from market_agents.llm.client import LLMClient, ProviderAuthError, RetryPolicy
from market_agents.llm.config import LLMConfig, ProviderSettings
from market_agents.llm.pricing import load_prices
from market_agents.llm.providers.base import Provider, ProviderError
from market_agents.llm.providers.mock import MockProvider
from market_agents.llm.types import LLMResponse, Usage
from tests.support.llm import decision_request

GOOD = json.dumps({"action": "buy", "asset": 0, "quantity": 2, "order_type": "market",
                   "limit_price": None, "message": "", "reason": "cheap"})


class Scripted(Provider):
    """A live provider that plays a script of outcomes, one per call."""

    kind, live = "openai", True

    def __init__(self, script):
        super().__init__("openai")
        self.script = list(script)
        self.calls = 0

    async def complete(self, request):
        self.calls += 1
        step = self.script.pop(0) if self.script else "ok"
        if isinstance(step, ProviderError):
            raise step
        return LLMResponse(GOOD, Usage(input=760, output=230), latency_s=0.1)


def record_waits(client) -> list[float]:
    """Replace the client's backoff sleep by a recorder; returns the list of waits."""
    waits: list[float] = []

    async def record(s):
        waits.append(s)

    client.sleep = record
    return waits


def _fields(results):
    return [(r.key, r.text, r.valid, r.error_class, r.usage, r.usd, r.latency_s)
            for r in results]


def mock_client(cache=None, latency=0.0):
    return LLMClient({"mock": MockProvider("mock", ProviderSettings(latency_s=latency))},
                     load_prices(), cache=ResponseCache(cache) if cache else None)


def test_replay_from_cache_makes_zero_calls_and_same_results(tmp_path):
    reqs = [decision_request(agent=f"slot{i}", tick=i) for i in range(60)]
    first = mock_client(tmp_path / "c.sqlite")
    a = first.complete_many(reqs, schema.parse_decision)
    first.close()
    again = mock_client(tmp_path / "c.sqlite")
    b = again.complete_many(reqs, schema.parse_decision)
    summary = again.usage_summary()
    again.close()
    assert _fields(a) == _fields(b)
    assert [r.parsed for r in a] == [r.parsed for r in b]
    assert summary["calls"] == 0 and summary["cached_hits"] == 1.0
    assert summary["usd_spent"] == 0.0 and all(r.cache_hit for r in b)
    stored = ResponseCache(tmp_path / "c.sqlite").get(reqs[0].key())
    assert stored["usage"]["input"] > 0 and "latency_s" in stored
    assert stored["parsed"] == (a[0].parsed.model_dump(mode="json") if a[0].valid else None)


def test_results_follow_input_order_whatever_the_latency():
    reqs = [decision_request(agent=f"slot{i}") for i in range(40)]
    slow = mock_client(latency=0.02)
    fast = mock_client()
    a = slow.complete_many(reqs, schema.parse_decision)
    b = fast.complete_many(reqs, schema.parse_decision)
    assert [r.key for r in a] == [q.key() for q in reqs]
    assert [(r.text, r.valid) for r in a] == [(r.text, r.valid) for r in b]
    slow.close()
    fast.close()


def test_retries_then_failure_is_recorded_and_replayed_without_calls(tmp_path):
    boom = [ProviderError("server_error", "HTTP 500")] * 3
    p = Scripted(boom)
    c = LLMClient({"openai": p}, load_prices(), cache=ResponseCache(tmp_path / "c"),
                  retry={"openai": RetryPolicy(max_retries=2, base_delay_s=0.0)})
    waits = record_waits(c)
    [r] = c.complete_many([decision_request("openai", "openai", "gpt-5.4-nano")],
                          schema.parse_decision)
    assert (r.valid, r.error_class, r.calls, p.calls) == (None, "server_error", 3, 3)
    assert waits == [0.0, 0.0] and c.usage_summary()["failures"] == 1
    c.close()
    p2 = Scripted([])
    c2 = LLMClient({"openai": p2}, load_prices(), cache=ResponseCache(tmp_path / "c"))
    [r2] = c2.complete_many([decision_request("openai", "openai", "gpt-5.4-nano")],
                            schema.parse_decision)
    assert (r2.error_class, r2.cache_hit, p2.calls) == ("server_error", True, 0)
    c2.close()


def test_backoff_honours_retry_after():
    p = Scripted([ProviderError("rate_limit", "HTTP 429", retry_after=2.5),
                  ProviderError("timeout"), "ok"])
    c = LLMClient({"openai": p}, load_prices(),
                  retry={"openai": RetryPolicy(max_retries=3, base_delay_s=0.5)})
    waits = record_waits(c)
    [r] = c.complete_many([decision_request("openai", "openai", "gpt-5.4-nano")],
                          schema.parse_decision)
    assert r.valid and r.calls == 3 and waits == [2.5, 1.0]
    assert RetryPolicy(max_delay_s=30).delay(0, 600.0) == 30.0
    c.close()


def test_rejected_key_stops_the_run():
    p = Scripted([ProviderError("auth", "HTTP 401 (check the API key in .env)")])
    c = LLMClient({"openai": p}, load_prices())
    with pytest.raises(ProviderAuthError, match="provider 'openai' \\(openai\\), model "
                       "'gpt-5.4-nano': authentication or permission refused \\(HTTP 401"):
        c.complete_many([decision_request("openai", "openai", "gpt-5.4-nano")])
    c.close()


def test_damaged_entry_stops_the_run_without_a_call(tmp_path):
    req = decision_request()
    cache = ResponseCache(tmp_path / "c")
    cache.put_raw(req.key(), '{"v": 1, "body": {"text": "forged"}}')
    p = Scripted([])
    c = LLMClient({"mock": p}, load_prices(), cache=cache)
    with pytest.raises(CacheError, match=f"entry {req.key()} fails its check"):
        c.complete_many([req], schema.parse_decision)
    assert p.calls == 0
    c.close()


def _worst(req):
    return load_prices().worst_cost(req.model, req.input_token_bound(), req.max_output_tokens)


def test_budget_halt_holds_and_replays_to_the_same_point(tmp_path):
    cap = 0.01

    def client(p):
        return LLMClient({"openai": p}, load_prices(), cache=ResponseCache(tmp_path / "c"),
                         budget=Budget(usd_cap=cap))

    batches = [[decision_request("openai", "openai", "gpt-5.4-nano", agent=f"s{i}", tick=t)
                for i in range(3)] for t in range(6)]
    live = client(Scripted([]))
    a = [r for t, b in enumerate(batches)
         for r in live.complete_many(b, schema.parse_decision, where=f"tick {t}", tick=t)]
    s = live.usage_summary()
    live.close()
    # every call is admitted against its worst case (~0.002 USD: the prompt's byte bound and
    # 1,024 output tokens), though each bills 0.00044
    n = sum(r.error_class is None for r in a)
    assert [r.error_class for r in a] == [None] * n + ["budget_halt"] * (18 - n) and 3 < n < 18
    spent_before = sum(r.usd for r in a[: n - n % 3])
    assert s["usd"] <= cap and s["usd_spent"] == pytest.approx(n * 0.0004395)
    [event] = s["budget_halt_events"]
    assert event["scope"] == "run" and event["tick"] == s["halt_tick"] == n // 3
    assert event["spent"] == s["spent_at_halt_usd"] == pytest.approx(spent_before)
    assert s["reserved_at_halt_usd"] == pytest.approx((n % 3) * _worst(batches[0][0]))
    assert s["usd"] + s["reserved_at_halt_usd"] + _worst(batches[0][0]) > cap
    p = Scripted([])
    again = client(p)
    b = [r for t, bt in enumerate(batches)
         for r in again.complete_many(bt, schema.parse_decision, where=f"tick {t}", tick=t)]
    assert p.calls == 0 and _fields(a) == _fields(b)
    assert again.usage_summary()["usd_spent"] == 0.0
    again.close()


def test_preflight_errors_name_the_problem_and_never_the_key(monkeypatch):
    cfg = LLMConfig(provider_mix={"openai": 1.0}, models={"openai": "gpt-5.4-nano"}, usd_cap=1)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        LLMClient.from_settings(cfg, env={})
    with pytest.raises(MarketAgentsError, match="usd_cap is 0.0"):
        LLMClient.from_settings(cfg.model_copy(update={"usd_cap": 0.0}),
                                env={"OPENAI_API_KEY": "sk-xyz"})
    odd = LLMConfig(provider_mix={"mock": 1.0}, models={"mock": "gpt-7-huge"})
    with pytest.raises(ConfigError, match="'gpt-7-huge' has no price"):
        LLMClient.from_settings(odd, env={})
    with pytest.raises(ValueError, match="provider 'openai_mini' is unknown"):
        LLMConfig(provider_mix={"openai_mini": 1.0}, models={"openai_mini": "gpt-5.4-mini"})
    with pytest.raises(ValueError, match="models.openai: no model id"):
        LLMConfig(provider_mix={"openai": 1.0}, models={})
    with pytest.raises(ValueError, match="sum to 1"):
        LLMConfig(provider_mix={"mock": 0.5}, models={"mock": "mock-trader"})


def test_mock_rehearsal_halts_where_the_live_run_would():
    """Caps act on priced cost, so a mock mapped to a real id stops at the same decision."""
    cfg = LLMConfig(provider_mix={"mock": 1.0}, models={"mock": "gpt-5.4-nano"}, usd_cap=0.002,
                    providers={"mock": {"invalid_rate": 0.0}})
    c = LLMClient.from_settings(cfg, env={})
    res = [r for t in range(4) for r in c.complete_many(
        [decision_request(model="gpt-5.4-nano", agent=f"s{i}", tick=t) for i in range(3)],
        schema.parse_decision)]
    halted = [r.error_class == "budget_halt" for r in res]
    assert any(halted) and halted == sorted(halted)  # once halted, halted for good
    assert sum(r.usd for r in res) <= 0.002 and all(r.usd_spent == 0.0 for r in res)
    c.close()


def test_mock_mapped_to_a_real_id_is_priced_but_free():
    cfg = LLMConfig(provider_mix={"mock": 1.0}, models={"mock": "claude-haiku-5-5"})
    c = LLMClient.from_settings(cfg, env={})
    reqs = [decision_request(model="claude-haiku-5-5", agent=f"s{i}") for i in range(20)]
    res = c.complete_many(reqs, schema.parse_decision)
    s = c.usage_summary()
    assert all(r.usd > 0.001 and r.usd_spent == 0.0 for r in res)
    assert s["usd"] == pytest.approx(sum(r.usd for r in res)) and s["usd_spent"] == 0.0
    c.close()


def test_concurrency_is_bounded_per_route_and_overall():
    import asyncio

    class Slow(Scripted):
        def __init__(self):
            super().__init__([])
            self.inflight = self.peak = 0

        async def complete(self, request):
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
            await asyncio.sleep(0.01)
            self.inflight -= 1
            return await super().complete(request)

    p = Slow()
    c = LLMClient({"openai": p}, load_prices(), max_concurrency=10,
                  route_concurrency={"openai": 3})
    reqs = [decision_request("openai", "openai", "gpt-5.4-nano", agent=f"s{i}")
            for i in range(12)]
    assert all(r.valid for r in c.complete_many(reqs, schema.parse_decision))
    assert p.peak == 3
    c.close()


def test_key_is_read_from_dotenv_in_the_working_directory(tmp_path, monkeypatch):
    import os

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    cfg = LLMConfig(provider_mix={"openai": 1.0}, models={"openai": "gpt-5.4-nano"}, usd_cap=1)
    try:
        c = LLMClient.from_settings(cfg)
        assert c.providers["openai"]._client.api_key == "sk-from-dotenv"
        c.close()
    finally:
        os.environ.pop("OPENAI_API_KEY", None)


def test_repeated_request_in_one_batch_is_called_once():
    p = Scripted([])
    c = LLMClient({"openai": p}, load_prices())
    req = decision_request("openai", "openai", "gpt-5.4-nano")
    a, b = c.complete_many([req, req], schema.parse_decision)
    assert p.calls == 1 and (a.cache_hit, b.cache_hit) == (False, True)
    assert (a.text, a.usd) == (b.text, b.usd) and b.usd_spent == 0.0
    c.close()

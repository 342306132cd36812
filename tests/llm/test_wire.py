"""The real openai and anthropic SDKs against a local server speaking their wire formats."""

import asyncio
from pathlib import Path

import pytest

from market_agents.llm import prompting, schema
from market_agents.llm.cache import ResponseCache
from market_agents.llm.client import LLMClient, ProviderAuthError, ProviderFatal
from market_agents.llm.config import LLMConfig
from market_agents.llm.providers.base import FATAL_NAMES, ProviderError
from market_agents.llm.providers.registry import make_provider
from market_agents.llm.structured import wire_schema
from tests.support.llm import SECRET_ANTHROPIC, SECRET_OPENAI, decision_request, live_env

ROUTES = {  # route -> (kind, model, path)
    "openai": ("openai", "gpt-5.4-nano", "/v1/responses"),
    "anthropic": ("anthropic", "claude-haiku-5-5", "/v1/messages"),
    "local": ("openai_compatible", "gpt-5.4-nano", "/v1/chat/completions"),
}


def _config(api, routes=ROUTES, **kw):
    return LLMConfig(
        provider_mix={r: 1.0 / len(routes) for r in routes},
        models={r: ROUTES[r][1] for r in routes},
        providers={"local": {"kind": "openai_compatible", "base_url": f"{api.url}/v1"}}
        | kw.pop("providers", {}),
        usd_cap=kw.pop("usd_cap", 5.0), **kw,
    )


def _one(api, route, env=None, cache=None, **kw):
    kind, model, _ = ROUTES[route]
    c = LLMClient.from_settings(_config(api, {route: ROUTES[route]}, **kw),
                                cache_path=cache, env=env or live_env(api))
    c.sleep = lambda s: asyncio.sleep(0)  # noqa: ARG005 - no real backoff waits in tests
    [r] = c.complete_many([decision_request(route, kind, model)], schema.parse_decision)
    summary = c.usage_summary()
    c.close()
    return r, summary


def test_openai_request_fields(fake_api):
    api = fake_api()
    r, _ = _one(api, "openai")
    assert r.valid and r.usage.cached_input <= r.usage.input
    [req] = api.requests
    b = req["body"]
    assert req["path"] == "/v1/responses" and req["auth"] == "present"
    assert b["store"] is False and b["model"] == "gpt-5.4-nano"
    assert b["text"]["format"] == {"type": "json_schema", "name": schema.SCHEMA_NAME,
                                   "schema": wire_schema("openai", "json_schema",
                                                         schema.decision_schema()),
                                   "strict": True}
    assert b["reasoning"] == {"effort": "low"}
    assert b["prompt_cache_key"] == prompting.prompt_id("single", "default")
    assert b["instructions"].startswith("You trade in a simulated stock market")
    assert [m["role"] for m in b["input"]] == ["user"]
    assert "temperature" not in b


def test_anthropic_request_fields_and_effort_only_where_supported(fake_api):
    api = fake_api()
    r, _ = _one(api, "anthropic")
    assert r.valid
    b = api.requests[0]["body"]
    assert api.requests[0]["path"] == "/v1/messages"
    assert b["output_config"] == {"format": {"type": "json_schema",
                                             "schema": wire_schema("anthropic", "json_schema",
                                                                   schema.decision_schema())},
                                  "effort": "low"}
    assert b["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert b["max_tokens"] == 1024 and [m["role"] for m in b["messages"]] == ["user"]
    from market_agents.llm.providers.anthropic_messages import supports_effort

    assert not supports_effort("claude-haiku-4-5") and supports_effort("claude-haiku-5-5")


def test_openai_compatible_request_fields(fake_api):
    api = fake_api()
    r, _ = _one(api, "local")
    assert r.valid
    b = api.requests[0]["body"]
    assert b["response_format"]["type"] == "json_schema"
    assert b["response_format"]["json_schema"]["strict"] is True
    assert [m["role"] for m in b["messages"]] == ["system", "user"]


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("fault,error,calls", [
    ("429", None, 2), ("500", None, 2), ("529", None, 2), ("reset", None, 2),
    # a 200 body cut short was billed: an invalid answer, recorded and charged, never
    # re-bought by a retry (issue 33; before, it was retried as bad_response)
    ("badjson", "unparseable", 1), ("malformed", "invalid_json", 1), ("refusal", "refusal", 1),
])
def test_faults_per_wire_format(fake_api, route, fault, error, calls):
    api = fake_api(faults=[fault])
    r, s = _one(api, route)
    assert (r.error_class, s["calls"]) == (error, calls)
    assert r.valid is (error is None)
    assert len(api.requests) == calls


@pytest.mark.parametrize("route", list(ROUTES))
def test_timeout_is_retried_then_recorded(fake_api, route):
    api = fake_api(faults=["timeout", "timeout"], hang_s=1.0)
    r, s = _one(api, route, providers={route: {"kind": ROUTES[route][0],
                                               "timeout_s": 0.2, "max_retries": 1,
                                               **({"base_url": f"{api.url}/v1"}
                                                  if route == "local" else {})}})
    assert (r.valid, r.error_class, s["calls"], s["failures"]) == (None, "timeout", 2, 1)


def test_retry_after_header_reaches_the_client(fake_api):
    api = fake_api(faults=["429"], retry_after_s=0.25)
    for kind in ("openai", "anthropic"):
        api.faults.append("429")
        p = make_provider(kind, kind, LLMConfig().settings(kind), live_env(api))

        async def call(p=p, kind=kind):
            try:
                await p.complete(decision_request(kind, kind, ROUTES[kind][1]))
            finally:
                await p.aclose()

        with pytest.raises(ProviderError) as exc:
            asyncio.run(call())
        assert (exc.value.error_class, exc.value.retry_after) == ("rate_limit", 0.25)


def test_usage_normalized_across_wire_formats(fake_api):
    api = fake_api()
    seen = {}
    for route in ROUTES:
        kind, model, _ = ROUTES[route]
        c = LLMClient.from_settings(_config(api, {route: ROUTES[route]}), env=live_env(api))
        res = c.complete_many([decision_request(route, kind, model, agent=f"s{i}", tick=i)
                               for i in range(12)], schema.parse_decision)
        c.close()
        seen[route] = res
    for route, res in seen.items():
        assert any(r.usage.cached_input > 0 for r in res) or route == "local", route
        for r in res:  # input counts every input token, whatever the provider reports
            assert r.usage.input >= r.usage.cached_input + r.usage.cache_write
    # the same request text gives the same normalized input count on every wire format
    assert {seen["openai"][0].usage.input, seen["anthropic"][0].usage.input} == {
        seen["openai"][0].usage.input}
    assert any(r.usage.cache_write > 0 for r in seen["anthropic"])


def test_shuffled_order_and_random_latency_give_identical_results(fake_api, tmp_path):
    reqs = [decision_request("openai", "openai", "gpt-5.4-nano", agent=f"s{i}", tick=i)
            for i in range(40)]

    def run(api, cache):
        c = LLMClient.from_settings(_config(api, {"openai": ROUTES["openai"]}),
                                    cache_path=cache, env=live_env(api))
        c.sleep = lambda s: asyncio.sleep(0)  # noqa: ARG005
        out = c.complete_many(reqs, schema.parse_decision)
        c.close()
        return [(r.key, r.text, r.valid, r.error_class, r.usage, r.usd) for r in out]

    calm = run(fake_api(), tmp_path / "a")
    wild_api = fake_api(jitter_s=0.05, first_attempt_fail_rate=0.3, seed=7)
    wild = run(wild_api, tmp_path / "b")
    arrival = [e["body"]["input"][0]["content"] for e in wild_api.requests]
    assert arrival != [r.messages[1].content for r in reqs][: len(arrival)]  # really shuffled
    assert len(wild_api.requests) > len(reqs)  # and some were retried
    assert wild == calm


def test_keys_never_reach_cache_log_or_errors(fake_api, tmp_path):
    log = tmp_path / "requests.jsonl"
    api = fake_api(log_path=log, valid_keys={SECRET_OPENAI, SECRET_ANTHROPIC})
    for route in ("openai", "anthropic"):
        _one(api, route, cache=tmp_path / "cache")
    bad_env = live_env(api) | {"OPENAI_API_KEY": "sk-wrong-SECRET-9999"}
    with pytest.raises(ProviderAuthError) as exc:
        _one(api, "openai", env=bad_env)
    assert "SECRET" not in str(exc.value) and "HTTP 401" in str(exc.value)
    blobs = [p.read_bytes() for p in Path(tmp_path).rglob("*") if p.is_file()]
    assert blobs and log.exists()
    for blob in blobs:
        for secret in (SECRET_OPENAI, SECRET_ANTHROPIC, "sk-wrong-SECRET-9999"):
            assert secret.encode() not in blob
    assert len(ResponseCache(tmp_path / "cache")) == 2


def test_missing_key_fails_before_any_call(fake_api):
    api = fake_api()
    env = live_env(api)
    env.pop("ANTHROPIC_API_KEY")
    from market_agents.errors import ConfigError

    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        LLMClient.from_settings(_config(api), env=env)
    assert api.requests == []


def test_unreachable_provider_stops_the_run_and_records_nothing(tmp_path):
    import socket

    from market_agents.llm.client import ProviderUnavailable

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"OPENAI_API_KEY": SECRET_OPENAI, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    cfg = LLMConfig(provider_mix={"openai": 1.0}, models={"openai": "gpt-5.4-nano"}, usd_cap=1.0,
                    providers={"openai": {"max_retries": 1, "backoff_s": 0.0}})
    c = LLMClient.from_settings(cfg, cache_path=tmp_path / "c", env=env)
    with pytest.raises(ProviderUnavailable, match="cannot connect after 2 attempts") as exc:
        c.complete_many([decision_request("openai", "openai", "gpt-5.4-nano")])
    assert SECRET_OPENAI not in str(exc.value)
    assert len(c.cache) == 0
    c.close()


def test_config_base_url_wins_over_the_environment(fake_api):
    api, other = fake_api(), fake_api()
    env = live_env(other)  # the SDK variables point at the other server
    for route, url in (("openai", f"{api.url}/v1"), ("anthropic", api.url)):
        r, _ = _one(api, route, env=env, providers={route: {"base_url": url}})
        assert r.valid
    assert len(api.requests) == 2 and other.requests == []


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("fault,error_class", [
    ("quota", "quota"), ("400", "bad_request"), ("401", "auth"), ("403", "auth"),
    ("404", "not_found"),
])
def test_fatal_errors_per_wire_format_stop_without_retry_or_record(fake_api, tmp_path, route,
                                                                   fault, error_class):
    api = fake_api(fault_all=fault)
    kind, model, _ = ROUTES[route]
    with pytest.raises(ProviderFatal, match=f"provider '{route}' \\({kind}\\), model "
                       f"'{model}': {FATAL_NAMES[error_class]}") as exc:
        _one(api, route, cache=tmp_path / "c")
    assert SECRET_OPENAI not in str(exc.value) and SECRET_ANTHROPIC not in str(exc.value)
    assert len(api.requests) == 1
    assert len(ResponseCache(tmp_path / "c")) == 0


def test_failed_response_under_http_200_is_a_provider_failure(fake_api):
    api = fake_api(faults=["failed"])
    r, s = _one(api, "openai")  # retried, then answered
    assert r.valid and s["retries_by_class"] == {"response_failed": 1} and s["calls"] == 2
    api = fake_api(fault_all="failed")
    r, s = _one(api, "openai", providers={"openai": {"max_retries": 1}})
    assert (r.valid, r.error_class) == (None, "response_failed")  # not the model's bad JSON
    assert s["failures_by_class"] == {"response_failed": 1} and s["invalid"] == 0


@pytest.mark.parametrize("cap,concurrency", [
    (0.001, 1), (0.003, 16), (0.01, 2), (0.03, 8), (0.1, 4), (0.3, 16), (1.0, 16),
])
@pytest.mark.slow(8)  # CPU s on 2 cores: out of the quick subset
def test_hard_cap_on_the_wire_against_a_server_billing_max_output(fake_api, cap, concurrency):
    """Every call bills max_output_tokens: recorded spend still never passes the cap."""
    api = fake_api(bill_max_output=True)
    c = LLMClient.from_settings(_config(api, {"openai": ROUTES["openai"]}, usd_cap=cap,
                                        max_concurrency=concurrency), env=live_env(api))
    for t in range(1000):
        res = c.complete_many([decision_request("openai", "openai", "gpt-5.4-nano",
                                                agent=f"s{i}", tick=t) for i in range(16)],
                              schema.parse_decision, tick=t)
        if all(r.error_class == "budget_halt" for r in res):
            break
    s = c.usage_summary()
    c.close()
    assert all(e["body"]["max_output_tokens"] == 1024 for e in api.requests)
    assert s["usd"] <= cap and s["usd_spent"] <= cap and s["usd_over_cap"] == 0.0
    assert s["budget_halts"] > 0  # the cap bound, not something else
    worst = c.worst_case(decision_request("openai", "openai", "gpt-5.4-nano"))
    # under one call's worst case (~0.002 USD) nothing may be sent; above it, most of the cap
    # is used although each call is reserved at its worst case
    assert s["usd"] > cap / 3 if worst <= cap else s["calls"] == 0

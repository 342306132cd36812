"""What the client does when a server misbehaves in ways the SDKs let through (issue 25): an
answer without usage (or with zeros), a body that trickles in past ``timeout_s``, and the
``x-should-retry`` / ``retry-after-ms`` headers. The real SDKs against the local fake server;
no assertion is timed."""

from __future__ import annotations

import pytest

from market_agents.commands.cache import summarize
from market_agents.llm import schema
from market_agents.llm.cache import ResponseCache
from market_agents.llm.client import LLMClient, ProviderFatal, RetryPolicy
from market_agents.llm.config import LLMConfig
from tests.support.llm import decision_request, live_env

ROUTES = {  # route -> (kind, model)
    "openai": ("openai", "gpt-5.4-nano"),
    "anthropic": ("anthropic", "claude-haiku-5-5"),
    "local": ("openai_compatible", "gpt-5.4-nano"),
}


def _client(api, route, model=None, cache=None, replay=False, **settings):
    kind, default = ROUTES[route]
    usd_cap = settings.pop("usd_cap", 5.0)
    base = {"base_url": f"{api.url}/v1"} if route == "local" else {}
    cfg = LLMConfig(
        provider_mix={route: 1.0},
        models={route: model or default},
        providers={route: {"kind": kind, **base, **settings}},
        usd_cap=usd_cap,
    )
    c = LLMClient.from_settings(cfg, cache_path=cache, env=live_env(api), replay=replay)
    c.slept, c.warnings = [], []

    async def sleep(s):
        c.slept.append(s)  # the backoff the client asked for, without waiting it out

    c.sleep = sleep
    c.warn = c.warnings.append
    return c


def _request(route, model=None, tick=5, timeout_s=None):
    kind, default = ROUTES[route]
    return decision_request(
        route, kind, model or default, agent="s1", tick=tick, timeout_s=timeout_s
    )


def _run(c, route, n, model=None):
    """``n`` decisions, one per tick (the issue's 17 planned calls): the results and the
    usage summary."""
    out = [
        c.complete_many([_request(route, model, tick=t)], schema.parse_decision, tick=t)[0]
        for t in range(n)
    ]
    return out, c.usage_summary()


# --- an answer without usage ----------------------------------------------------------------


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("usage", ["reported", "missing", "zeros"])
def test_an_answer_without_usage_is_charged_its_reservation_and_the_cap_holds(
    fake_api, tmp_path, route, usage
):
    api = fake_api(usage=usage, bill_max_output=True)  # a normal answer costs near its worst
    probe = _client(api, route)
    worst = probe.worst_case(_request(route))
    probe.close()
    cap = 2.5 * worst  # room for two answers at their worst case, never three
    c = _client(api, route, cache=tmp_path / "cache", usd_cap=cap)
    res, s = _run(c, route, 17)
    c.close()
    assert s["usd"] <= cap and s["usd_over_cap"] == 0.0
    assert s["budget_halts"] > 0  # the cap bound, as with a server that reports usage
    if usage == "reported":
        assert s["usage_missing"] == 0 and c.warnings == [] and s["answered"] >= 2
        assert all(0 < r.usd < worst for r in res if r.valid)
        return
    # before the fix: priced at 0 USD, all 17 calls went through without a halt or a warning
    assert (s["answered"], s["budget_halts"], s["usage_missing"]) == (2, 15, 2)
    assert [r.usd for r in res[:2]] == [pytest.approx(worst)] * 2
    assert s["usd_spent"] == pytest.approx(2 * worst)
    [warning] = c.warnings  # once per run, not once per answer
    assert "without token usage" in warning and f"{worst:.6f}" in warning
    # the record keeps the charge: a replay halts at the same decision at zero calls
    cache = ResponseCache(tmp_path / "cache", readonly=True)
    entries = [body for _, body in cache.scan()[0]]
    cache.close()
    assert [(e["usage_missing"], e["usd"]) for e in entries] == [(True, pytest.approx(worst))] * 2
    assert summarize(tmp_path / "cache")["groups"][0]["usage_missing"] == 2  # ma cache
    r = _client(api, route, cache=tmp_path / "cache", usd_cap=cap, replay=True)
    _, again = _run(r, route, 17)
    r.close()
    assert (again["calls"], again["cache_hits"], again["budget_halts"], again["usage_missing"]) == (
        0,
        2,
        15,
        2,
    )


def test_a_free_route_without_usage_is_neither_charged_nor_warned(fake_api):
    """A local model priced at zero (here the mock's id, 0 USD per token) answering without
    usage costs nothing: no reservation to charge, nothing to warn about."""
    api = fake_api(usage="missing")
    c = _client(api, "local", model="mock-trader", usd_cap=0.001)
    res, s = _run(c, "local", 3, model="mock-trader")
    c.close()
    assert all(r.valid and r.usd == 0.0 for r in res)
    assert (s["answered"], s["usage_missing"], s["budget_halts"], c.warnings) == (3, 0, 0, [])


# --- a wall-clock deadline per attempt ------------------------------------------------------


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_trickling_body_is_cut_off_at_the_deadline(fake_api, route):
    """12 bytes every 0.05 s keep every read under the SDK's per-read timeout; the body would
    take 20x ``timeout_s`` in all. The attempt is cut at its deadline: a timeout, and the
    server sees the client hang up before the body is out."""
    timeout = 0.5
    api = fake_api(faults=["trickle"], hang_s=20 * timeout, trickle_s=0.05)
    c = _client(api, route, timeout_s=timeout, max_retries=0)
    [r] = c.complete_many([_request(route, timeout_s=timeout)], schema.parse_decision)
    s = c.usage_summary()
    c.close()
    assert (r.valid, r.error_class, s["calls"], s["failures"]) == (None, "timeout", 1, 1)
    # the trickle would end after 10 s; the server is idle long before (a generous bound)
    assert api.wait_idle(timeout=60)
    assert (api.dropped, api.answered) == (1, 0)


def test_the_claim_lease_is_derived_from_the_attempt_deadline(fake_api):
    api = fake_api()
    c = _client(api, "openai", timeout_s=2.0, max_retries=3)
    policy = RetryPolicy(max_retries=3, base_delay_s=0.5)
    req = _request("openai")
    assert c._deadline(req, "openai") == 2.0
    assert c._deadline(_request("openai", timeout_s=0.25), "openai") == 0.25
    # every attempt at its deadline, every backoff at its longest, a minute of slack
    assert c._lease(req, "openai") == 4 * 2.0 + 3 * policy.max_delay_s + 60
    c.close()
    bare = LLMClient({"openai": c.providers["openai"]}, c.prices)
    assert bare._deadline(req, "openai") == 60.0


# --- x-should-retry and retry-after-ms ------------------------------------------------------


@pytest.mark.parametrize("route", list(ROUTES))
def test_x_should_retry_false_is_tried_once(fake_api, route):
    api = fake_api(fault_all="500", fault_headers={"x-should-retry": "false"})
    c = _client(api, route)  # max_retries 4
    [r] = c.complete_many([_request(route)], schema.parse_decision)
    s = c.usage_summary()
    c.close()
    assert (r.error_class, s["calls"], len(api.requests)) == ("server_error", 1, 1)
    assert s["retries_by_class"] == {} and c.slept == []


@pytest.mark.parametrize("route", list(ROUTES))
def test_x_should_retry_true_retries_a_status_that_is_otherwise_fatal(fake_api, route):
    api = fake_api(faults=["400"], fault_headers={"x-should-retry": "true"})
    c = _client(api, route)
    [r] = c.complete_many([_request(route)], schema.parse_decision)
    s = c.usage_summary()
    c.close()
    assert r.valid and (s["calls"], s["retries_by_class"]) == (2, {"bad_request": 1})


def test_a_fatal_status_the_server_says_to_retry_still_stops_after_the_retries(fake_api):
    api = fake_api(fault_all="400", fault_headers={"x-should-retry": "true"})
    c = _client(api, "openai", max_retries=2)
    with pytest.raises(ProviderFatal, match="invalid request"):
        c.complete_many([_request("openai")], schema.parse_decision)
    c.close()
    assert len(api.requests) == 3


@pytest.mark.parametrize("route", list(ROUTES))
def test_retry_after_ms_is_honoured_before_retry_after(fake_api, route):
    """A 429 carrying both ``Retry-After: 0.01`` and ``retry-after-ms: 1500`` waits 1.5 s, as
    the SDKs do (the wait is recorded, not slept)."""
    api = fake_api(faults=["429"], retry_after_s=0.01, fault_headers={"retry-after-ms": "1500"})
    c = _client(api, route)
    [r] = c.complete_many([_request(route)], schema.parse_decision)
    c.close()
    assert r.valid and c.slept == [1.5]


def test_the_recorded_sleep_is_the_client_backoff_without_headers(fake_api):
    api = fake_api(faults=["500"])
    c = _client(api, "openai", backoff_s=0.5)
    [r] = c.complete_many([_request("openai")], schema.parse_decision)
    c.close()
    assert r.valid and c.slept == [0.5]


def test_no_answer_or_error_carries_the_key(fake_api, tmp_path):
    api = fake_api(fault_all="500", fault_headers={"x-should-retry": "false"})
    c = _client(api, "openai", cache=tmp_path / "cache")
    c.complete_many([_request("openai")], schema.parse_decision)
    c.close()
    stored = (tmp_path / "cache").glob("*")
    text = b"".join(p.read_bytes() for p in stored if p.is_file())
    assert live_env(api)["OPENAI_API_KEY"].encode() not in text

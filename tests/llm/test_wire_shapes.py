"""What the client does with HTTP 200 bodies the SDKs cannot read, errors inside a 200,
attempts the provider may have billed without answering, proxies, and an answer the cache
cannot store (issue 33: no answer is paid and thrown away). The real SDKs against the local
fake server; no assertion is timed."""

from __future__ import annotations

import json
import sqlite3

import diskcache
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market_agents.errors import ConfigError
from market_agents.llm import schema
from market_agents.llm.cache import CacheError, ResponseCache
from market_agents.llm.client import LLMClient, ProviderFatal, ProviderUnavailable
from market_agents.llm.config import LLMConfig
from market_agents.testing.fakeserver import FakeAPI
from tests.support.llm import SECRET_OPENAI, decision_request, live_env
from tests.support.socks import SocksProxy

ROUTES = {  # route -> (kind, model)
    "openai": ("openai", "gpt-5.4-nano"),
    "anthropic": ("anthropic", "claude-haiku-5-5"),
    "local": ("openai_compatible", "gpt-5.4-nano"),
}
PROXY_VARS = ("ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch):
    """The SDKs' HTTP client reads proxies from the environment: start from none."""
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.lower(), raising=False)


def _client(api, route, cache=None, **settings):
    kind, model = ROUTES[route]
    base = {"base_url": f"{api.url}/v1"} if route == "local" else {}
    usd_cap = settings.pop("usd_cap", 5.0)
    cfg = LLMConfig(provider_mix={route: 1.0}, models={route: model},
                    providers={route: {"kind": kind, "backoff_s": 0.0, **base, **settings}},
                    usd_cap=usd_cap)
    return LLMClient.from_settings(cfg, cache_path=cache, env=live_env(api))


def _one(api, route, cache=None, timeout_s=None, **settings):
    """One decision: (result, usage summary, the request's worst case)."""
    c = _client(api, route, cache, **settings)
    kind, model = ROUTES[route]
    req = decision_request(route, kind, model, timeout_s=timeout_s)
    try:
        [r] = c.complete_many([req], schema.parse_decision)
        return r, c.usage_summary(), c.worst_case(req)
    finally:
        c.close()


def _entries(cache):
    c = ResponseCache(cache, readonly=True)
    good, bad = c.scan()
    c.close()
    assert bad == []
    return [body for _, body in good]


# --- a 200 the SDK cannot read: an invalid answer, recorded and charged ---------------------


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("fault", ["output_null", "badjson"])
def test_an_unreadable_200_is_a_recorded_invalid_answer_charged_at_its_worst_case(
        fake_api, tmp_path, route, fault):
    """openai-python #2486: ``output: null`` (here with usage 700/150) was a TypeError
    traceback, billed and neither stored nor charged; a body cut short was retried, paid
    twice and recorded as a failure at 0 USD."""
    api = fake_api(fault_all=fault, tokens=(700, 150))
    r, s, worst = _one(api, route, cache=tmp_path / "cache")
    assert (r.valid, r.error_class, r.calls) == (False, "unparseable", 1)
    assert r.usd == pytest.approx(worst) and s["usd_spent"] == pytest.approx(worst)
    assert s["worst_case_charges"] == {"unparseable": {"n": 1, "usd": pytest.approx(worst)}}
    assert (s["answered"], s["invalid"], s["failures"], api.answered) == (1, 1, 0, 1)
    [entry] = _entries(tmp_path / "cache")
    assert (entry["status"], entry["error_class"], entry["text"]) == (
        "answered", "unparseable", "")
    assert entry["unparseable"] and entry["usd"] == pytest.approx(worst)
    if fault == "output_null":  # the usage it reported is kept as the record
        assert entry["usage"]["output"] == 150
    # the same command again: the recorded invalid answer, no second purchase
    again, s2, _ = _one(api, route, cache=tmp_path / "cache")
    assert (again.cache_hit, again.error_class, s2["calls"], api.answered) == (
        True, "unparseable", 0, 1)
    assert s2["usd_live"] == pytest.approx(worst) and s2["usd_spent"] == 0.0


# --- an error inside a 200: a provider error with the usual retry rules --------------------


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("fault,error_class", [("error200", "server_error"),
                                               ("rate200", "rate_limit")])
def test_an_error_inside_a_200_is_retried_like_its_status(fake_api, tmp_path, route, fault,
                                                          error_class):
    """tailcallhq/forgecode #2595: ``{"error": {...}}`` under HTTP 200 was a traceback on the
    anthropic and openai routes."""
    api = fake_api(faults=[fault])
    r, s, _ = _one(api, route)
    assert r.valid and s["retries_by_class"] == {error_class: 1} and s["calls"] == 2
    api = fake_api(fault_all=fault)
    r, s, _ = _one(api, route, cache=tmp_path / "cache", max_retries=1)
    assert (r.valid, r.error_class, r.usd) == (None, error_class, 0.0)  # nothing was billed
    assert s["failures_by_class"] == {error_class: 1} and s["invalid"] == 0
    assert s["worst_case_charges"] == {} and s["usd_live"] == 0.0
    [entry] = _entries(tmp_path / "cache")
    assert entry["status"] == "failed" and "usd" not in entry


# --- attempts the provider may have billed without answering --------------------------------


@pytest.mark.parametrize("route", list(ROUTES))
def test_timed_out_attempts_are_charged_at_their_worst_case(fake_api, tmp_path, route):
    api = fake_api(faults=["timeout", "timeout"], hang_s=1.0)
    r, s, worst = _one(api, route, cache=tmp_path / "cache", timeout_s=0.2, max_retries=1)
    assert (r.valid, r.error_class, r.calls) == (None, "timeout", 2)
    assert r.usd == pytest.approx(2 * worst) and s["usd_live"] == pytest.approx(2 * worst)
    assert s["worst_case_charges"] == {"timeout": {"n": 2, "usd": pytest.approx(2 * worst)}}
    [entry] = _entries(tmp_path / "cache")
    assert entry["billed_attempts"] == {"timeout": 2}
    assert entry["usd"] == pytest.approx(2 * worst)
    # the record keeps the charge: a re-run reads it (no call) and counts it again as used
    again, s2, _ = _one(api, route, cache=tmp_path / "cache", timeout_s=0.2, max_retries=1)
    assert (again.cache_hit, s2["calls"], s2["usd_live"]) == (True, 0, pytest.approx(2 * worst))


def test_an_answer_after_a_timed_out_attempt_carries_both_charges(fake_api):
    api = fake_api(faults=["timeout"], hang_s=1.0)
    r, s, worst = _one(api, "openai", timeout_s=0.2, max_retries=1)
    assert r.valid and r.calls == 2
    assert worst < r.usd < 2 * worst
    assert s["worst_case_charges"]["timeout"]["n"] == 1


def test_a_failed_response_object_is_charged_at_its_worst_case(fake_api):
    """A Responses object with status failed (HTTP 200) is one the provider made and may bill:
    retried like a failure, charged like a timed-out read. On the fault corpus's first pass
    the server answered 26 bodies and the run recorded 25 (faults/cases.yaml,
    answer-failed-openai)."""
    api = fake_api(faults=["failed"])
    r, s, worst = _one(api, "openai", max_retries=1)
    assert r.valid and r.calls == 2
    assert s["worst_case_charges"]["response_failed"]["n"] == 1
    assert worst < r.usd < 2 * worst


def test_a_retry_after_a_billed_attempt_needs_room_under_the_cap(fake_api):
    """Each attempt that may have been billed is charged, so a retry is sent only when the
    cap can hold one more worst case; here it cannot: one attempt, charged, no halt."""
    probe = fake_api()
    _, _, worst = _one(probe, "openai")
    api = fake_api(faults=["timeout", "timeout"], hang_s=1.0)
    r, s, _ = _one(api, "openai", timeout_s=0.2, max_retries=3, usd_cap=1.5 * worst)
    assert (r.error_class, r.calls, s["budget_halts"]) == ("timeout", 1, 0)
    assert s["usd"] == pytest.approx(worst) and s["usd_over_cap"] == 0.0


# --- proxies ------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
def test_a_socks_proxy_carries_every_route(fake_api, monkeypatch, scheme):
    """``ALL_PROXY=socks5://...`` was an ImportError (openai) / AttributeError (anthropic)
    traceback before any call: socksio, httpx's SOCKS dependency, is now installed."""
    api = fake_api()
    with SocksProxy() as proxy:
        monkeypatch.setenv("ALL_PROXY", proxy.url.replace("socks5", scheme))
        for route in ROUTES:
            r, _, _ = _one(api, route)
            assert r.valid, route
        assert proxy.carried == len(ROUTES) == len(api.requests)


@pytest.mark.parametrize("var,url", [("ALL_PROXY", "socks5://user:pw@127.0.0.1:{port}"),
                                     ("HTTP_PROXY", "http://user:pw@127.0.0.1:{port}")])
@pytest.mark.parametrize("route", list(ROUTES))
def test_a_dead_proxy_is_named_in_one_line(fake_api, monkeypatch, unused_port, route, var,
                                           url):
    api = fake_api()
    monkeypatch.setenv(var, url.format(port=unused_port))
    with pytest.raises(ProviderUnavailable) as exc:
        _one(api, route, max_retries=1)
    line = str(exc.value)
    assert f"through the proxy {var}=" in line and f"unset {var}" in line
    assert "\n" not in line and "pw" not in line and SECRET_OPENAI not in line
    assert api.requests == []


@pytest.mark.parametrize("url", ["socks4://127.0.0.1:1080", "ftp://proxy:21", "not a url"])
def test_a_proxy_url_the_client_cannot_use_is_refused_naming_the_variable(fake_api,
                                                                          monkeypatch, url):
    api = fake_api()
    monkeypatch.setenv("ALL_PROXY", url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # httpx2 builds every proxy all the same
    for route in ROUTES:
        with pytest.raises(ConfigError, match="ALL_PROXY=.*fix or unset ALL_PROXY"):
            _client(api, route)
    assert api.requests == []


@pytest.fixture
def unused_port():
    import socket

    with socket.socket() as s:  # nothing listens there once it is closed
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- an answer the cache cannot store ------------------------------------------------------


def test_an_answer_the_cache_cannot_store_is_kept_named_and_stored_next_time(
        fake_api, tmp_path, monkeypatch):
    """A full disk while the cache stores an answer lost it (1 of 14 tries): now the run stops
    with one line naming the request and what it cost, the answer is kept beside the cache,
    and the next run stores it instead of buying it again."""
    api = fake_api()
    real_add = diskcache.Cache.add

    def full(self, key, *args, **kwargs):
        if not str(key).startswith("probe:"):
            raise sqlite3.OperationalError("database or disk is full")
        return real_add(self, key, *args, **kwargs)

    monkeypatch.setattr(diskcache.Cache, "add", full)
    with pytest.raises(CacheError) as exc:
        _one(api, "openai", cache=tmp_path / "cache")
    line = str(exc.value)
    assert "database or disk is full" in line and "\n" not in line
    assert "USD paid) is kept in" in line and str(tmp_path / "cache" / "unstored") in line
    assert api.answered == 1
    monkeypatch.setattr(diskcache.Cache, "add", real_add)  # the disk has room again
    r, s, _ = _one(api, "openai", cache=tmp_path / "cache")
    assert (r.valid, r.cache_hit, s["calls"], api.answered) == (True, True, 0, 1)
    assert not (tmp_path / "cache" / "unstored").exists()


# --- any shape in a 200 ----------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)
KEYS = st.sampled_from(["id", "object", "status", "output", "content", "choices", "usage",
                        "model", "type", "error", "stop_reason", "output_text", "message"])
BODIES = st.one_of(
    JSON.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(KEYS, JSON, max_size=6).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40),
)


@pytest.fixture(scope="module")
def shape_server():
    with FakeAPI() as api:
        yield api


@pytest.mark.parametrize("route", list(ROUTES))
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES)
def test_any_200_body_is_stored_or_charged_never_a_traceback(shape_server, tmp_path_factory,
                                                             route, body):
    api = shape_server
    api.raw_body = body
    api.fault_all = "raw"
    before = api.answered
    cache = tmp_path_factory.mktemp("shape")
    try:
        r, _, worst = _one(api, route, cache=cache, max_retries=0)
    except ProviderFatal:  # an error object naming a fatal class: one line, nothing paid
        assert _error_object(body)
        return
    billed = api.answered - before
    assert billed == 1  # the server sent the body: a request answered with HTTP 200
    [entry] = _entries(cache)  # recorded: an answer, or a failure
    if entry["status"] == "failed":  # only an error object in the 200 is a failure
        assert _error_object(body) and r.valid is None and r.usd == 0.0
    else:  # an answer: charged, at its worst case when it could not be read
        assert r.valid is not None and r.usd > 0
        if r.error_class == "unparseable":
            assert r.usd == pytest.approx(worst) == entry["usd"]


def _error_object(body: bytes) -> bool:
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and bool(data.get("error"))

"""The client keeps the record: each answer stored the moment it arrives, one payer per
request across clients sharing a cache, fatal errors stop with nothing recorded, transient ones
are retried and counted by class, replay mode never calls, and the hard cap holds."""

import asyncio
import re
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.llm import schema
from market_agents.llm.budget import Budget
from market_agents.llm.cache import ResponseCache
from market_agents.llm.client import (
    LLMClient,
    ProviderFatal,
    ReplayMiss,
    ReplayOnly,
    RetryPolicy,
)
from market_agents.llm.config import LLMConfig
from market_agents.llm.pricing import load_prices
from market_agents.llm.providers.base import Provider, ProviderError
from market_agents.llm.types import LLMResponse, Usage
from tests.support.llm import decision_request

from .test_client import GOOD, Scripted, record_waits

NANO = ("openai", "openai", "gpt-5.4-nano")


def nano(i: int, **kw):
    return decision_request(*NANO, agent=f"s{i}", tick=i, **kw)


class Gated(Provider):
    """Answers at once, except agents in ``slow``, which wait until ``release`` is set; every
    answer is new text (a counter), as a real model's may differ between identical calls."""

    kind, live = "openai", True

    def __init__(self, slow=(), bill_max_output=False):
        super().__init__("openai")
        self.slow, self.release = set(slow), threading.Event()
        self.calls = 0
        self.bill_max_output = bill_max_output

    async def complete(self, request):
        self.calls += 1
        n = self.calls
        while request.agent in self.slow and not self.release.is_set():
            await asyncio.sleep(0.01)
        out = request.max_output_tokens if self.bill_max_output else 230
        return LLMResponse(GOOD.replace("cheap", f"cheap {n}"),
                           Usage(input=request.input_token_bound() // 4, output=out))


def test_each_answer_is_stored_the_moment_it_arrives(tmp_path):
    p = Gated(slow={"s0"})
    c = LLMClient({"openai": p}, load_prices(), cache=ResponseCache(tmp_path / "c"))
    reqs = [nano(i) for i in range(6)]
    done = []
    t = threading.Thread(target=lambda: done.append(c.complete_many(reqs, schema.parse_decision)))
    t.start()
    reader = ResponseCache(tmp_path / "c")  # what another process (or a rerun) would see
    deadline = time.monotonic() + 120
    while len(reader) < 5:
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.01)
    # five answers are in the record while the batch still waits for the sixth
    assert not done and reader.get(reqs[0].key()) is None
    assert {k for k in reader.keys()} == {r.key() for r in reqs[1:]}
    p.release.set()
    t.join(120)
    assert done and len(reader) == 6
    c.close()


def test_a_second_client_waits_for_the_claimed_answer_and_pays_nothing(tmp_path):
    a_prov, b_prov = Gated(slow={"s0"}), Gated()
    a = LLMClient({"openai": a_prov}, load_prices(), cache=ResponseCache(tmp_path / "c"))
    b = LLMClient({"openai": b_prov}, load_prices(), cache=ResponseCache(tmp_path / "c"))
    req = nano(0)
    got = {}
    ta = threading.Thread(target=lambda: got.update(a=a.complete_many([req])))
    ta.start()
    while a_prov.calls == 0:  # a holds the claim and its call is in flight
        time.sleep(0.01)
    tb = threading.Thread(target=lambda: got.update(b=b.complete_many([req])))
    tb.start()
    while b.counts["claim_waits"] == 0:
        time.sleep(0.01)
    a_prov.release.set()
    ta.join(120)
    tb.join(120)
    assert b_prov.calls == 0 and got["a"][0].text == got["b"][0].text
    assert got["b"][0].cache_hit and got["b"][0].usd_spent == 0.0
    assert got["a"][0].answer_sha256 == got["b"][0].answer_sha256
    a.close()
    b.close()


@pytest.mark.parametrize("error_class,detail,name", [
    ("quota", "HTTP 429 insufficient_quota", "quota exhausted"),
    ("bad_request", "HTTP 400 invalid_request_error", "invalid request"),
    ("auth", "HTTP 403 permission_error (check the API key in .env)",
     "authentication or permission refused"),
    ("not_found", "HTTP 404 not_found_error", "unknown model"),
])
def test_fatal_error_stops_at_once_and_records_nothing_for_it(tmp_path, error_class, detail,
                                                             name):
    class Failing(Gated):
        async def complete(self, request):
            if request.agent == "s3":
                self.calls += 1
                raise ProviderError(error_class, detail)
            return await super().complete(request)

    p = Failing()
    c = LLMClient({"openai": p}, load_prices(), cache=ResponseCache(tmp_path / "c"),
                  max_concurrency=4, retry={"openai": RetryPolicy(max_retries=4)})
    reqs = [nano(i) for i in range(12)]
    with pytest.raises(ProviderFatal, match=f"provider 'openai' \\(openai\\), model "
                       f"'gpt-5.4-nano': {name} \\({re.escape(detail)}") as exc:
        c.complete_many(reqs, schema.parse_decision)
    assert "sk-" not in str(exc.value)
    cache = c.cache
    assert cache.get(reqs[3].key()) is None and cache.claims() == []
    stored = set(cache.keys())
    assert stored <= {r.key() for r in reqs} - {reqs[3].key()}
    assert p.calls == len(stored) + 1 < 12  # never retried; the rest of the batch not sent
    c.close()


@pytest.mark.parametrize("error_class", ["rate_limit", "server_error", "timeout", "reset",
                                         "response_failed"])
def test_transient_errors_are_retried_counted_by_class_then_recorded(tmp_path, error_class):
    p = Scripted([ProviderError(error_class, retry_after=1.5)] * 3)
    c = LLMClient({"openai": p}, load_prices(), cache=ResponseCache(tmp_path / "c"),
                  retry={"openai": RetryPolicy(max_retries=2, base_delay_s=0.25)})
    waits = record_waits(c)
    [r] = c.complete_many([nano(0)], schema.parse_decision)
    s = c.usage_summary()
    assert (r.valid, r.error_class, p.calls, waits) == (None, error_class, 3, [1.5, 1.5])
    assert s["retries_by_class"] == {error_class: 2}
    assert s["failures_by_class"] == {error_class: 1}
    assert c.cache.get(nano(0).key())["status"] == "failed"
    c.close()


def test_replay_mode_serves_the_record_and_stops_at_a_miss(tmp_path):
    cfg = LLMConfig(provider_mix={"openai": 1.0}, models={"openai": "gpt-5.4-nano"}, usd_cap=1)
    live = LLMClient({"openai": Scripted([])}, load_prices(), cache=ResponseCache(tmp_path / "c"))
    first = live.complete_many([nano(i) for i in range(3)], schema.parse_decision)
    live.close()
    replay = LLMClient.from_settings(cfg, cache_path=tmp_path / "c", env={}, replay=True)
    assert isinstance(replay.providers["openai"], ReplayOnly)  # no SDK client, no key
    again = replay.complete_many([nano(i) for i in range(3)], schema.parse_decision)
    assert [r.text for r in again] == [r.text for r in first] and all(r.cache_hit for r in again)
    with pytest.raises(ReplayMiss, match=r"replay: 1 request\(s\) of tick 9 have no stored answer"):
        replay.complete_many([nano(0), nano(9)], schema.parse_decision, where="tick 9")
    s = replay.usage_summary()
    assert s["calls"] == 0 and s["replay"] is True
    replay.close()


@settings(max_examples=25, deadline=None)
@given(cap=st.sampled_from([0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]),
       concurrency=st.integers(1, 16), per_tick=st.integers(1, 16))
@pytest.mark.slow(6)  # CPU s on 2 cores: out of the quick subset
def test_hard_cap_holds_when_every_call_bills_its_output_limit(cap, concurrency, per_tick):
    p = Gated(bill_max_output=True)
    c = LLMClient({"openai": p}, load_prices(), budget=Budget(usd_cap=cap),
                  max_concurrency=concurrency, route_concurrency={"openai": concurrency})
    for t in range(2000):
        res = c.complete_many([decision_request(*NANO, agent=f"s{i}", tick=t)
                               for i in range(per_tick)], schema.parse_decision, tick=t)
        if all(r.error_class == "budget_halt" for r in res):
            break
    s = c.usage_summary()
    assert s["usd"] <= cap and s["usd_over_cap"] == 0.0
    assert s["usd"] == pytest.approx(s["usd_spent"])
    assert s["budget_halts"] > 0 and s["halt_tick"] is not None
    c.close()

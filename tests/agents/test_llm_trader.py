"""LLMTraderPool: the engine ⇄ LLM bridge, with hand-made views and through whole runs."""

from __future__ import annotations

import filecmp
import json

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from market_agents.agents.llm_trader import COHORT_SIZE, LLMTraderPool, split_models
from market_agents.config import Config
from market_agents.errors import ConfigError
from market_agents.llm.budget import Budget
from market_agents.llm.client import LLMClient
from market_agents.llm.config import ProviderSettings
from market_agents.llm.pricing import load_prices
from market_agents.llm.providers.mock import MockProvider
from market_agents.market.types import BUY, AssetView, MarketView, Order
from market_agents.rng import Streams
from market_agents.sim.rundir import SCHEMAS
from market_agents.sim.runner import run_to_dir
from market_agents.testing.fakeserver import FakeAPI

PARQUETS = ("ticks", "trades", "orders", "agents", "llm_decisions")


def cfg(**llm) -> Config:
    return Config.model_validate({"population": {"llm_share": 0.25, "llm": llm}})


def view(slot: int, tick: int = 60, mid: float = 465.0, vpub: float = 475.0,
         shares: int = 20) -> MarketView:
    asset = AssetView(asset=0, public_value=vpub, last_price=mid, mid_price=mid,
                      best_bid=mid - 0.5, best_ask=mid + 0.5, bid_size=5, ask_size=5,
                      recent_prices=(mid,) * 5, halted=False, shares=shares)
    return MarketView(tick=tick, slot=slot, assets=(asset,), cash=20_000.0,
                      wealth=20_000.0 + shares * mid, position_limit=None, max_leverage=1.0)


TWO_ROUTES = dict(provider_mix={"mock": 0.5, "haiku": 0.5},
                  models={"mock": "mock-trader", "haiku": "claude-haiku-5-5"},
                  providers={"haiku": {"kind": "mock"}}, prompt_set="diverse")


def test_assignment_is_per_slot_and_deterministic():
    a = LLMTraderPool(cfg(**TWO_ROUTES), Streams(3), list(range(5, 45)), None)
    b = LLMTraderPool(cfg(**TWO_ROUTES), Streams(3), [7, 60], None)
    c = LLMTraderPool(cfg(**TWO_ROUTES), Streams(4), [7], None)
    assert a.assignment[7] == b.assignment[7]  # independent of the other slots
    assert {x["route"] for x in a.assignment.values()} == {"mock", "haiku"}
    assert len({x["persona"] for x in a.assignment.values()}) == 5
    assert any(a.assignment[s] != LLMTraderPool(cfg(**TWO_ROUTES), Streams(4), [s],
                                                None).assignment[s] for s in range(5, 45))
    for p in (a, b, c):
        p.close()


def test_two_models_of_one_provider_split_the_slots():
    p = LLMTraderPool(cfg(models={"mock": ["gpt-5.4-nano", "gpt-5.4-mini"]}), Streams(1),
                      list(range(100)), None)
    models = [x["model"] for x in p.assignment.values()]
    assert models.count("gpt-5.4-nano") == models.count("gpt-5.4-mini") == 50
    assert set(p.manifest()["price_assumptions"]) == {"gpt-5.4-nano", "gpt-5.4-mini"}
    p.close()


@given(slots=st.sets(st.integers(0, 999), max_size=120),
       k=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_model_split_is_exactly_even_and_rotates_the_remainder(slots, k, seed):
    models = [f"m{i}" for i in range(k)]
    split = split_models(list(slots), models, Streams(seed), "openai")
    assert set(split) == slots
    counts = [list(split.values()).count(m) for m in models]
    assert max(counts) - min(counts) <= 1 and sum(counts) == len(slots)
    # k consecutive seeds give every model the same number of slots in all.
    totals = [0] * k
    for s in range(seed - seed % k, seed - seed % k + k):
        got = list(split_models(list(slots), models, Streams(s), "openai").values())
        totals = [t + got.count(m) for t, m in zip(totals, models, strict=True)]
    assert len(set(totals)) == 1


def test_decisions_become_orders_and_rows():
    p = LLMTraderPool(cfg(), Streams(1), list(range(40)), None)
    views = {s: view(s) for s in range(40)}
    out = p.decide(60, views)
    assert sorted(out) == list(range(40))
    rows = p.records()
    assert [r["slot"] for r in rows] == list(range(40))
    assert all(set(r) == set(SCHEMAS["llm_decisions"]) for r in rows)
    for r in rows:
        orders = out[r["slot"]]
        if r["valid"] and r["action"] != "hold":
            [o] = orders
            assert isinstance(o, Order) and o.qty == r["qty"] and o.price == r["price"]
        else:
            assert orders == []
            assert r["action"] == "hold" and r["qty"] == 0
    # price far below V^pub: the mock buys
    buys = [r for r in rows if r["action"] == "buy"]
    assert len(buys) > 25 and all(out[r["slot"]][0].side == BUY for r in buys)
    assert any(r["valid"] is False for r in rows) or len(rows) < 60
    p.close()


def test_memory_and_channel_reach_the_prompt():
    p = LLMTraderPool(cfg(memory=2, channel=True), Streams(1), list(range(10)), None)
    assert sorted(len(v) for v in p.cohort.values()) == [COHORT_SIZE - 1] * 10
    first = p.request(60, view(0))
    assert "- none" in first.messages[1].content
    p.decide(60, {s: view(s) for s in range(10)})
    p.decide(80, {s: view(s, tick=80, shares=22) for s in range(10)})
    later = p.request(100, view(0, tick=100, shares=25)).messages[1].content
    assert "tick 60:" in later and "tick 80:" in later
    peers = p.cohort[0]
    spoke = [s for s in peers if s in p.messages]
    assert spoke and all(f"trader {s} (tick {p.messages[s][0]})" in later for s in spoke)
    assert all(f"trader {s} " not in later for s in range(10) if s not in peers)
    p.close()


def test_memory_and_channel_activity_is_counted():
    p = LLMTraderPool(cfg(memory=2, channel=True), Streams(1), list(range(10)), None)
    p.decide(60, {s: view(s) for s in range(10)})
    first = dict(p.activity)
    assert first["llm_memory_lines"] == 0 and first["llm_channel_read"] == 0  # nothing yet
    assert first["llm_channel_sent"] == len(p.messages) > 0
    assert p.mechanisms() == {"memory": False, "channel": False}  # on, not yet acted
    shown = sum(len([q for q in p.cohort[s] if q in p.messages]) for s in range(10))
    p.decide(80, {s: view(s, tick=80) for s in range(10)})
    assert p.activity["llm_memory_lines"] == 10  # one past decision shown to each
    assert p.activity["llm_channel_read"] == shown > 0
    assert p.mechanisms() == {"memory": True, "channel": True}
    quiet = LLMTraderPool(cfg(), Streams(1), list(range(10)), None)
    quiet.decide(60, {s: view(s) for s in range(10)})
    assert quiet.activity == {"llm_channel_sent": 0, "llm_channel_read": 0,
                              "llm_memory_lines": 0}
    assert quiet.mechanisms() == {}  # none switched on
    for pool in (p, quiet):
        pool.close()


def test_decision_cap_and_budget_halt_mean_hold():
    p = LLMTraderPool(cfg(decision_cap=1), Streams(1), [1, 2], None)
    p.decide(60, {1: view(1), 2: view(2)})
    out = p.decide(80, {1: view(1, tick=80), 2: view(2, tick=80)})
    assert out == {1: [], 2: []}
    assert [r["error_class"] for r in p.records()[2:]] == ["decision_cap"] * 2
    assert all(r["valid"] is None for r in p.records()[2:])
    p.close()

    class PaidMock(MockProvider):
        live = True

    prices = load_prices()
    client = LLMClient({"mock": PaidMock("mock", ProviderSettings())}, prices,
                       budget=Budget(usd_cap=0.001))  # below one call's worst case (~0.002)
    p = LLMTraderPool(cfg(models={"mock": "gpt-5.4-nano"}), Streams(1), [1, 2], None,
                      client=client)
    assert p.decide(60, {1: view(1), 2: view(2)}) == {1: [], 2: []}
    assert p.manifest()["llm_usage"]["budget_halts"] == 2
    p.close()


@pytest.mark.slow(6)  # CPU s on 2 cores: out of the quick subset
def test_frozen_library_replays_recorded_decisions_at_a_larger_n(tmp_path):
    from market_agents.llm.library import DecisionLibrary

    cache = tmp_path / "cache"
    run_to_dir(Config.model_validate({"population": {"llm_share": 0.5, "llm": {
        "models": {"mock": "gpt-5.4-nano"}}}}), 1, tmp_path / "source", cache=cache)
    lib = DecisionLibrary.from_cache(cache, "gpt-5.4-nano").save(tmp_path / "nano.npz")
    big = Config.model_validate({"population": {"n_traders": 300, "llm_share": 0.25, "llm": {
        "provider_mix": {"library": 1.0}, "models": {"library": "gpt-5.4-nano"},
        "frozen_library": str(lib)}}})
    a = run_to_dir(big, 2, tmp_path / "a")
    b = run_to_dir(big, 2, tmp_path / "b")
    assert all(_same(a, b, name) for name in PARQUETS)
    m = json.loads((a / "manifest.json").read_text())
    dec = pl.read_parquet(a / "llm_decisions.parquet")
    assert m["final_conservation_ok"] and m["n_llm_agents"] == 75
    assert (dec["provider"] == "library").all() and dec["usd"].sum() == 0.0
    assert 0.9 <= dec["valid"].mean() <= 1.0 and dec.height >= 75 * 27
    assert m["llm_usage"]["calls"] == 0 and m["library"]["n_entries"] > 1000
    assert m["library"]["out_of_support"] == (m["library"]["nn_median"]
                                              > m["library"]["loo_nn_p90"])
    # every replayed decision's distance is saved with the run (§5.4's distribution), with
    # the library's own percentiles (its N = 100 states)
    nn = m["library"]["nn_distances"]
    import numpy as np

    assert len(nn) == dec.height and np.median(nn) == pytest.approx(m["library"]["nn_median"],
                                                                    abs=1e-5)
    ref = m["library"]["loo_nn_percentiles"]
    assert len(ref) == 101 and ref[90] == pytest.approx(m["library"]["loo_nn_p90"], abs=1e-5)
    with pytest.raises(ConfigError, match="n_assets must be 1"):
        LLMTraderPool(Config.model_validate({"fundamentals": {"n_assets": 2},
                                             "population": big.population.model_dump()}),
                      Streams(1), [1], None)


# --- whole runs ----------------------------------------------------------------------------


def _same(a, b, name):
    return filecmp.cmp(a / f"{name}.parquet", b / f"{name}.parquet", shallow=False)


@pytest.mark.slow(6)  # CPU s on 2 cores: out of the quick subset
def test_mock_run_at_25_percent_and_replay_from_cache(tmp_path):
    config = cfg()
    cache = tmp_path / "cache.sqlite"
    first = run_to_dir(config, 7, tmp_path / "first", cache=cache)
    m = json.loads((first / "manifest.json").read_text())
    agents = pl.read_parquet(first / "agents.parquet").filter(pl.col("is_llm"))
    dec = pl.read_parquet(first / "llm_decisions.parquet")
    assert agents.height == 25 and m["final_conservation_ok"]
    per_slot = dec.group_by("slot").len()["len"]
    assert per_slot.min() >= 27 and per_slot.max() <= 28
    assert dec.height == agents["n_decisions"].sum()
    assert 0.92 <= dec["valid"].mean() <= 0.98
    assert m["llm_usage"]["calls"] == dec.height and m["prompt_version"] == "v1"
    assert "mock-trader" in m["price_assumptions"]

    replay = run_to_dir(config, 7, tmp_path / "replay", cache=cache)
    r = json.loads((replay / "manifest.json").read_text())["llm_usage"]
    assert (r["calls"], r["cached_hits"], r["usd_spent"]) == (0, 1.0, 0.0)
    for name in PARQUETS:  # llm_decisions too: byte for byte
        assert _same(first, replay, name), name
    again = run_to_dir(config, 7, tmp_path / "again", cache=cache)
    assert all(_same(replay, again, name) for name in PARQUETS)


@pytest.mark.slow(4)  # CPU s on 2 cores: out of the quick subset
def test_live_run_against_a_shuffling_server_replays_exactly(tmp_path, monkeypatch):
    config = Config.model_validate({
        "simulation": {"ticks": 150},
        "population": {"llm_share": 0.25, "llm": {
            "provider_mix": {"openai": 1.0}, "models": {"openai": "gpt-5.4-nano"},
            "usd_cap": 1.0, "providers": {"openai": {"max_retries": 6, "backoff_s": 0.01}}}},
    })
    runs = {}
    for name, kw in (("calm", {}), ("wild", {"jitter_s": 0.01,
                                             "first_attempt_fail_rate": 0.2, "seed": 5})):
        with FakeAPI(**kw) as api:
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test-local")
            monkeypatch.setenv("OPENAI_BASE_URL", f"{api.url}/v1")
            runs[name] = run_to_dir(config, 3, tmp_path / name, cache=tmp_path / f"{name}.db")
            if name == "wild":
                assert len(api.requests) > pl.read_parquet(
                    runs[name] / "llm_decisions.parquet").height
    for name in PARQUETS[:4]:
        assert _same(runs["calm"], runs["wild"], name), name
    for path in tmp_path.rglob("*"):  # run dirs and caches: the key is nowhere
        assert not path.is_file() or b"sk-test-local" not in path.read_bytes(), path
    calm = pl.read_parquet(runs["calm"] / "llm_decisions.parquet")
    wild = pl.read_parquet(runs["wild"] / "llm_decisions.parquet")
    assert calm.drop("latency_s").equals(wild.drop("latency_s"))
    assert wild["usd"].sum() > 0 and wild["valid"].all()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: no calls
    replay = run_to_dir(config, 3, tmp_path / "replay", cache=tmp_path / "wild.db")
    usage = json.loads((replay / "manifest.json").read_text())["llm_usage"]
    assert (usage["calls"], usage["cached_hits"], usage["usd_spent"]) == (0, 1.0, 0.0)
    assert usage["usd"] == pytest.approx(wild["usd"].sum())
    for name in PARQUETS:
        assert _same(runs["wild"], replay, name), name


def test_outputs_do_not_depend_on_concurrency_or_latency(tmp_path):
    def run(name, concurrency, latency):
        config = Config.model_validate({
            "simulation": {"ticks": 200},
            "population": {"llm_share": 0.5, "llm": {
                "max_concurrency": concurrency, "prompt_set": "diverse", "memory": 3,
                "channel": True, "providers": {"mock": {"latency_s": latency}}}},
        })
        return run_to_dir(config, 11, tmp_path / name)

    serial, parallel = run("serial", 1, 0.0), run("parallel", 64, 0.004)
    for name in PARQUETS[:4]:
        assert _same(serial, parallel, name), name
    a = pl.read_parquet(serial / "llm_decisions.parquet")
    b = pl.read_parquet(parallel / "llm_decisions.parquet")
    assert a.drop("latency_s").equals(b.drop("latency_s")) and a.height > 300


def test_an_order_the_exchange_cannot_represent_is_an_invalid_decision_live_and_replayed(
        tmp_path):
    """An LLM limit price of 1e308 once raised OverflowError in the exchange, and the cached
    answer crashed every replay; now it is an invalid decision with the exchange's reason."""
    import json as _json

    from market_agents.llm.cache import ResponseCache
    from market_agents.llm.providers.base import Provider
    from market_agents.llm.types import LLMResponse, Usage

    class Absurd(Provider):
        kind, live = "mock", False

        async def complete(self, request):
            return LLMResponse(_json.dumps({
                "action": "buy", "asset": 0, "quantity": 3, "order_type": "limit",
                "limit_price": 1e308, "message": "", "reason": "to the moon"}), Usage(1, 0, 0, 1))

    rows = []
    for provider in (Absurd("mock"), None):  # live, then a replay that must not call
        client = LLMClient({"mock": provider or Absurd("mock")}, load_prices(),
                           cache=ResponseCache(tmp_path / "c"), replay=provider is None)
        p = LLMTraderPool(cfg(), Streams(1), [1], None, client=client)
        assert p.decide(60, {1: view(1)}) == {1: []}
        [row] = p.records()
        rows.append(row)
        p.close()
    assert rows[0] == rows[1]
    assert (rows[0]["valid"], rows[0]["error_class"], rows[0]["action"]) == (
        False, "price_out_of_range", "hold")


def _shapes(body: dict, digest: bytes) -> str:
    """Answers shaped like a tiny model's: valid, an asset the market lacks, too many shares,
    prose around JSON, cut off."""
    good = {"action": "buy", "asset": 0, "quantity": 2, "order_type": "limit",
            "limit_price": 470.123, "message": "", "reason": "cheap"}
    pick = digest[0] % 5
    return [json.dumps(good), json.dumps(good | {"asset": 1}),
            json.dumps(good | {"quantity": 200}), f"Sure! {json.dumps(good)}",
            json.dumps(good)[:40]][pick]


def test_validity_is_counted_once_against_a_llama_like_server(tmp_path, monkeypatch):
    from market_agents.commands.cache import summarize

    config = Config.model_validate({
        "simulation": {"ticks": 200},
        "population": {"llm_share": 0.1, "llm": {
            "provider_mix": {"local": 1.0}, "models": {"local": "gpt-5.4-nano"},
            "usd_cap": 1.0, "providers": {"local": {
                "kind": "openai_compatible", "structured_output": "json_object_schema"}}}},
    })
    with FakeAPI(server="llama_cpp_python", answer=_shapes) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{api.url}/v1")
        run = run_to_dir(config, 5, tmp_path / "run", cache=tmp_path / "cache")
        assert {e["status"] for e in api.requests} == {200}
    m = json.loads((run / "manifest.json").read_text())
    dec = pl.read_parquet(run / "llm_decisions.parquet")
    [group] = summarize(tmp_path / "cache")["groups"]
    valid = int(dec["valid"].sum())
    assert 0 < valid < dec.height
    assert m["llm_usage"]["valid"] == valid == group["valid"] == m["cache_valid"]
    assert m["structured_output"] == {"local": "json_object_schema"}
    assert {s["structured_output"] for s in m["llm_slots"]} == {"json_object_schema"}
    reasons = set(dec.filter(~pl.col("valid"))["error_detail"].to_list())
    assert {"text before the JSON object", "truncated JSON"} <= reasons
    assert {"asset 1: this market lists asset 0 only",
            "quantity: Input should be less than or equal to 100"} <= reasons
    orders = pl.read_parquet(run / "orders.parquet").filter(
        pl.col("is_llm") & (pl.col("price") == 470.123))
    assert orders.height > 0 and set(orders["rounded_price"].to_list()) == {470.12}


def test_a_run_whose_counts_disagree_is_not_written():
    from market_agents.errors import MarketAgentsError
    from market_agents.sim.runner import check_valid_counts

    dec = pl.DataFrame({"valid": [True, False, None]})
    check_valid_counts({"llm_usage": {"valid": 1}, "cache_valid": 1}, dec)
    with pytest.raises(MarketAgentsError, match="counted differently"):
        check_valid_counts({"llm_usage": {"valid": 2}, "cache_valid": 1}, dec)
    with pytest.raises(MarketAgentsError, match="'cache': 0"):
        check_valid_counts({"llm_usage": {"valid": 1}, "cache_valid": 0}, dec)


@pytest.mark.parametrize("usd_cap", [0.005, 0.02])
def test_valid_counts_agree_when_a_shared_cache_holds_answers_this_run_did_not_use(
        tmp_path, usd_cap):
    """Found by `make test-rehearsal`: mini_25 and mini_25_equalusd share the rehearsal cache and
    send the same requests; the capped cell's budget-halted decisions have keys whose answers
    the uncapped cell stored. Those answers were counted as the capped run's, and the run was
    refused ("valid LLM answers counted differently")."""
    def config(cap: float) -> Config:  # the mock answering as a priced model id
        return Config.model_validate({"simulation": {"ticks": 200}, "population": {
            "llm_share": 0.1, "llm": {"models": {"mock": "gpt-5.4-mini"}, "usd_cap": cap}}})

    cache = tmp_path / "cache"
    run_to_dir(config(1.0), 1, tmp_path / "uncapped", cache=cache, progress=False)
    capped = config(usd_cap)
    run = run_to_dir(capped, 1, tmp_path / "capped", cache=cache, progress=False)
    m = json.loads((run / "manifest.json").read_text())
    dec = pl.read_parquet(run / "llm_decisions.parquet")
    assert m["llm_usage"]["budget_halts"] > 0  # the cap bound: some keys went unused
    assert m["llm_usage"]["valid"] == int(dec["valid"].sum()) == m["cache_valid"]

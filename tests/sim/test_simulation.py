"""Whole runs: determinism, slot parity, schedule, rules that must bite, conservation."""

import hashlib
import json

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.agents.base import RunContext
from market_agents.agents.traders.noise import activity_path
from market_agents.config import Config, load_config
from market_agents.llm.client import LLMClient
from market_agents.llm.pricing import load_prices
from market_agents.market.types import AssetView, MarketView
from market_agents.plugins import TRADERS
from market_agents.rng import TRADING_ACTIVITY, Streams
from market_agents.sim.rundir import CHECKLIST_FIELDS, TABLES
from market_agents.sim.runner import run_to_dir
from market_agents.sim.simulation import (
    Run,
    activation_ticks,
    assign_population,
    schedule,
    simulate,
)

CONFIRMATORY = ["fundamentals.jump_prob=1.0", "fundamentals.jump_sigma=4.0",
                "shocks=[{time: 300, kind: fundamental_jump, size: 10.0}, "
                "{time: 450, kind: placebo}]"]


def test_same_config_and_seed_give_identical_files(tmp_path, baseline_path):
    cfg = load_config(baseline_path)
    a = run_to_dir(cfg, 3, tmp_path / "a", progress=False)
    b = run_to_dir(cfg, 3, tmp_path / "b", progress=False)
    for name in TABLES:
        assert (a / f"{name}.parquet").read_bytes() == (b / f"{name}.parquet").read_bytes(), name
    assert (a / "config.yaml").read_text() == (b / "config.yaml").read_text()
    c = run_to_dir(cfg, 4, tmp_path / "c", progress=False)
    assert (a / "ticks.parquet").read_bytes() != (c / "ticks.parquet").read_bytes()
    # A classical run's manifest has the replication checklist's seven fields (§6) too.
    manifest = json.loads((a / "manifest.json").read_text())
    assert set(CHECKLIST_FIELDS) <= set(manifest)
    assert manifest["prompt_version"] is None and manifest["final_conservation_ok"] is True
    zero = LLMClient({}, load_prices()).usage_summary()
    assert manifest["llm_usage"] == zero and manifest["llm_usage"]["usd"] == 0
    table = manifest["price_assumptions"]["price_table"]
    assert table["source"] == "config/prices.yaml" and table["date"] >= "2026-10-27"


# The baseline market, seed 1, pinned. A change meant to leave the market alone (a speed-up,
# a refactor) must leave these digests alone; a change to the market updates them on purpose,
# after `ma validate` on several seed blocks shows the calibration still holds.
# Changed by issue 23 twice: first for traders that hold target positions, market makers with
# an EWMA volatility and fundamentalists' orders that expire at the next news release; then for
# the realism targets it left missed (Ljung-Box, clustering at lag 50): IOC aggressive orders,
# Pareto noise sizes, common trading activity, weaker value demand, makers that pick off stale
# quotes at a release and do not chase a hole in the book, and a fresh mid for the traders due.
BASELINE_SEED_1 = {"ticks": "6e18744b2fd3b51c", "trades": "5b4e85b8ebe98b9b",
                   "orders": "84f3923f7c45a0dd", "agents": "08ad5faf5ddf2042"}


def test_baseline_market_is_unchanged(baseline_path):
    tables = simulate(load_config(baseline_path), 1, progress=False)
    # rounded_price (issue 14) is a column added beside the orders' raw price; the market
    # itself, every earlier column included, is pinned as before.
    tables["orders"] = tables["orders"].drop("rounded_price")
    digests = {name: hashlib.sha256(tables[name].write_csv().encode()).hexdigest()[:16]
               for name in BASELINE_SEED_1}
    assert digests == BASELINE_SEED_1


def test_orders_record_the_rounded_price_beside_the_raw_one(baseline_path):
    cfg = load_config(baseline_path)
    orders = simulate(cfg, 1, progress=False)["orders"].filter(pl.col("price").is_not_null())
    tick = cfg.exchange.tick_size
    # Limits are rounded towards the passive side (issue 25): a buy down, a sell up, a price
    # within float noise of the grid keeping its tick. The classical traders quote on the grid
    # of the default tick, so the baseline digests above did not move.
    x = orders["price"].to_numpy() / tick
    near = np.round(x)
    side = orders["side"].to_numpy()
    ticks = np.where(np.abs(x - near) <= 1e-9, near, np.where(side == 1, np.floor(x), np.ceil(x)))
    assert np.allclose(orders["rounded_price"].to_numpy(), ticks * tick, rtol=0, atol=1e-9)


def test_slot_parity_when_one_slot_changes_type(baseline_path):
    cfg = load_config(baseline_path)
    base = simulate(cfg, 11, progress=False)
    slot = int(base["agents"].filter(pl.col("type") == "noise")["slot"][0])
    changed = load_config(baseline_path, [f"population.slot_types={{{slot}: trend}}"])
    other = simulate(changed, 11, progress=False)
    assert other["agents"]["type"][slot] == "trend"
    for col in ("fundamental", "public_value"):
        assert base["ticks"][col].equals(other["ticks"][col])
    # Every other slot keeps its type and its activation schedule.
    a, b = base["agents"], other["agents"]
    keep = pl.col("slot") != slot
    assert a.filter(keep)["type"].equals(b.filter(keep)["type"])
    assert a["phase"].equals(b["phase"]) and a["n_decisions"].equals(b["n_decisions"])
    # ... and decides when it did: every order of a trader stands at one of its decision
    # ticks (burn-in + phase + k * interval). A decision may send nothing (a trader already at
    # its target position), so the first order's tick is not the first decision's.
    interval, burn_in = cfg.simulation.decision_interval, cfg.simulation.burn_in
    for run in (base, other):
        phase = dict(zip(run["agents"]["slot"], run["agents"]["phase"], strict=True))
        kinds = dict(zip(run["agents"]["slot"], run["agents"]["type"], strict=True))
        orders = run["orders"].filter(pl.col("kind") != "margin_call")
        for tick, who in zip(orders["tick"], orders["slot"], strict=True):
            if kinds[who] != "market_maker":
                assert tick >= burn_in and (tick - burn_in - phase[who]) % interval == 0


@pytest.mark.parametrize("sets", [
    [], ["simulation.decision_interval=1"], ["simulation.decision_interval=7"],
    ["population.n_traders=1000", "simulation.decision_interval=200"],
    ["population.n_traders=400", "simulation.decision_interval=900", "simulation.burn_in=0"],
    ["population.slot_types={7: statarb, 8: leveraged}", "population.llm_share=0.03"]])
def test_schedule_is_every_slot_at_its_activation_ticks(baseline_path, sets):
    cfg = load_config(baseline_path, sets)
    for seed in (1, 2):
        population = assign_population(cfg, Streams(seed))
        want: dict[int, list[int]] = {}
        for slot, kind in enumerate(population.types):  # ascending slot order per tick
            if kind != "market_maker":
                for t in activation_ticks(cfg, population.phases[slot]):
                    want.setdefault(t, []).append(slot)
        got = schedule(cfg, population)
        assert got == want
        assert all(type(t) is int and all(type(s) is int for s in got[t]) for t in got)


def test_only_slots_that_act_get_a_trader_with_its_own_draws(baseline_path):
    # With decision_interval beyond the run (the large populations of protocol §5.4) most
    # slots never decide: they get an account but no trader, and every trader that is built
    # holds the parameters its named stream gives it alone.
    cfg = load_config(baseline_path, ["population.n_traders=1000",
                                      "simulation.decision_interval=1000"])
    run = Run(cfg, 3, progress=False)
    acting = {s for s, kind in enumerate(run.population.types)
              if kind == "market_maker" or activation_ticks(cfg, run.population.phases[s])}
    assert set(run.traders) == acting and len(acting) < 700
    assert len(run.ex.accounts) == 1000
    for slot in sorted(acting)[5:40]:
        kind = run.population.types[slot]
        alone = TRADERS.get(kind, "test").build(slot, Streams(3).agent(slot),
                                                RunContext(cfg, Streams(3)))
        # the noise traders share the market's trading activity, drawn once from its stream
        built = {k: v for k, v in vars(run.traders[slot]).items() if k not in ("rng", "activity")}
        assert built == {k: v for k, v in vars(alone).items() if k not in ("rng", "activity")}
        if kind == "noise":
            assert run.traders[slot].activity == activity_path(
                cfg.simulation.ticks, Streams(3).generator(TRADING_ACTIVITY)).tolist()
        assert run.traders[slot].rng.random() == alone.rng.random()


def test_every_trader_decides_27_or_28_times(baseline_path):
    agents = simulate(load_config(baseline_path), 2, progress=False)["agents"]
    takers = agents.filter(pl.col("type") != "market_maker")
    assert set(takers["n_decisions"].to_list()) <= {27, 28}


def test_traders_see_public_value_only():
    fields = set(AssetView._fields) | set(MarketView._fields)
    assert "public_value" in fields
    assert not fields & {"fundamental", "value", "true_value", "v"}


def test_public_value_lags_value_and_shocks_are_announced(baseline_path):
    cfg = load_config(baseline_path, CONFIRMATORY)
    t = simulate(cfg, 5, progress=False)["ticks"]
    v, pub = t["fundamental"].to_numpy(), t["public_value"].to_numpy()
    assert np.all(pub[::10] == v[::10])  # news ticks reveal V
    assert not np.all(pub == v)  # ... and between them V^pub lags
    assert 0.003 < np.std(pub / v - 1) < 0.012
    calm = load_config(baseline_path, CONFIRMATORY[:2])  # same path, no shocks
    w = simulate(calm, 5, progress=False)["ticks"]["fundamental"].to_numpy()
    assert np.allclose(v[300:] - w[300:], 10.0) and np.allclose(v[:300], w[:300])
    assert pub[301] == v[301] or pub[300] == v[300]


def test_placebo_moves_nothing(baseline_path):
    with_placebo = load_config(baseline_path, ["shocks=[{time: 455, kind: placebo}]"])
    a = simulate(with_placebo, 6, progress=False)
    b = simulate(load_config(baseline_path), 6, progress=False)
    assert a["ticks"].equals(b["ticks"]) and a["trades"].equals(b["trades"])


@pytest.mark.slow(5)  # CPU s on 2 cores: out of the quick subset
def test_halts_occur_in_some_seeds_with_a_five_percent_breaker(baseline_path):
    cfg = load_config(baseline_path, [*CONFIRMATORY, "exchange.halt_threshold=0.05"])
    halted = [s for s in range(1, 21) if simulate(cfg, s, progress=False)["summary"]["halts"]]
    assert halted, "no halt in 20 seeds"
    off = load_config(baseline_path, CONFIRMATORY)
    assert not simulate(off, halted[0], progress=False)["summary"]["halts"]


def test_position_limit_rejects_occur(baseline_path):
    cfg = load_config(baseline_path, ["exchange.position_limit=300"])
    rejects = [simulate(cfg, s, progress=False)["orders"].filter(
        pl.col("reason") == "position_limit").height for s in range(1, 6)]
    assert sum(rejects) > 0


small_configs = st.fixed_dictionaries({
    "simulation": st.fixed_dictionaries({
        "ticks": st.integers(60, 160), "burn_in": st.integers(0, 20),
        "decision_interval": st.integers(1, 10)}),
    "fundamentals": st.one_of(
        st.fixed_dictionaries({"jump_prob": st.floats(0, 1), "sigma": st.floats(0, 2)}),
        st.just({"n_assets": 2, "factor_loading": [0.7, 0.7]})),
    "exchange": st.fixed_dictionaries({
        "mechanism": st.sampled_from(["book", "call_auction"]),
        "halt_threshold": st.one_of(st.none(), st.floats(0.002, 0.02)),
        "position_limit": st.one_of(st.none(), st.integers(5, 300))}),
    "population": st.fixed_dictionaries({
        "n_traders": st.integers(8, 30), "n_market_makers": st.integers(1, 3),
        "mix": st.sampled_from([
            {"fundamentalist": 0.3, "trend": 0.2, "noise": 0.3, "leveraged": 0.2},
            {"fundamentalist": 0.0, "trend": 0.5, "noise": 0.0, "leveraged": 0.5},
            {"fundamentalist": 0.4, "trend": 0.2, "noise": 0.4}])}),
})


@settings(max_examples=25, deadline=None)
@given(small_configs, st.integers(0, 2**32 - 1))
def test_conservation_holds_in_every_run(data, seed):
    if data["fundamentals"].get("n_assets") == 2:
        data["population"]["mix"] = {"fundamentalist": 0.3, "trend": 0.0, "noise": 0.3,
                                      "statarb": 0.4}
    cfg = Config.model_validate(data)
    out = simulate(cfg, seed, progress=False)
    assert out["summary"]["final_conservation_ok"]
    ticks = out["ticks"]
    if cfg.exchange.mechanism == "book":
        both = ticks.drop_nulls(["best_bid", "best_ask"])
        assert (both["best_bid"] < both["best_ask"]).all()
    unlevered = out["agents"].filter(pl.col("type") != "leveraged")
    assert (unlevered["shares"] >= 0).all() and (unlevered["cash"] >= 0).all()


def test_table_schemas_follow_the_exchange_log_rows():
    # frame() turns the exchange's row tuples into tables by position.
    from market_agents.market.exchange import ORDER_COLUMNS, TRADE_COLUMNS
    from market_agents.sim.rundir import SCHEMAS
    from market_agents.sim.simulation import frame

    assert tuple(SCHEMAS["orders"]) == ORDER_COLUMNS
    assert tuple(SCHEMAS["trades"]) == TRADE_COLUMNS
    assert frame([], SCHEMAS["trades"]).schema == pl.Schema(SCHEMAS["trades"])
    with pytest.raises(ValueError, match="shorter|longer"):
        frame([(1, 2)], {"a": pl.Int32, "b": pl.Int32, "c": pl.Int32})


@pytest.mark.parametrize(("seed", "size"), [(8, -15.0), (8, -21.0), (6, 21.0), (1, -21.0)])
def test_a_large_release_leaves_no_stale_price_behind(baseline_path, seed, size):
    """A release of 20-30 % of V at a low price level (V ≈ 75, where the traders' orders are
    many shares deep) reaches the price and stays there: the makers pick off the orders
    standing at the old price and do not follow a mid that one order's hole in the book made.
    Issue 23: without both, seed 8's -15 release left the mid more than 5 % from V^pub for 48
    of the next 97 ticks (a -18 % release on the confirmatory base, 80 ticks)."""
    cfg = load_config(baseline_path, [
        f"shocks=[{{time: 300, kind: fundamental_jump, size: {size}}}]",
        "fundamentals.jump_prob=1.0", "fundamentals.v0=115.0"])
    ticks = simulate(cfg, seed, progress=False)["ticks"]
    gap = (ticks["mid_price"] / ticks["public_value"] - 1).abs().to_numpy()
    assert gap[300:303].min() < 0.05  # reached within the release's first ticks
    assert (gap[303:400] > 0.05).sum() <= 2  # and held: a one-tick hole at most

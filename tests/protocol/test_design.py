"""Designs as data: the protocol's designs load, budgets reproduce §4/§5.2, bad input is named."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from market_agents.cli import main as ma
from market_agents.errors import ConfigError
from market_agents.layout import run_dir
from market_agents.protocol.design import load_design
from market_agents.protocol.planning import (
    RunPlan,
    load_checked,
    plan_cell,
    plan_design,
    run_config,
    run_plans,
    tier_totals,
)
from market_agents.protocol.tiers import NO_TIER
from tests.support import ROOT

DESIGNS = ROOT / "config" / "designs"
CONFIRMATORY = DESIGNS / "confirmatory.yaml"


@pytest.fixture(scope="module")
def confirmatory():
    return load_design(CONFIRMATORY)


@pytest.fixture(scope="module")
def plans(confirmatory):
    return {p.cell: p for p in plan_design(confirmatory, 760, 230)}


@pytest.mark.parametrize("name", ["exploratory", "sigma", "pilot_openai", "confirmatory",
                                  "repilot_openai", "ftt"])
def test_every_design_loads(name):
    design = load_design(DESIGNS / f"{name}.yaml")
    assert design.name == name and design.runs()


def test_confirmatory_cells_tiers_and_seeds(confirmatory):
    tiers = confirmatory.tiers
    assert tiers["T1"] == ["share_0", "share_25", "share_50"]
    assert set(tiers["T6"]) == {"k2_25", "library_1000", "auction_25", "interval_10"}
    assert confirmatory.cell("share_0").seeds == list(range(101, 131))
    assert confirmatory.cell("share_25").seeds == list(range(101, 111))
    assert confirmatory.cell("poslimit_25").seeds == [101, 102]
    assert confirmatory.budget.cap_usd == 40.0
    base = confirmatory.cell_config("share_25")
    assert base.fundamentals.jump_prob == 1.0
    assert [(s.time, s.kind) for s in base.shocks] == [(300, "fundamental_jump"), (450, "placebo")]
    assert confirmatory.is_live("share_25") and not confirmatory.is_live("share_0")
    assert not confirmatory.is_live("auction_25")


def test_library_cell_replays_the_frozen_library(confirmatory):
    cfg = confirmatory.cell_config("library_1000")
    llm = cfg.population.llm
    assert (cfg.population.n_traders, cfg.population.n_llm) == (1000, 250)
    assert cfg.simulation.decision_interval == 200  # activity scaled by 100/N (§5.4)
    assert llm.frozen_library == "results/library/nano_v1.npz" and llm.routes() == ["library"]
    assert not confirmatory.is_live("library_1000")  # replay: no paid call
    plan = plan_cell(confirmatory, "library_1000")
    assert (plan.live, plan.run_decisions, plan.run_usd) == (False, 0, 0.0)
    assert ("library_1000", 101) in confirmatory.runs()
    # A rehearsal replays a library built from rehearsed (mock) T1 answers, never the live one.
    rehearsal = confirmatory.cell_config("library_1000", mock=True).population.llm
    assert rehearsal.frozen_library == "results/rehearsal/library/nano_v1.npz"
    assert rehearsal.routes() == ["library"]


def test_unavailable_cell_is_declared_but_never_runs(tmp_path, capsys):
    cells = [{"name": "share_5", "tier": "T1", "seeds": [1], "unavailable": "needs a thing",
              "overrides": {"population.llm_share": 0.05}}]
    path = write_design(tmp_path, cells=cells)
    design = load_design(path)
    assert "share_5" in design.cells and design.runs() == []
    with pytest.raises(ConfigError, match="share_5.*unavailable: needs a thing"):
        design.cell_config("share_5")
    assert ma(["cell", str(path), "share_5", "--seed", "1"]) == 2
    assert "needs a thing" in capsys.readouterr().err


# Protocol §5.2 rows: cell -> (live decisions, planning USD)
PROTOCOL_ROWS = {
    "share_25": (6750, 3.38), "share_50": (13500, 6.75), "diverse_25": (4050, 2.03),
    "mix_25": (4050, 4.25), "mini_25": (2700, 4.32), "memory_25": (2025, 1.01),
    "channel_25": (2025, 1.01), "leverage_25": (2025, 1.01), "breaker_25": (2025, 1.01),
    "poslimit_25": (1350, 0.68), "mini_25_equalusd": (630, 1.01), "k2_25": (1350, 0.68),
}


@pytest.mark.parametrize("cell", sorted(PROTOCOL_ROWS))
def test_budget_reproduces_protocol_rows(plans, cell):
    decisions, usd = PROTOCOL_ROWS[cell]
    assert plans[cell].decisions == decisions
    assert plans[cell].usd == pytest.approx(usd, abs=0.006)


def test_budget_grouped_rows_and_totals(plans, confirmatory):
    assert sum(plans[c].decisions for c in ("share_1", "share_5", "share_10")) == 1728
    assert sum(plans[c].decisions for c in ("share_75", "share_100")) == 9180
    assert plans["share_100"].n_llm == 95  # market makers stay classical
    assert plans["mix_25"].model_decisions() == {"gpt-5.4-nano": 2025, "gpt-5.4-mini": 2025}
    assert plans["share_25"].decisions_per_agent == 27
    for cell in ("share_0", "leverage_0", "auction_25", "interval_10", "library_1000"):
        assert plans[cell].decisions == 0
    # The protocol's rows sum to 53,388 decisions and 32.59 USD (its stated total, "≈ 66,000,
    # ≈ 33.3", does not match its own rows); the price table gives 0.00044 per nano decision.
    assert sum(p.decisions for p in plans.values()) == 53388
    assert sum(p.usd for p in plans.values()) == pytest.approx(32.58, abs=0.01)
    assert plans["share_25"].table_rate == {"gpt-5.4-nano": pytest.approx(0.0004395)}
    totals = tier_totals(list(plans.values()))
    for tier, budget in confirmatory.budget.tiers.items():
        assert round(totals[tier]["usd"], 2) <= budget


def test_budget_reproduces_pilot_table():
    plans = plan_design(load_design(DESIGNS / "pilot_openai.yaml"))
    assert [p.decisions for p in plans] == [0, 405, 2025, 4050]
    assert sum(p.decisions for p in plans) == 6480
    assert sum(p.usd for p in plans) == pytest.approx(3.24)
    assert sum(p.table_usd for p in plans) == pytest.approx(2.85, abs=0.005)


def test_run_plans_rows_for_the_gate(confirmatory):
    rows = run_plans(confirmatory, cells=["share_25"])
    assert len(rows) == 10
    assert rows[0] == RunPlan("T1", "share_25", 101, 675, pytest.approx(0.3375))
    assert not rows[0].done


def test_cells_without_a_tier_take_the_one_no_tier_label():
    pilot = load_design(DESIGNS / "pilot_openai.yaml")
    assert {r.tier for r in run_plans(pilot)} == {NO_TIER}
    assert list(pilot.tiers) == [NO_TIER]
    assert set(tier_totals(plan_design(pilot))) == {NO_TIER}


def test_ma_budget_cli(capsys):
    assert ma(["budget", str(CONFIRMATORY), "--tokens-in", "760", "--tokens-out", "230",
               "--json", "--tier", "T3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"]["decisions"] == 10908 and out["caps_use"] == "planning rate"
    assert ma(["budget", str(CONFIRMATORY)]) == 0
    text = capsys.readouterr().out
    assert "share_25" in text and "53,388" in text
    assert ma(["budget", str(CONFIRMATORY), "--tier", "T9"]) == 2


def test_ma_budget_gives_each_contrasts_power_at_its_tiers_holm_level(capsys):
    """The power the study will have, before the pilot: each tier's family (contrasts x the
    design's primary outcomes) and the paired t test's MDE in units of sigma_d."""
    from market_agents.analysis.stats import mde

    assert ma(["budget", str(CONFIRMATORY), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["families"]["T1"]["size"] == 4  # share_25, share_50 x volatility, mispricing
    # five mechanisms and E5 once, x 2; leverage_0 (E5's free control) is no hypothesis
    assert out["families"]["T4"]["size"] == 12
    t4 = out["families"]["T4"]["contrasts"]
    assert "leverage_0" not in t4
    assert [c for c in t4 if c.startswith("E5")] == [
        "E5 (leverage_25 - share_25) - (leverage_0 - share_0)"]
    power = out["power"]
    assert power["share_25"]["mde_sigma"] == pytest.approx(mde(1.0, 10, family_size=4))
    assert power["share_75"]["paired_seeds"] == 2
    assert power["share_75"]["mde_sigma"] == pytest.approx(mde(1.0, 2, family_size=10))
    assert power["share_75"]["mde_sigma"] > 100  # two seeds detect almost nothing under Holm
    assert power["auction_25"]["paired_seeds"] == 10  # on the pool's seeds: share_25 pairs it
    assert power["E5 (leverage_25 - share_25) - (leverage_0 - share_0)"]["paired_seeds"] == 3
    assert ma(["budget", str(CONFIRMATORY), "--tier", "T3"]) == 0
    text = capsys.readouterr().out
    assert "T3: 5 contrasts x 2 primary outcomes (volatility, mispricing) = 10 tests" in text
    assert "T1:" not in text


def test_ma_budget_with_the_pilot_shows_both_mdes_as_the_freeze_does(tmp_path, capsys):
    """With --pilot, each live cell's MDE at the σ_d bound (the freeze's) and at σ̂_d, and the
    underpowered cells, as freeze.build computes them; n as the paper pairs it (the pilot
    seeds count outside the confirmatory design)."""
    from market_agents.protocol.facts import design_facts
    from market_agents.protocol.freeze import build
    from market_agents.protocol.planning import load_checked

    pilot = {"pass": True, "sigma_d": {
        "share_5": {"n_pairs": 2, "volatility": 1.3e-5, "mispricing": 1e-4},
        "share_25": {"n_pairs": 2, "volatility": 1.4e-5, "mispricing": 1e-4},
        "share_50": {"n_pairs": 2, "volatility": 3.1e-4, "mispricing": 2e-4}}}
    path = tmp_path / "pilot.json"
    path.write_text(json.dumps(pilot))
    assert ma(["budget", str(CONFIRMATORY), "--pilot", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    frozen = build(design_facts(load_checked(CONFIRMATORY)), pilot,
                   {"models": {m: {} for m in ("gpt-5.4-nano", "gpt-5.4-mini")}}, {})
    assert out["mde"] == frozen["mde"] and out["underpowered"] == frozen["underpowered"]
    row = out["mde"]["share_25"]
    assert row["sigma"]["volatility"]["from"] == "pooled over share_5, share_25, share_50"
    assert row["mde_point"]["volatility"] < row["mde"]["volatility"]
    # share_25 x volatility is powered on its own near-equal differences, not on the bound
    assert any(u.startswith("share_25 × volatility") for u in out["underpowered"])
    assert ma(["budget", str(CONFIRMATORY), "--pilot", str(path), "--tier", "T1"]) == 0
    text = capsys.readouterr().out
    assert "share_25           volatility    10 pairs" in text and "UNDERPOWERED" in text
    assert "point" in text and "memory_25" not in text.split("MDE per cell")[1]
    assert ma(["budget", str(DESIGNS / "exploratory.yaml"), "--json"]) == 0
    power = json.loads(capsys.readouterr().out)["power"]
    assert power["share_25"]["paired_seeds"] == 3  # seeds 1-3: the paper estimates on 3
    path.write_text("{}")
    assert ma(["budget", str(CONFIRMATORY), "--pilot", str(path)]) == 2
    assert "--pilot" in capsys.readouterr().err


def test_contrasts_isolate_what_they_test(confirmatory):
    """Each mechanism cell against the cell it differs from by its mechanism alone, as the
    design declares it (against:, interactions:); the design's E5 counted once in T4."""
    from market_agents.analysis.estimands import tier_contrasts
    from market_agents.protocol.tiers import label

    listed = {c.label: c for c in tier_contrasts(
        list(confirmatory.cells), lambda c: label(confirmatory.cell(c).tier),
        confirmatory.against, confirmatory.interaction_contrasts)}
    assert listed["auction_25"].control == {"share_25": 1}
    assert listed["interval_10"].control == {"share_25": 1}
    assert listed["memory_25"].control == {"share_0": 1}
    assert "leverage_0" not in listed
    e5 = listed["E5 (leverage_25 - share_25) - (leverage_0 - share_0)"]
    assert (e5.family, e5.treated, e5.control) == (
        "T4", {"leverage_25": 1, "share_25": -1}, {"leverage_0": 1, "share_0": -1})


@pytest.mark.parametrize("edit, message", [
    ({"against": "nosuch"}, r"cell 'share_25': against 'nosuch': name another cell"),
    ({"against": "share_25"}, r"cell 'share_25': against 'share_25': name another cell"),
])
def test_a_contrast_naming_no_cell_is_refused(tmp_path, edit, message):
    import yaml

    data = yaml.safe_load((DESIGNS / "confirmatory.yaml").read_text())
    data["base"] = str(DESIGNS.parent / "baseline.yaml")
    data["prices"] = str(DESIGNS.parent / "prices.yaml")
    next(c for c in data["cells"] if c["name"] == "share_25").update(edit)
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=message):
        load_design(path)
    data["interactions"]["E5"]["control"]["nosuch"] = 1
    next(c for c in data["cells"] if c["name"] == "share_25").pop("against")
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"interactions.E5: 'nosuch' is not a cell"):
        load_design(path)


def test_mock_rehearsal_maps_live_routes_to_the_mock(confirmatory):
    live = confirmatory.cell_config("mix_25")
    mock = confirmatory.cell_config("mix_25", mock=True)
    assert mock.population.llm.kind("openai") == "mock"
    assert mock.population.llm.models == live.population.llm.models
    assert mock.population.llm.provider_mix == live.population.llm.provider_mix
    assert run_dir("confirmatory", "mix_25", 101, mock=True) == Path(
        "results/rehearsal/confirmatory/mix_25/seed0101")
    assert run_dir("confirmatory", "mix_25", 101) == Path(
        "results/runs/confirmatory/mix_25/seed0101")


def test_anthropic_dry_run_cells_use_the_mock():
    design = load_design(DESIGNS / "exploratory.yaml")
    cfg = design.cell_config("haiku_25")
    assert cfg.population.llm.provider_mix == {"mock": 1.0}
    assert cfg.population.llm.models == {"mock": "claude-haiku-5-5"}
    assert cfg.treatment["provider"] == "anthropic-mock"
    assert not any(design.is_live(c) for c in design.cells)


# --- bad input ----------------------------------------------------------------------------------


def write_design(tmp_path: Path, **changes) -> Path:
    data = {
        "base": str(DESIGNS.parent / "baseline.yaml"),
        "prices": str(DESIGNS.parent / "prices.yaml"),
        "overrides": {"population.llm.provider_mix": {"openai": 1.0},
                      "population.llm.models": {"openai": "gpt-5.4-nano"},
                      "population.llm.usd_cap": 2.0},
        "planning": {"usd_per_decision": {"gpt-5.4-nano": 0.0005}},
        "budget": {"cap_usd": 40.0, "tiers": {"T1": 1.0}},
        "cells": [{"name": "share_0", "tier": "T1", "seeds": "1-2",
                   "overrides": {"population.llm_share": 0.0}},
                  {"name": "share_5", "tier": "T1", "seeds": [1, 2],
                   "overrides": {"population.llm_share": 0.05}}],
    }
    data.update(changes)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_valid_small_design(tmp_path):
    design = load_design(write_design(tmp_path))
    assert design.runs() == [("share_0", 1), ("share_0", 2), ("share_5", 1), ("share_5", 2)]


def test_unknown_override_key(tmp_path):
    path = write_design(tmp_path, cells=[
        {"name": "share_5", "tier": "T1", "seeds": [1],
         "overrides": {"population.llm_shar": 0.05}}])
    with pytest.raises(ConfigError, match=r"bad.yaml: cell 'share_5'.*llm_shar"):
        load_design(path)


def test_duplicated_cell(tmp_path):
    cell = {"name": "share_5", "tier": "T1", "seeds": [1]}
    with pytest.raises(ConfigError, match=r"bad.yaml: cell 'share_5': duplicated cell name"):
        load_design(write_design(tmp_path, cells=[cell, cell]))


def test_empty_seed_list(tmp_path):
    with pytest.raises(ConfigError, match=r"bad.yaml: cell 'share_5': empty seed list"):
        load_design(write_design(tmp_path, cells=[{"name": "share_5", "tier": "T1", "seeds": []}]))


def test_tier_budget_too_small(tmp_path):
    path = write_design(tmp_path, budget={"cap_usd": 40.0, "tiers": {"T1": 0.1}})
    load_design(path)  # a design is data: loading it checks no budget
    with pytest.raises(ConfigError, match=r"bad.yaml: budget.tiers.T1: 0.10 USD does not cover"):
        load_checked(path)


def test_tier_budgets_exceed_cap(tmp_path):
    path = write_design(tmp_path, budget={"cap_usd": 5.0, "tiers": {"T1": 4.0},
                                          "reserved_usd": {"pilot": 3.24}})
    load_design(path)
    with pytest.raises(ConfigError, match=r"bad.yaml: budget does not add up.*exceed cap_usd 5.00"):
        load_checked(path)


def test_cell_tier_without_budget(tmp_path):
    path = write_design(tmp_path, cells=[{"name": "share_5", "tier": "T7", "seeds": [1]}])
    with pytest.raises(ConfigError, match=r"cell 'share_5': tier 'T7' has no budget"):
        load_design(path)


def test_live_cell_without_price(tmp_path):
    path = write_design(tmp_path, cells=[
        {"name": "share_5", "tier": "T1", "seeds": [1],
         "overrides": {"population.llm_share": 0.05,
                       "population.llm.models": {"openai": "gpt-9-unpriced"}}}])
    load_design(path)  # prices are the planning step's to check
    with pytest.raises(ConfigError, match=r"cell 'share_5': live model 'gpt-9-unpriced'.*no price"):
        load_checked(path)


def test_live_cell_without_planning_rate(tmp_path):
    path = write_design(tmp_path, planning={"usd_per_decision": {}})
    with pytest.raises(ConfigError, match=r"cell 'share_5'.*no planning price"):
        load_checked(path)


def test_bad_seed_string_and_unknown_design_key(tmp_path):
    with pytest.raises(ConfigError, match=r"cell 'share_5': seeds 'one-two'"):
        load_design(write_design(tmp_path, cells=[{"name": "share_5", "tier": "T1",
                                                   "seeds": "one-two"}]))
    with pytest.raises(ConfigError, match=r"bad.yaml: celss: Extra inputs"):
        load_design(write_design(tmp_path, celss=[]))


# issue 11: seeds are bounded before a range is expanded (a MemoryError on main), and numbers
# anywhere in a design (overrides, treatment labels, planning, budgets) are finite.
@pytest.mark.parametrize(("seeds", "message"), [
    ("0-999999999999", r"seeds '0-999999999999': expected an upward range within 0\.\.4294967295"),
    ("1-100000", r"seeds '1-100000': more than 10,000 seeds"),
    ("5-1", r"seeds '5-1': expected an upward range"),
    ([2**32], r"seeds must be in 0\.\.4294967295"),
    ([2**70], r"seeds: 0: integer 1180591620717411303424 does not fit in 64 bits"),
])
def test_seed_lists_are_bounded(tmp_path, seeds, message):
    path = write_design(tmp_path, cells=[{"name": "share_5", "tier": "T1", "seeds": seeds}])
    with pytest.raises(ConfigError, match=r"bad\.yaml: .*" + message):
        load_design(path)


@pytest.mark.parametrize(("changes", "message"), [
    ({"cells": [{"name": "share_5", "tier": "T1", "seeds": [1],
                 "overrides": {"fundamentals.sigma": float("nan")}}]},
     r"cells\.\[share_5\]\.overrides: fundamentals\.sigma: nan is not a finite number"),
    ({"cells": [{"name": "share_5", "tier": "T1", "seeds": [1],
                 "treatment": {"x": float("nan")}}]},
     r"cells\.\[share_5\]\.treatment\.x: Input should be a finite number"),
    ({"planning": {"usd_per_decision": {"gpt-5.4-nano": float("inf")}}},
     r"planning\.usd_per_decision\.gpt-5\.4-nano: Input should be a finite number"),
    ({"planning": {"usd_per_decision": {"gpt-5.4-nano": -0.0005}}},
     r"planning\.usd_per_decision\.gpt-5\.4-nano: Input should be greater than or equal to 0"),
    ({"budget": {"cap_usd": 40.0, "tiers": {"T1": float("nan")}}},
     r"budget\.tiers\.T1: Input should be a finite number"),
])
def test_numbers_in_a_design_are_finite(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=r"bad\.yaml: " + message):
        load_design(write_design(tmp_path, **changes))


@pytest.mark.slow(4)
def test_ma_budget_shows_measured_tokens_beside_the_planning_profile(tmp_path, capsys):
    from market_agents.config import Config
    from market_agents.sim.runner import run_to_dir

    config = Config.model_validate({"simulation": {"ticks": 120},
                                    "population": {"llm_share": 0.05}})
    run = run_to_dir(config, 1, tmp_path / "run", cache=tmp_path / "cache", progress=False)
    assert ma(["budget", str(CONFIRMATORY), "--tier", "T3", "--json", "--measured",
               str(tmp_path / "cache"), "--measured", str(run)]) == 0
    out = json.loads(capsys.readouterr().out)
    dec = pl.read_parquet(run / "llm_decisions.parquet").filter(pl.col("valid").is_not_null())
    from_cache, from_run = out["measured_profile"]
    assert from_cache | {"source": ""} == from_run | {"source": ""}
    assert from_run["decisions"] == dec.height and from_run["prompt_version"] == "v1"
    assert from_run["tokens_in"] == pytest.approx(dec["tokens_in"].mean(), abs=0.05)
    assert (out["tokens_in"], out["tokens_out"]) == (760, 230)  # planning stays the protocol's
    assert ma(["budget", str(CONFIRMATORY), "--tier", "T3", "--measured", str(run)]) == 0
    text = capsys.readouterr().out
    assert "planning profile 760 in / 230 out" in text and "mock-trader" in text
    assert ma(["budget", str(CONFIRMATORY), "--measured", str(tmp_path)]) == 2
    assert "--measured" in capsys.readouterr().err


@pytest.mark.slow(23)
def test_mix_25_rehearsed_over_seeds_101_to_106_splits_its_slots_evenly(tmp_path):
    """§5.2 note ii: half of the LLM slots on each model in every run (25 slots: 13 + 12, the odd
    one alternating with the seed), so seeds 101-106 plan 2,025 + 2,025 decisions."""
    import polars as pl

    done = ma(["design", str(CONFIRMATORY), "--cells", "mix_25", "--mock", "--workers", "2",
               "--quiet", "--results", str(tmp_path)])
    assert done == 0
    slots: dict[str, int] = {}
    for seed in range(101, 107):
        path = run_dir("confirmatory", "mix_25", seed, mock=True, root=tmp_path)
        models = [s["model"] for s in json.loads((path / "manifest.json").read_text())
                  ["llm_slots"]]
        nano, mini = models.count("gpt-5.4-nano"), models.count("gpt-5.4-mini")
        assert nano + mini == 25 and abs(nano - mini) == 1, (seed, nano, mini)
        decided = pl.read_parquet(path / "llm_decisions.parquet").group_by("model").agg(
            pl.col("slot").n_unique())
        assert dict(decided.iter_rows()) == {"gpt-5.4-nano": nano, "gpt-5.4-mini": mini}
        for m in models:
            slots[m] = slots.get(m, 0) + 1
    assert slots == {"gpt-5.4-nano": 75, "gpt-5.4-mini": 75}  # x 27 decisions = 2,025 each


def test_t5_usd_cap_before_the_freeze_is_share_25s_planned_spend(tmp_path, plans):
    confirmatory = load_design(CONFIRMATORY, results=tmp_path)  # no freeze.json there
    cap = run_config(confirmatory, "mini_25_equalusd").population.llm.usd_cap
    assert cap == plans["share_25"].run_usd == pytest.approx(675 * 0.0005)
    assert "usd_cap" not in json.dumps(confirmatory.cell("mini_25_equalusd").overrides)
    # The design holds no cap of its own: its config is built with the one it is given.
    given = confirmatory.cell_config("mini_25_equalusd", usd_cap=0.25).population.llm.usd_cap
    assert given == 0.25
    with pytest.raises(ValueError, match="usd_cap is given for, and only for, an equal-USD"):
        confirmatory.cell_config("mini_25_equalusd")
    with pytest.raises(ValueError, match="usd_cap is given for, and only for, an equal-USD"):
        confirmatory.cell_config("share_25", usd_cap=0.25)


@pytest.mark.parametrize(("declared", "message"), [
    (["volume"], r"primary_outcomes: 'volume' is not an outcome with a pilot σ̂_d"),
    ([], r"primary_outcomes: empty"),
    ({"T1": ["volatility"], "T9": ["rad"]}, r"primary_outcomes.T9: not a tier of the design"),
    ({"T1": ["n_halts"]}, r"primary_outcomes.T1: 'n_halts' is not an outcome"),
])
def test_primary_outcomes_are_checked_naming_the_key(tmp_path, declared, message):
    with pytest.raises(ConfigError, match=message):
        load_design(write_design(tmp_path, primary_outcomes=declared))


def test_a_tier_takes_its_declared_primary_outcomes_else_the_default(tmp_path):
    from market_agents.analysis.stats import DEFAULT_PRIMARY

    design = load_design(write_design(tmp_path, primary_outcomes={"default": ["rad"]}))
    assert design.primary("T1") == ("rad",)
    assert load_design(write_design(tmp_path)).primary("T1") == DEFAULT_PRIMARY
    assert load_design(CONFIRMATORY).primary("T4") == ("volatility", "mispricing")

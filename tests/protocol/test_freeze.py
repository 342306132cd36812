"""Freeze: build, verify, refuse after a frozen file or the confirmatory config changes."""

import shutil
from pathlib import Path

import pytest

import market_agents
from market_agents.protocol.freeze import FROZEN_FILES, FreezeError, build, load, mde, verify

PKG = Path(market_agents.__file__).parent


@pytest.fixture
def pkg_copy(tmp_path):
    for name in FROZEN_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PKG / name, tmp_path / name)
    return tmp_path


FINGERPRINT = {"base_config_hash": "a" * 64, "budget": {"tiers": {"T1": 10.13}},
               "planning": {}, "prices": {}, "cells": {"share_25": {"tier": "T1"}}}


def _design():
    return {"name": "confirmatory", "path": "config/designs/confirmatory.yaml",
            "config_hash": "a" * 64, "fingerprint": FINGERPRINT, "budgets": {"T1": 10.13},
            "cells": {"share_0": {"tier": "T1", "seeds": list(range(101, 131)), "models": [],
                                  "live_decisions": 0},
                      "share_25": {"tier": "T1", "seeds": list(range(101, 111)),
                                   "models": ["gpt-5.4-nano"], "live_decisions": 6750},
                      "memory_25": {"tier": "T4", "seeds": [101, 102, 103, 104],
                                    "models": ["gpt-5.4-nano"], "live_decisions": 2025}}}


PILOT = {"pass": True, "sigma_d": {"share_25": {"n_pairs": 3, "volatility": 0.002},
                                   "share_50": {"n_pairs": 3, "volatility": 0.004}}}
PRICES = {"models": {"gpt-5.4-nano": {"input": 0.2, "output": 1.25}}}


def test_mde_formula():
    assert mde(1.0, 4) == pytest.approx((1.959964 + 0.841621) / 2, rel=1e-5)
    assert mde(None, 4) is None


def test_build_records_everything_the_protocol_lists(pkg_copy):
    from tests.support import ROOT

    f = build(_design(), PILOT, PRICES, {"bubble_gap": 0.05}, package_root=pkg_copy, repo=ROOT)
    assert set(f["frozen_files"]) == set(FROZEN_FILES)
    assert f["git"]["commit"] and len(f["git"]["commit"]) == 40
    assert f["models"] == {"gpt-5.4-nano": {"input": 0.2, "output": 1.25}}
    assert f["sensitivity_grid"]["crash_drop"] == [0.07, 0.10, 0.15]
    assert f["mde"]["share_25"]["mde"]["volatility"] == pytest.approx(2.8016 * 0.002 / 10**0.5,
                                                                       rel=1e-4)
    assert f["mde"]["memory_25"]["sigma_from"] == "max over pilot cells"
    assert f["mde"]["memory_25"]["mde"]["volatility"] == pytest.approx(2.8016 * 0.004 / 2, rel=1e-4)
    assert "share_0" not in f["mde"]
    clean = {**f["git"], "dirty": False}  # the freeze holds on a clean tree at its commit
    verify(f, _design(), clean, package_root=pkg_copy)


def test_refuses_after_outcomes_py_changes(pkg_copy):
    f = build(_design(), PILOT, PRICES, {}, package_root=pkg_copy)
    with open(pkg_copy / "analysis/outcomes.py", "a") as fh:
        fh.write("\n# a change after the freeze\n")
    with pytest.raises(FreezeError, match=r"no longer matches: analysis/outcomes\.py \(sha256"):
        verify(f, _design(), f["git"], package_root=pkg_copy)


def test_refuses_when_confirmatory_config_changes(pkg_copy):
    f = build(_design(), PILOT, PRICES, {}, package_root=pkg_copy)
    with pytest.raises(FreezeError, match="confirmatory config_hash"):
        verify(f, {**_design(), "config_hash": "b" * 64}, f["git"], package_root=pkg_copy)


def test_missing_freeze_and_missing_price_say_what_to_do(tmp_path, pkg_copy):
    with pytest.raises(FreezeError, match="run `snakemake freeze`"):
        load(tmp_path / "freeze.json")
    with pytest.raises(FreezeError, match="no price for gpt-5.4-nano"):
        build(_design(), PILOT, {"models": {}}, {}, package_root=pkg_copy)
    with pytest.raises(FreezeError, match="run `snakemake pilot` first"):
        build(_design(), {}, PRICES, {}, package_root=pkg_copy)


def test_cli_refuses_a_failed_pilot_unless_accepted_and_never_overwrites(workdir):
    """The freeze CLI on the tiny designs, after the sigma runs: a failed pilot is refused unless
    accepted; the freeze records the equal-USD cap, the fundamentals' confirmation and the token
    profiles, and the T5 cell reads its cap from it."""
    import json
    import subprocess

    from market_agents.protocol.design import load_design
    from tests.support.workflow import BIN, env

    def ma(*args):
        return subprocess.run([str(BIN / "ma"), *args], cwd=workdir, env=env(),
                              capture_output=True, text=True, timeout=120)

    assert ma("design", "config/test/designs/sigma.yaml", "--quiet").returncode == 0
    pilot = workdir / "pilot.json"
    pilot.write_text(json.dumps({**PILOT, "pass": False, "criteria": {
        "validity": {"pass": True}, "cost_per_decision": {"pass": False}},
        "usd_per_run": {"share_25": {"mean_usd": 0.0123, "runs": 3, "models": ["gpt-5.4-nano"]}},
        "tokens_per_decision": {"in": 700.0, "out": 200.0, "reasoning": 50.0}}))
    out = workdir / "results/manifests/freeze.json"
    cmd = ("freeze", "create", "config/test/designs/confirmatory.yaml", "--pilot", str(pilot))
    design = load_design(workdir / "config/test/designs/confirmatory.yaml", workdir / "results")
    planned = design.cell_config("mini_25_equalusd").population.llm.usd_cap
    assert planned == pytest.approx(25 * 0.0005)  # before the freeze: share_25's planned spend
    with pytest.raises(Exception, match="freeze first"):
        design.require_freeze("mini_25_equalusd")
    refused = ma(*cmd)
    assert refused.returncode == 2 and "pilot criteria failed: cost_per_decision" in refused.stderr
    done = ma(*cmd, "--accept-failed-pilot")
    assert done.returncode == 0, done.stderr
    frozen = json.loads(out.read_text())
    assert frozen["pilot_failed_criteria_accepted"] == ["cost_per_decision"]
    assert frozen["config_hash"] and frozen["mde"]["share_25"]["seeds"] == 2
    assert frozen["equal_usd"]["share_25"]["usd_cap"] == 0.0123
    check = frozen["fundamentals_check"]
    assert check["confirmed"] and check["target"] == 0.005 and len(check["per_seed"]) == 3
    assert abs(check["mean_sd"] / 0.005 - 1) <= 0.25
    profiles = frozen["token_profiles"]
    assert profiles["gpt-5.4-nano"]["source"] == "measured in the pilot"
    assert profiles["gpt-5.4-mini"]["in"] == 700.0
    assert profiles["gpt-5.4-mini"]["source"] == "assumed equal to gpt-5.4-nano (not measured)"
    # The T5 cell reads its cap from the freeze, never a number in the design.
    after = load_design(workdir / "config/test/designs/confirmatory.yaml", workdir / "results")
    assert after.cell_config("mini_25_equalusd").population.llm.usd_cap == 0.0123
    after.require_freeze("mini_25_equalusd")
    again = ma(*cmd, "--accept-failed-pilot")
    assert again.returncode == 2 and "a freeze is written once" in again.stderr
    verify = ma("freeze", "verify", "config/test/designs/confirmatory.yaml", "--freeze", str(out))
    assert verify.returncode == 0, verify.stderr
    assert frozen["git"] == {"commit": None, "dirty": None}


def test_fundamentals_check_refuses_another_market_and_a_missed_target(tmp_path):
    from market_agents.protocol.freeze import fundamentals_check

    with pytest.raises(FreezeError, match="differ from the confirmatory base"):
        fundamentals_check({}, {"fundamentals": {"jump_sigma": 3.0}},
                           {"fundamentals": {"jump_sigma": 4.0}})
    import polars as pl

    run = tmp_path / "seed0001"
    run.mkdir()
    v = [100.0, 101.0, 99.0, 100.0]
    pl.DataFrame({"asset": [0] * 4, "fundamental": v, "public_value": [100.0] * 4}).write_parquet(
        run / "ticks.parquet")
    same = {"fundamentals": {}}
    check = fundamentals_check({1: run}, same, same)
    gaps = [100.0 / x - 1 for x in v]
    mean = sum(gaps) / 4
    sd = (sum((g - mean) ** 2 for g in gaps) / 3) ** 0.5
    assert check["mean_sd"] == pytest.approx(sd) and not check["confirmed"]  # ≈ 0.8 %, not 0.5 %


def test_equal_usd_needs_the_pilot_spend_of_the_reference_cell():
    from market_agents.protocol.freeze import equal_usd

    with pytest.raises(FreezeError, match="no measured spend per 'share_25' run"):
        equal_usd({"usd_per_run": {"share_5": {"mean_usd": 0.1, "runs": 3}}}, ["share_25"])


def test_the_sensitivity_grid_is_defined_once_in_the_frozen_outcomes():
    from market_agents.analysis.outcomes import SENSITIVITY_BUBBLE_GAPS, SENSITIVITY_CRASH_DROPS
    from market_agents.cli import build_parser
    from market_agents.protocol.freeze import SENSITIVITY_GRID

    assert SENSITIVITY_GRID == {"bubble_gap": list(SENSITIVITY_BUBBLE_GAPS),
                                "crash_drop": list(SENSITIVITY_CRASH_DROPS)}
    args = build_parser("sensitivity").parse_args(["sensitivity", "d.yaml"])
    assert tuple(float(x) for x in args.bubbles.split(",")) == SENSITIVITY_BUBBLE_GAPS
    assert tuple(float(x) for x in args.crashes.split(",")) == SENSITIVITY_CRASH_DROPS


def test_every_frozen_path_exists():
    from market_agents.protocol.freeze import PACKAGE_ROOT

    assert PACKAGE_ROOT == PKG
    for name in FROZEN_FILES:
        assert (PACKAGE_ROOT / name).is_file(), f"frozen file {name} moved: update FROZEN_FILES"


# What a frozen file may import: the standard library's pure parts, the numeric stack,
# pydantic, the LLM layer's plain data types, and another frozen file (the prompt states the
# schema's limits, defined once in schema.py).
PURE_IMPORTS = {"__future__", "dataclasses", "typing", "json", "math", "numpy", "polars",
                "pydantic", "market_agents.llm.types", "market_agents.llm.schema"}


def test_frozen_files_stay_small_and_pure():
    import ast

    for name in FROZEN_FILES:
        text = (PKG / name).read_text()
        # outcomes.py is the largest (476 lines); growing past this is a decision, not a drift
        assert text.count("\n") < 500, f"{name} grew: keep the frozen files small"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module]
            else:
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    assert node.func.id != "open", f"{name} opens a file"
                continue
            assert set(mods) <= PURE_IMPORTS, f"{name} imports {mods}: frozen files are pure"
        assert ".read_" not in text and ".write_" not in text, f"{name} does I/O"

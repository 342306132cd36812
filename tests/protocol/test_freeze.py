"""Freeze: build, verify, refuse after a frozen file or the confirmatory config changes."""

import shutil
from pathlib import Path

import pytest

import market_agents
from market_agents.analysis.stats import mde, sigma_upper
from market_agents.protocol.estimability import families
from market_agents.protocol.freeze import FROZEN_FILES, FreezeError, build, load, verify

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
    cells = {"share_0": {"tier": "T1", "seeds": list(range(101, 131)), "models": [],
                         "live_decisions": 0},
             "share_25": {"tier": "T1", "seeds": list(range(101, 111)),
                          "models": ["gpt-5.4-nano"], "live_decisions": 6750},
             "memory_25": {"tier": "T4", "seeds": [101, 102, 103, 104],
                           "models": ["gpt-5.4-nano"], "live_decisions": 2025}}
    return {"name": "confirmatory", "path": "config/designs/confirmatory.yaml",
            "config_hash": "a" * 64, "fingerprint": FINGERPRINT, "budgets": {"T1": 10.13},
            "cells": cells, "smallest_effect": {"volatility": 0.003},
            "families": families(cells, {"T1": ["volatility"], "T4": ["volatility", "rad"]})}


PILOT = {"pass": True, "sigma_d": {"share_25": {"n_pairs": 3, "volatility": 0.002},
                                   "share_50": {"n_pairs": 3, "volatility": 0.004}}}
PRICES = {"models": {"gpt-5.4-nano": {"input": 0.2, "output": 1.25}}}


def test_families_are_a_tiers_contrasts_times_its_primary_outcomes():
    fams = _design()["families"]
    assert fams["T1"] == {"contrasts": ["share_25"], "primary": ["volatility"], "size": 1,
                          "alpha": 0.05}
    assert fams["T4"]["size"] == 2 and fams["T4"]["alpha"] == 0.025


def test_build_records_everything_the_protocol_lists(pkg_copy):
    from tests.support import ROOT

    f = build(_design(), PILOT, PRICES, {"bubble_gap": 0.05}, package_root=pkg_copy, repo=ROOT)
    assert set(f["frozen_files"]) == set(FROZEN_FILES)
    assert f["git"]["commit"] and len(f["git"]["commit"]) == 40
    assert f["models"] == {"gpt-5.4-nano": {"input": 0.2, "output": 1.25}}
    assert f["sensitivity_grid"]["crash_drop"] == [0.07, 0.10, 0.15]
    # the paired t test's MDE at the family's Holm level (T1: 1 test; T4: 1 contrast x 2), at
    # the 80 % upper bound of σ_d on the pilot's 3 - 1 df, and at σ̂_d beside it
    up = sigma_upper(1.0, 2)
    assert f["mde"]["share_25"]["mde"]["volatility"] == pytest.approx(mde(0.002 * up, 10),
                                                                      rel=1e-9)
    assert f["mde"]["share_25"]["mde_point"]["volatility"] == pytest.approx(mde(0.002, 10),
                                                                            rel=1e-9)
    assert f["mde"]["share_25"]["sigma"]["volatility"] == {
        "from": "share_25", "hat": 0.002, "df": 2, "level": 0.8, "upper": 0.002 * up}
    assert f["mde_settings"]["sigma_level"] == 0.8
    assert f["mde"]["memory_25"]["sigma"]["volatility"]["from"] == (
        "largest bound over pilot cells")
    assert f["mde"]["memory_25"]["mde"]["volatility"] == pytest.approx(
        mde(0.004 * up, 4, family_size=2), rel=1e-9)
    assert f["mde"]["memory_25"]["family_size"] == 2
    assert "share_0" not in f["mde"]
    # at its bound share_25 cannot detect 0.003 either (at σ̂_d it could); memory_25 on 4
    # seeds cannot: both named
    assert f["underpowered"][0].startswith("share_25 × volatility: MDE 0.004217")
    assert f["mde"]["share_25"]["mde_point"]["volatility"] < 0.003
    assert f["underpowered"][1].startswith(
        f"memory_25 × volatility: MDE {mde(0.004 * up, 4, family_size=2):.4g} at α = 0.05/2 "
        "exceeds the smallest effect of interest 0.003 (σ_d bound 0.008468: 80% upper bound "
        "of σ̂_d 0.004 on 2 df; point MDE")
    assert f["underpowered"][2:] == ["memory_25 × rad: MDE undefined (4 paired seeds or no "
                                     "pilot σ̂_d)"]
    clean = {**f["git"], "dirty": False}  # the freeze holds on a clean tree at its commit
    verify(f, _design(), clean, package_root=pkg_copy)


def test_the_bound_makes_a_cell_underpowered_that_its_point_estimate_would_not(pkg_copy):
    """A σ̂_d from two nearly equal differences vouches for little: share_25 powered at σ̂_d
    is underpowered at the bound; pooled with share_50 (declared exchangeable), its bound
    rests on share_50's σ̂_d too, on 2 + 2 df."""
    d = _design()
    d["smallest_effect"] = {"volatility": 0.0006}
    pilot = {"pass": True, "sigma_d": {"share_25": {"n_pairs": 3, "volatility": 0.0004},
                                       "share_50": {"n_pairs": 3, "volatility": 0.004}}}
    alone = build(d, pilot, PRICES, {}, package_root=pkg_copy)
    row = alone["mde"]["share_25"]
    assert row["mde_point"]["volatility"] < 0.0006 < row["mde"]["volatility"]
    assert any(u.startswith("share_25 × volatility") for u in alone["underpowered"])
    pooled = build({**d, "power": {"sigma_level": 0.8, "exchangeable": {
        "volatility": ["share_25", "share_50"]}}}, pilot, PRICES, {}, package_root=pkg_copy)
    s = pooled["mde"]["share_25"]["sigma"]["volatility"]
    assert s["from"] == "pooled over share_25, share_50" and s["df"] == 4
    assert s["hat"] == pytest.approx((0.0004 ** 2 / 2 + 0.004 ** 2 / 2) ** 0.5)
    assert pooled["mde_settings"]["exchangeable"] == {"volatility": ["share_25", "share_50"]}


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
    with pytest.raises(FreezeError, match="run `.venv/bin/snakemake freeze`"):
        load(tmp_path / "freeze.json")
    with pytest.raises(FreezeError, match="no price for gpt-5.4-nano"):
        build(_design(), PILOT, {"models": {}}, {}, package_root=pkg_copy)
    with pytest.raises(FreezeError, match="run `.venv/bin/snakemake pilot` first"):
        build(_design(), {}, PRICES, {}, package_root=pkg_copy)


@pytest.mark.slow(15)
def test_cli_refuses_a_failed_pilot_unless_accepted_and_never_overwrites(workdir):
    """The freeze CLI on the tiny designs, after the sigma runs: a failed pilot is refused unless
    accepted; the freeze records the equal-USD cap, the fundamentals' confirmation and the token
    profiles, and the T5 cell reads its cap from it."""
    import json

    from market_agents.protocol.design import load_design
    from tests.support import inprocess
    from tests.support.workflow import env

    def ma(*args):
        return inprocess.ma(args, env(), workdir)

    assert ma("design", "config/test/designs/sigma.yaml", "--quiet").returncode == 0
    pilot = workdir / "pilot.json"
    pilot.write_text(json.dumps({**PILOT, "pass": False, "criteria": {
        "validity": {"pass": True}, "cost_per_decision": {"pass": False}},
        "usd_per_run": {"share_25": {"mean_usd": 0.0123, "runs": 3, "models": ["gpt-5.4-nano"]}},
        "tokens_per_decision": {"in": 700.0, "out": 200.0, "reasoning": 50.0}}))
    out = workdir / "results/manifests/freeze.json"
    cmd = ("freeze", "create", "config/test/designs/confirmatory.yaml", "--pilot", str(pilot))
    design = load_design(workdir / "config/test/designs/confirmatory.yaml", workdir / "results")
    from market_agents.protocol.planning import require_freeze, run_config

    planned = run_config(design, "mini_25_equalusd").population.llm.usd_cap
    assert planned == pytest.approx(25 * 0.0005)  # before the freeze: share_25's planned spend
    with pytest.raises(Exception, match="freeze first"):
        require_freeze(design, "mini_25_equalusd")
    refused = ma(*cmd)
    assert refused.returncode == 2 and "pilot criteria failed: cost_per_decision" in refused.stderr
    # the rehearsal has run: bubbles never occur, memory_25's memory acted on its one seed
    import polars as pl

    from market_agents.layout import outcomes_path

    rehearsed = outcomes_path("confirmatory", True, workdir / "results")
    rehearsed.parent.mkdir(parents=True, exist_ok=True)
    import hashlib

    def noise(*key):
        return int(hashlib.sha256(repr(key).encode()).hexdigest()[:6], 16) % 997 * 1e-6

    pl.DataFrame([{"cell": c, "seed": s, "volatility": 0.003 + noise(c, s, 1),
                   "mispricing": 0.004 + noise(c, s, 2), "n_bubbles": 0,
                   "mechanisms": "memory" if c == "memory_25" else "",
                   "mechanisms_idle": ""}
                  for c, s in design.runs()]).write_parquet(rehearsed)
    done = ma(*cmd, "--accept-failed-pilot")
    assert done.returncode == 0, done.stderr
    frozen = json.loads(out.read_text())
    moved = frozen["not_estimable"]["movement"]
    assert workdir / moved["outcomes"] == rehearsed
    assert ("share_25 × n_bubbles: never varied: 0 in every run of share_25, share_0"
            in moved["never_moved"])
    assert not [m for m in moved["never_moved"] if "volatility" in m]
    assert moved["mechanism_activity"]["memory_25"]["memory"] == {
        "acted": [101], "idle": [], "phrase": "memory acted on 1 of 1 seeds"}
    assert "never moved in the rehearsal: share_25 × n_bubbles" in done.stdout
    assert frozen["pilot_failed_criteria_accepted"] == ["cost_per_decision"]
    assert frozen["not_estimable"]["problems"] == []  # no rehearsal yet: the design's checks
    assert frozen["families"]["T1"]["primary"] == ["volatility", "mispricing"]
    assert frozen["mde"]["share_25"]["family_size"] == 2
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
    assert run_config(after, "mini_25_equalusd").population.llm.usd_cap == 0.0123
    require_freeze(after, "mini_25_equalusd")
    again = ma(*cmd, "--accept-failed-pilot")
    assert again.returncode == 2 and "a freeze is written once" in again.stderr
    verify = ma("freeze", "verify", "config/test/designs/confirmatory.yaml", "--freeze", str(out))
    assert verify.returncode == 0, verify.stderr
    assert frozen["git"] == {"commit": None, "dirty": None}


def test_fundamentals_check_refuses_another_market_and_a_missed_target(tmp_path):
    from market_agents.protocol.measured import fundamentals_check

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
    from market_agents.protocol.measured import equal_usd

    with pytest.raises(FreezeError, match="no measured spend per 'share_25' run"):
        equal_usd({"usd_per_run": {"share_5": {"mean_usd": 0.1, "runs": 3}}}, ["share_25"])


def test_the_sensitivity_grid_is_defined_once_in_the_frozen_outcomes():
    from market_agents.analysis.outcomes import SENSITIVITY_BUBBLE_GAPS, SENSITIVITY_CRASH_DROPS
    from market_agents.cli import build_parser
    from market_agents.protocol.freeze import sensitivity_grid

    assert sensitivity_grid() == {"bubble_gap": list(SENSITIVITY_BUBBLE_GAPS),
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
                "pydantic", "market_agents.llm.types", "market_agents.llm.schema",
                "collections.abc"}
# A frozen file may read one frozen data file beside it, and nothing else: the prompt reads its
# persona sets (prompt sets are data).
READS_FROZEN_DATA = {"llm/prompting.py": ("prompt_sets.yaml", {"pathlib", "yaml"})}


def test_frozen_files_stay_small_and_pure():
    import ast

    import yaml

    for name in FROZEN_FILES:
        text = (PKG / name).read_text()
        if not name.endswith(".py"):  # frozen data: plain YAML, set -> persona -> text
            data = yaml.safe_load(text)
            assert all(isinstance(v, str) for sets in data.values() for v in sets.values())
            continue
        allowed, reads = PURE_IMPORTS, None
        if name in READS_FROZEN_DATA:
            reads, extra = READS_FROZEN_DATA[name]
            assert f"{name.rsplit('/', 1)[0]}/{reads}" in FROZEN_FILES, reads
            assert text.count(".read_") == 1 and f'with_name("{reads}")' in text, name
            allowed = PURE_IMPORTS | extra
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
            assert set(mods) <= allowed, f"{name} imports {mods}: frozen files are pure"
        assert (reads or ".read_" not in text) and ".write_" not in text, f"{name} does I/O"


def _rehearsal(design, breaker_idle: bool):
    """A rehearsal's gathered outcomes on the design's first two seeds per cell: volatility
    varies, mispricing is identical in every run (no variation), breaker_25's breaker on."""
    import hashlib

    import polars as pl

    rows = []
    for cell, seed in design.runs(max_seeds=2):
        on = "breaker" if cell == "breaker_25" else ""
        noise = int(hashlib.sha256(f"{cell}/{seed}".encode()).hexdigest()[:6], 16) % 997
        rows.append({"cell": cell, "seed": seed, "volatility": 0.003 + 1e-6 * noise,
                     "mispricing": 0.004,
                     "mechanisms": on,
                     "mechanisms_idle": on if breaker_idle else ""})
    return pl.DataFrame(rows)


@pytest.mark.slow(12)
def test_freeze_names_every_estimand_it_cannot_estimate_and_refuses_until_recorded(workdir):
    """`ma freeze create` on the rehearsed confirmatory design: the mock-only cells on seeds
    without a control (the design as the protocol wrote it), a breaker that never halted, and a
    primary outcome that never varies are each named; the freeze refuses until they are
    resolved or recorded as a deviation, and records them."""
    import json
    import subprocess

    from market_agents.layout import outcomes_path
    from market_agents.protocol.design import load_design
    from tests.support.workflow import BIN, env

    path = workdir / "config/designs/confirmatory.yaml"
    design = load_design(path, workdir / "results")
    rehearsed = outcomes_path("confirmatory", True, workdir / "results")
    rehearsed.parent.mkdir(parents=True)
    _rehearsal(design, breaker_idle=True).write_parquet(rehearsed)
    pilot = workdir / "pilot.json"
    pilot.write_text(json.dumps({"pass": True, "sigma_d": {
        "share_25": {"n_pairs": 3, "volatility": 0.0004, "mispricing": 0.0003}}}))

    def freeze(design_file, *extra):
        return subprocess.run([str(BIN / "ma"), "freeze", "create", str(design_file), "--pilot",
                               str(pilot), *extra], cwd=workdir, env=env(),
                              capture_output=True, text=True, timeout=120)

    # The protocol's own seeds for the mock-only cells (1-10), against its share_0, have no
    # share_0 run.
    as_written = workdir / "config/designs/as_written.yaml"
    text = path.read_text()
    for cell in ("auction_25", "interval_10"):
        start = text.index(f"  - name: {cell}")
        end = text.index("    overrides:", start)
        text = text[:start] + f"  - name: {cell}\n    tier: T6\n    seeds: \"1-10\"\n" + text[end:]
    as_written.write_text(text)
    refused = freeze(as_written)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    for named in ("auction_25: no share_0 run on its seeds (seeds 1-10",
                  "interval_10: no share_0 run on its seeds (seeds 1-10",
                  "breaker_25: its breaker never acted on its 2 rehearsed seeds",
                  "share_25 × mispricing: never varied: 0.004 in every run of share_25, "
                  "share_0 in the rehearsal"):
        assert named in refused.stderr, refused.stderr
    assert "volatility" not in refused.stderr  # it varies: estimable
    # The design as shipped gives the mock-only cells their control; the breaker and the
    # constant outcome are still named, and nothing is written until a deviation records them.
    refused = freeze(path)
    assert refused.returncode == 2
    assert "auction_25: no share_0 run" not in refused.stderr
    assert "breaker_25: its breaker" in refused.stderr
    out = workdir / "results/manifests/freeze.json"
    assert not out.exists()
    # With a halting breaker and a varying mispricing, nothing is left to name.
    import polars as pl

    from market_agents.protocol.estimability import not_estimable
    from market_agents.protocol.facts import design_facts

    facts = design_facts(design)
    fixed = _rehearsal(design, breaker_idle=False).with_columns(
        mispricing=pl.col("volatility") * 1.3 + 1e-4 * (pl.col("seed") % 3))
    assert not_estimable(facts["cells"], facts["families"], json.loads(pilot.read_text()),
                         fixed) == []
    # Recorded as a deviation, the freeze goes ahead as far as its next check (the sigma runs,
    # absent here) and logs nothing before it writes.
    recorded = freeze(path, "--deviation", "breaker and mispricing reviewed: see the log")
    assert "cannot be estimated" not in recorded.stderr
    assert not (workdir / "results/manifests/deviations.jsonl").exists()


@pytest.mark.slow(9)
def test_a_deviation_records_the_estimands_the_freeze_could_not_estimate(workdir):
    """With --deviation the freeze is written, names what it could not estimate and the
    deviation logged with them; without it nothing is written."""
    import json

    import polars as pl

    from market_agents.layout import outcomes_path
    from market_agents.protocol.design import load_design
    from tests.support import inprocess
    from tests.support.workflow import env

    def ma(*args):
        return inprocess.ma(args, env(), workdir)

    assert ma("design", "config/test/designs/sigma.yaml", "--quiet").returncode == 0
    path = "config/test/designs/confirmatory.yaml"
    design = load_design(workdir / path, workdir / "results")
    rehearsed = outcomes_path("confirmatory", True, workdir / "results")
    rehearsed.parent.mkdir(parents=True)
    rows = [{"cell": c, "seed": s, "volatility": 0.003 + 1e-4 * ((s * 7 + len(c)) % 5),
             "mispricing": 0.004, "mechanisms": "", "mechanisms_idle": ""}
            for c, s in design.runs(max_seeds=2)]
    pl.DataFrame(rows).write_parquet(rehearsed)
    pilot = workdir / "pilot.json"
    pilot.write_text(json.dumps({**PILOT, "usd_per_run": {"share_25": {
        "mean_usd": 0.0123, "runs": 3, "models": ["gpt-5.4-nano"]}}}))
    out = workdir / "results/manifests/freeze.json"
    refused = ma("freeze", "create", path, "--pilot", str(pilot))
    assert refused.returncode == 2 and "share_25 × mispricing: never varied" in refused.stderr
    assert not out.exists()
    done = ma("freeze", "create", path, "--pilot", str(pilot), "--deviation",
              "mispricing does not vary on the mock: reviewed")
    assert done.returncode == 0, done.stderr
    frozen = json.loads(out.read_text())["not_estimable"]
    assert any("share_25 × mispricing" in p for p in frozen["problems"])
    log = [json.loads(line) for line in
           (workdir / "results/manifests/deviations.jsonl").read_text().splitlines()]
    assert [e["id"] for e in log] == [frozen["deviation"]]
    assert log[0]["mismatches"] == frozen["problems"]

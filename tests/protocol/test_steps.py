"""Running designs: one step per run, resume, gather, sensitivity, mock rehearsal of live cells."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
import yaml

from market_agents.analysis.outcomes import EPISODE_KEYS, Thresholds
from market_agents.analysis.scoring import score_run, write_outcomes
from market_agents.cli import main as ma
from market_agents.config import config_hash
from market_agents.core import sha256_file
from market_agents.layout import run_dir
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import (
    MissingRuns,
    StaleRun,
    gather,
    run_design,
    sensitivity,
    sensitivity_grid,
)
from tests.support import ROOT
from tests.support.fake_run import bubble_crash_path, make_run

CONFIG = ROOT / "config"


def tiny_design(tmp_path: Path, live: bool = True) -> Path:
    """Two short cells; with ``live`` the LLM cell names OpenAI (so it can only run --mock)."""
    provider = {"openai": 1.0} if live else {"mock": 1.0}
    models = {"openai": "gpt-5.4-nano"} if live else {"mock": "gpt-5.4-nano"}
    data = {
        "name": "tiny", "base": str(CONFIG / "baseline.yaml"),
        "prices": str(CONFIG / "prices.yaml"),
        "seeds": "1-2",
        "overrides": {"simulation.ticks": 120, "simulation.burn_in": 20,
                      "population.n_traders": 30, "population.llm.provider_mix": provider,
                      "population.llm.models": models, "population.llm.usd_cap": 1.0},
        "planning": {"usd_per_decision": {"gpt-5.4-nano": 0.0005}},
        "cells": [{"name": "share_0", "overrides": {"population.llm_share": 0.0}},
                  {"name": "share_25", "overrides": {"population.llm_share": 0.25},
                   "treatment": {"provider": "openai"}}],
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_mock_rehearsal_of_a_live_design_resumes(tmp_path):
    design = load_design(tiny_design(tmp_path))
    root = tmp_path / "results"
    counts = run_design(design, workers=1, mock=True, root=root, progress=False)
    assert counts.pop("llm").endswith("calls, 0 cache hits, 0.00 USD paid")  # the free mock
    assert counts == {"ran": 4, "scored": 0, "reused": 0}
    run = run_dir("tiny", "share_25", 1, mock=True, root=root)
    assert run.parts[-4:-2] == ("rehearsal", "tiny") and (run / "outcomes.json").exists()
    assert not (root / "runs").exists()  # rehearsals never land among live results
    out = json.loads((run / "outcomes.json").read_text())
    assert out["n_llm_agents"] == 8 and out["n_llm_decisions"] > 0
    # resume: nothing re-runs; a run whose outcomes.json was lost is re-scored, not re-simulated
    (run / "outcomes.json").unlink()
    again = run_design(design, workers=1, mock=True, root=root, progress=False)
    assert again == {"ran": 0, "scored": 1, "reused": 3, "llm": "no LLM requests"}
    assert json.loads((run / "outcomes.json").read_text()) == out
    # a design edited after the runs were made is not silently mixed with them
    edited = yaml.safe_load(design.path.read_text())
    edited["overrides"]["population.llm.memory"] = 3
    design.path.write_text(yaml.safe_dump(edited))
    with pytest.raises(StaleRun, match=r"share_25/seed0001: made from another config"):
        run_design(load_design(design.path), cells=["share_25"], workers=1, mock=True,
                   root=root, progress=False)


def test_ma_cell_then_outcomes_then_gather(tmp_path, monkeypatch, capsys):
    path = tiny_design(tmp_path, live=False)
    monkeypatch.chdir(tmp_path)
    assert ma(["cell", str(path), "share_25", "--seed", "1"]) == 0
    run = Path("results/runs/tiny/share_25/seed0001")
    assert (run / "manifest.json").exists() and not (run / "outcomes.json").exists()
    assert ma(["outcomes", str(run)]) == 0  # at the protocol's thresholds: outcomes.json
    assert ma(["gather", str(path)]) == 2  # three runs are missing
    assert "3 run(s) have no outcomes.json" in capsys.readouterr().err
    assert ma(["gather", str(path), "--allow-missing"]) == 0
    table = pl.read_parquet("results/runs/tiny/outcomes.parquet")
    assert table.height == 1
    row = table.row(0, named=True)
    assert (row["design"], row["cell"], row["seed"], row["llm_share"]) == ("tiny", "share_25", 1,
                                                                          0.25)
    assert row["treatment_provider"] == "openai" and len(row["config_hash"]) == 64
    assert ma(["cell", str(path), "share_25", "--seed", "9"]) == 2
    assert ma(["outcomes", str(run), "--bubble", "5%"]) == 2


def test_ma_cell_runs_a_free_cell_in_one_process_and_records_it(tmp_path, monkeypatch,
                                                                 capsys):
    """The workflow's step for a batch of free runs: cells x seeds in one process, then the
    batch record; a finished run is kept, a stale one that paid nothing is run again, one that
    paid is never, and a record that names a run made again is removed."""
    path = tiny_design(tmp_path, live=False)
    monkeypatch.chdir(tmp_path)
    record = Path("results/runs/tiny/runs_0001-0002.json")
    cell = ["cell", str(path), "share_25", "share_0", "--seed", "1", "2", "--score"]
    assert ma([*cell, "--runs-file", str(record)]) == 0
    lines = capsys.readouterr().out.splitlines()
    made = [f"results/runs/tiny/{c}/seed000{s}" for c in ("share_25", "share_0") for s in (1, 2)]
    assert [line.split(":")[0] for line in lines] == [*(f"ran {r}" for r in made),
                                                      f"wrote {record}"]
    assert all(re.search(r": \d+ LLM requests: \d+ calls, \d+ cache hits, [\d.]+ USD paid$",
                         line) for line in lines[:2]), lines  # what each run did
    data = json.loads(record.read_text())
    runs = {s: run_dir("tiny", "share_25", s) for s in (1, 2)}
    assert data == {"design": "tiny", "mock": False,
                    "config_hash": {c: config_hash(load_design(path).cell_config(c))
                                    for c in ("share_25", "share_0")},
                    "outcomes_sha256": {r.removeprefix("results/runs/tiny/"): sha256_file(
                        Path(r) / "outcomes.json") for r in made}}
    first, outcomes = record.read_bytes(), (runs[1] / "outcomes.json").read_bytes()
    # a killed job resumes: finished runs are kept, and the record is the same bytes
    record.unlink()
    assert ma([*cell, "--runs-file", str(record)]) == 0
    assert capsys.readouterr().out.count("reused ") == 4 and record.read_bytes() == first
    # the design changed: a stale run stops `ma design`'s way unless --replace-stale, which
    # runs a free one again (it paid for nothing); no record is written when a run stops
    edited = yaml.safe_load(path.read_text())
    edited["overrides"]["population.n_traders"] = 32
    path.write_text(yaml.safe_dump(edited))
    record.unlink()
    assert ma([*cell, "--runs-file", str(record)]) == 2
    assert "made from another config" in capsys.readouterr().err and not record.exists()
    old, other = record.with_name("runs_0001-0001_x.json"), record.with_name("runs_9.json")
    old.write_text(json.dumps({"outcomes_sha256": {"share_0/seed0001": "made before"}}))
    other.write_text(json.dumps({"outcomes_sha256": {"share_0/seed0009": "another run"}}))
    assert ma([*cell, "--replace-stale", "--runs-file", str(record)]) == 0
    assert capsys.readouterr().out.count("replaced ") == 4
    assert not old.exists() and other.exists()  # no record outlives the runs it named
    assert json.loads(record.read_text())["config_hash"] != data["config_hash"]
    assert (runs[1] / "outcomes.json").read_bytes() != outcomes
    # a stale run that paid is never replaced
    manifest = json.loads((runs[1] / "manifest.json").read_text())
    manifest.setdefault("llm_usage", {})["usd_live"] = 0.01
    (runs[1] / "manifest.json").write_text(json.dumps(manifest))
    edited["overrides"]["population.n_traders"] = 34
    path.write_text(yaml.safe_dump(edited))
    assert ma([*cell, "--replace-stale"]) == 2
    assert "seed0001: made from another config" in capsys.readouterr().err
    assert json.loads((runs[1] / "manifest.json").read_text()) == manifest
    # bad input: one line, exit 2, nothing written
    assert ma(["cell", str(path), "share_25", "--seed", "1", "1", "--score"]) == 2
    assert "--seed 1 1: a seed is given twice" in capsys.readouterr().err
    assert ma(["cell", str(path), "share_25", "share_25", "--seed", "3", "--any-seed"]) == 2
    assert "cell share_25 share_25: a cell is given twice" in capsys.readouterr().err
    assert not run_dir("tiny", "share_25", 3).exists()
    new = ["cell", str(path), "share_0", "--seed", "3", "--any-seed"]  # a run not made yet
    assert ma([*new, "--runs-file", "x.json"]) == 2
    assert "--runs-file goes with --score" in capsys.readouterr().err
    # a record that cannot be written is refused before any run, not after them
    Path("plain").write_text("")
    for where in ("plain/runs.json", "results"):
        assert ma([*new, "--score", "--runs-file", where]) == 2
        assert f"--runs-file {where}: not a file that can be written" in (
            capsys.readouterr().err)
    assert not Path("x.json").exists() and not run_dir("tiny", "share_0", 3).exists()


@pytest.mark.slow(5)
def test_ma_design_cli_and_gather(tmp_path, monkeypatch):
    path = tiny_design(tmp_path, live=False)
    monkeypatch.chdir(tmp_path)
    assert ma(["design", str(path), "--workers", "2", "--quiet"]) == 0
    table = pl.read_parquet("results/runs/tiny/outcomes.parquet")
    assert sorted(zip(table["cell"], table["seed"], strict=True)) == [
        ("share_0", 1), ("share_0", 2), ("share_25", 1), ("share_25", 2)]
    fresh = score_run(run_dir("tiny", "share_0", 2))
    assert table.filter((pl.col("cell") == "share_0") & (pl.col("seed") == 2))[
        "volatility"].item() == pytest.approx(fresh["volatility"])


def fake_design(tmp_path: Path) -> tuple[Path, Path]:
    """A design whose run directories are hand-made paths with known episodes."""
    path = tiny_design(tmp_path, live=False)
    root = tmp_path / "results"
    design = load_design(path)
    p, v = bubble_crash_path()
    for cell in ("share_0", "share_25"):
        made = {"config_hash": config_hash(design.cell_config(cell))}  # the design's own runs
        for seed in (1, 2):
            make_run(run_dir("tiny", cell, seed, root=root), p * (1 + 0.01 * seed), v, seed=seed,
                     manifest_extra=made)
    return path, root


def test_sensitivity_equals_fresh_scoring(tmp_path):
    path, root = fake_design(tmp_path)
    design = load_design(path)
    grid = sensitivity_grid()
    assert {(t.bubble_gap, t.crash_drop) for t in grid} == {
        (b, c) for b in (0.03, 0.05, 0.08) for c in (0.07, 0.10, 0.15)}
    table = sensitivity(design, grid, root=root)
    assert table.height == 4 * 9
    for row in table.iter_rows(named=True):
        th = Thresholds(row["bubble_gap"], row["bubble_ticks"], row["crash_drop"],
                        row["crash_ticks"])
        fresh = score_run(run_dir("tiny", row["cell"], row["seed"], root=root), th)
        assert {k: row[k] for k in EPISODE_KEYS} == {k: fresh[k] for k in EPISODE_KEYS}
    # the grid matters: seed 1 has a 7.1 % bubble, one at 3 and 5 % and none at 8 %
    by_gap = table.group_by("bubble_gap").agg(pl.col("n_bubbles").min()).sort("bubble_gap")
    assert by_gap["n_bubbles"].to_list() == [1, 1, 0]


def test_ma_sensitivity_cli(tmp_path, monkeypatch):
    path, root = fake_design(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert ma(["sensitivity", str(path)]) == 0
    table = pl.read_parquet(root / "runs/tiny/sensitivity.parquet")
    assert table.height == 36
    assert ma(["sensitivity", str(path), "--bubbles", "0.03,2"]) == 2


def test_gather_and_sensitivity_name_missing_runs(tmp_path):
    path, root = fake_design(tmp_path)
    design = load_design(path)
    with pytest.raises(MissingRuns, match=r"tiny.yaml: 4 run\(s\) have no outcomes.json"):
        gather(design, root=root)
    for cell, seed in design.runs():
        write_outcomes(run_dir("tiny", cell, seed, root=root))
    assert gather(design, root=root).height == 4
    # a run made from another config is never gathered, --allow-missing or not
    stale = run_dir("tiny", "share_25", 2, root=root) / "manifest.json"
    manifest = json.loads(stale.read_text())
    stale.write_text(json.dumps({**manifest, "config_hash": "0" * 64}))
    for allow in (False, True):
        with pytest.raises(StaleRun, match=r"1 run\(s\) were made from another config than "
                                           r"the design now gives, e.g. .*share_25/seed0002"):
            gather(design, root=root, allow_missing=allow)
    stale.write_text(json.dumps(manifest))
    import shutil

    shutil.rmtree(run_dir("tiny", "share_0", 1, root=root))
    with pytest.raises(MissingRuns, match="1 run"):
        sensitivity(design, sensitivity_grid(), root=root)


@pytest.mark.slow(5)
def test_rescoring_at_other_thresholds_never_touches_what_gather_reads(tmp_path, monkeypatch,
                                                                      capsys):
    """`ma outcomes RUN --bubble 0.03` writes beside the run's outcomes.json (with the
    thresholds it used); `ma gather` then gives the same outcomes.parquet byte for byte; an
    outcomes.json scored at other thresholds (an older ma outcomes overwrote it) is refused in
    one line, never mixed into the table."""
    path = tiny_design(tmp_path, live=False)
    monkeypatch.chdir(tmp_path)
    assert ma(["design", str(path), "--workers", "2", "--quiet"]) == 0
    gathered = Path("results/runs/tiny/outcomes.parquet")
    before = gathered.read_bytes()
    run = run_dir("tiny", "share_25", 1)
    original = (run / "outcomes.json").read_bytes()
    assert json.loads(original)["thresholds"]["bubble_gap"] == 0.05
    capsys.readouterr()
    assert ma(["outcomes", str(run), "--bubble", "0.03:10"]) == 0
    beside = run / "outcomes_bubble0.03x10_crash0.1x20_var1_h10.json"
    assert str(beside) in capsys.readouterr().out
    assert json.loads(beside.read_text())["thresholds"]["bubble_gap"] == 0.03
    assert (run / "outcomes.json").read_bytes() == original
    assert ma(["gather", str(path)]) == 0
    assert gathered.read_bytes() == before
    # An outcomes.json that was scored at other thresholds stops the gather, naming it.
    (run / "outcomes.json").write_bytes(beside.read_bytes())
    capsys.readouterr()
    assert ma(["gather", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "share_25/seed0001/outcomes.json: scored at other thresholds" in err
    assert "bubble_gap 0.03 not 0.05" in err
    assert gathered.read_bytes() == before

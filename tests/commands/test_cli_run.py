"""`ma run` and `ma validate` from the command line: outputs, and one clear error on bad input."""

import gc
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from market_agents.cli import main
from market_agents.config import load_config


def test_ma_run_writes_a_complete_run_dir(tmp_path, baseline_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "market_agents.cli", "run", str(baseline_path), "--seed", "1",
         "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["agents.parquet", "config.yaml", "llm_decisions.parquet", "manifest.json",
                     "orders.parquet", "ticks.parquet", "trades.parquet"]
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("config_hash", "git_revision", "package_version", "seed", "shocks",
                "final_conservation_ok", "wall_time_s"):
        assert key in manifest
    assert manifest["final_conservation_ok"] is True
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dir left


def test_only_its_own_process_freezes_what_start_up_built(tmp_path, baseline_path):
    """`ma` as a program (argv None) freezes its start-up's objects out of the garbage
    collector; a caller passing argv keeps its collector as it was."""
    frozen = gc.get_freeze_count()
    assert main(["run", str(baseline_path), "--seed", "1", "--out", str(tmp_path / "in"),
                 "--set", "simulation.ticks=10", "--set", "simulation.burn_in=0", "--quiet"]) == 0
    assert gc.get_freeze_count() == frozen and gc.isenabled()
    code = ("import gc, sys; from market_agents.cli import main; c = main(); "
            "print(gc.get_freeze_count() > 0, gc.isenabled()); sys.exit(c)")
    proc = subprocess.run([sys.executable, "-c", code, "run", str(baseline_path), "--seed", "1",
                           "--out", str(tmp_path / "own"), "--set", "simulation.ticks=10",
                           "--set", "simulation.burn_in=0", "--quiet"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "exchange.halt_treshold=0.05"], r"exchange\.halt_treshold: Extra inputs"),
        (["--set", "population.n_traders=-3"], r"population\.n_traders"),
        (["--set", "population.mix.noise=0.9"], r"population\.mix: .*sum to 1"),
        (["--seed", "-1"], r"--seed -1: must be in 0\.\."),
        (["--seed", str(2**32)], r"--seed 4294967296"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, baseline_path, capsys, args,
                                                     message):
    out = tmp_path / "run"
    argv = ["run", str(baseline_path), "--seed", "1", "--out", str(out)]
    # later flags win in argparse, so appended --seed replaces the default
    code = main(argv + args)
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert not out.exists()


def test_malformed_yaml(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("population: {n_traders: [\n")
    assert main(["run", str(bad), "--seed", "1", "--out", str(tmp_path / "o")]) == 2
    assert "bad.yaml: malformed YAML" in capsys.readouterr().err


def test_unwritable_out(tmp_path, baseline_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", str(baseline_path), "--seed", "1", "--out", str(blocker / "run")]) == 2
    assert "--out" in capsys.readouterr().err


def test_interrupted_run_leaves_nothing_that_looks_complete(tmp_path, baseline_path,
                                                            monkeypatch):
    import market_agents.sim.rundir as rundir
    import market_agents.sim.runner as runner

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(rundir, "write_files", boom)
    with pytest.raises(KeyboardInterrupt):
        runner.run_to_dir(load_config(baseline_path), 1, tmp_path / "run", progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow(6)  # CPU s on 2 cores: out of the quick subset
def test_validate_prints_the_realism_report_and_writes_its_figures(baseline_path, capsys,
                                                                    tmp_path):
    out_dir = tmp_path / "report"
    code = main(["validate", str(baseline_path), "--seeds", "2", "--blocks", "2", "--workers",
                 "1", "--ticks", "400", "--out", str(out_dir)])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert "seeds 1-2" in out and "seeds 3-4" in out
    for fact in ("ljung_box_reject_share", "median_acf_1", "excess_kurtosis_20",
                 "hill_tail_index", "hill_se", "abs_acf_50", "abs_acf_decay_beta",
                 "volume_volatility_corr", "mispricing_q99", "mispriced_share_worst",
                 "longest_mispricing_worst", "holdings_low_fundamentalist_worst"):
        assert fact in out
    # Exit 1 exactly when a judged target is missed, each miss on its own line.
    assert (code == 1) == ("miss: " in out)
    for name in ("acf.png", "kurtosis.png", "mispricing.png", "holdings.png", "report.json"):
        assert (out_dir / name).stat().st_size > 0, name
    report = json.loads((out_dir / "report.json").read_text())
    assert report["ticks"] == 400 and set(report["columns"]) == {"seeds 1-2", "seeds 3-4"}
    # A file where the report's folder should be: one line, exit 2, before any simulation.
    (tmp_path / "file").write_text("x")
    assert main(["validate", str(baseline_path), "--seeds", "1", "--out",
                 str(tmp_path / "file")]) == 2
    assert "--out" in capsys.readouterr().err


def test_validate_prints_a_target_a_column_cannot_measure_as_a_dash(capsys):
    # PAMS's column has no V^pub and no trader types: its premium is None, not judged
    import argparse

    from market_agents.commands.validate import _print_table

    check = {"value": None, "ok": None, "judged": False, "text": "t"}
    _print_table(argparse.Namespace(config="c.yaml", design=None), 600,
                 {"PAMS CI2002": {"values": {"x": 1.0}, "checks": {"premium": check}}})
    assert re.search(r"premium\s+- n/a", capsys.readouterr().out)


@pytest.mark.slow(5)  # CPU s on 2 cores: out of the quick subset
def test_validate_simulates_a_designs_base_with_its_shocks(capsys, tmp_path):
    # Issue 35: the confirmatory base is config/baseline.yaml with the design's overrides
    # (jump_prob 1.0, the shock at 300, the placebo at 450), named once, in the design.
    out_dir = tmp_path / "confirmatory"
    design = str(Path(__file__).resolve().parents[2] / "config" / "designs" / "confirmatory.yaml")
    code = main(["validate", "--design", design, "--seeds", "1",
                 "--workers", "1", "--out", str(out_dir)])
    assert code in (0, 1)
    assert f"realism report of the base of {design}" in capsys.readouterr().out
    report = json.loads((out_dir / "report.json").read_text())
    assert report["design"] == design
    assert set(report["columns"]["seeds 1-1"]["values"]) >= {
        "premium_mean", "value_null_excess_worst", "raw_abs_acf_1_10",
        "holdings_lowest_fundamentalist"}
    # A --set key the market lacks is one line naming it, exit 2.
    assert main(["validate", "--design", design, "--seeds", "1", "--set", "exchange.nope=1"]) == 2
    assert "exchange.nope" in capsys.readouterr().err


def test_a_replay_says_it_made_no_call_and_served_every_answer_from_the_cache(tmp_path,
                                                                              baseline_path):
    """Issue 37: the README's replay example ends with one line of what it did (on e83eada it
    printed only "wrote ... (conservation ok, 1.60 s)")."""
    def ma(out, *extra):
        return subprocess.run(
            [sys.executable, "-m", "market_agents.cli", "run", str(baseline_path), "--seed", "1",
             "--out", str(tmp_path / out), "--cache", str(tmp_path / "cache"), "--set",
             "population.llm_share=0.25", "--set", "simulation.ticks=120", *extra],
            capture_output=True, text=True, timeout=300)

    first = ma("first")
    assert first.returncode == 0, first.stderr
    replay = ma("replay", "--replay")
    assert replay.returncode == 0, replay.stderr
    last = replay.stdout.strip().splitlines()[-1]
    n = json.loads((tmp_path / "replay" / "manifest.json").read_text())["llm_usage"]["requests"]
    assert n > 0
    assert f"{n} LLM requests: 0 calls, {n} cache hits, 0.00 USD paid" in last, last
    assert re.match(rf"wrote {re.escape(str(tmp_path / 'replay'))}: 7 files, ", last), last

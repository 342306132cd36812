"""The run contract: src.main runs a run config's target and writes eval_inputs/, src.evaluate
writes metrics.json; a bad RUN_ID or MODE says what exists."""

import json
import subprocess
import sys

from tests.support.workflow import ROOT, env


def _py(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=300)


def test_sanity_run_writes_eval_inputs_and_metrics(workdir):
    done = _py("src.main", "--run-id", "exploratory_mock", "--mode", "sanity",
               "--workdir", str(workdir))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    out = workdir / "results/contract/exploratory_mock/sanity"
    assert (out / "eval_inputs/exploratory.parquet").stat().st_size > 0
    done = _py("src.evaluate", "--run-id", "exploratory_mock", "--mode", "sanity",
               "--workdir", str(workdir))
    assert done.returncode == 0, done.stderr
    metrics = json.loads((out / "metrics.json").read_text())["designs"]["exploratory"]
    assert metrics["runs"] == 4 and metrics["cell_means"]["share_25"]["n_runs"] == 2
    effect = metrics["effects_vs_control"]["share_25"]
    assert effect["n_pairs"] == 2 and effect["volatility"]["n"] == 2


def test_unknown_run_id_lists_the_runs(workdir):
    done = _py("src.main", "--run-id", "nosuch", "--workdir", str(workdir))
    assert done.returncode == 2
    assert "RUN_ID='nosuch': no " in done.stderr
    assert "config/run/nosuch.yaml (runs: exploratory_mock, pilot_openai, sigma)" in done.stderr

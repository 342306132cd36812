"""Modes never share paths (docs/guards.md): every sanity run of the run contract, every
rehearsal target and `make smoke` leave the live roots (results/runs, results/cache,
results/manifests, results/library) byte for byte as they were, and write their caches,
manifests and spend records under their own root; `make clean` removes only what is rebuilt
at no cost, and no make target or rule deletes a live file."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.support import ROOT
from tests.support.workflow import env, smk

LIVE_ROOTS = ("results/runs", "results/cache", "results/manifests", "results/library")
VENV = Path(sys.executable).parent
MAKE = ["make", "--no-print-directory", f"VENV={VENV}", "-o", f"{VENV}/ma"]


def _project(path: Path) -> Path:
    """A copy of the project's files `make` and the workflow read (the installed package and
    .venv are the repository's)."""
    for name in ("config", "rules", "workflow"):
        shutil.copytree(ROOT / name, path / name)
    for name in ("Snakefile", "Makefile", "pyproject.toml", "uv.lock", "src/main.py",
                 "src/evaluate.py", ".research/evaluation.json"):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, path / name)
    return path


def _seed_live_results(project: Path) -> None:
    """Live results a careless rehearsal would replace: runs, a gathered parquet, a paid
    cache, the pilot and freeze manifests, budget manifests, spend records, deviations, a
    library."""
    files = {
        "results/runs/exploratory/share_0/seed0001/manifest.json": '{"seed": 1}',
        "results/runs/exploratory/outcomes.parquet": "42 real rows",
        "results/runs/pilot_openai/share_25/seed0001/manifest.json":
            '{"llm_usage": {"usd_spent": 0.01}}',
        "results/cache/pilot_openai.sqlite/cache.db": "paid answers",
        "results/manifests/pilot.json": '{"pass": true}',
        "results/manifests/freeze.json": json.dumps(
            {"design": "confirmatory", "equal_usd": {"share_25": {"usd_cap": 0.001}}}),
        "results/manifests/budget/pilot_openai_all.json": '{"approved": {}}',
        "results/manifests/spend/0123456789abcdef.json": json.dumps(
            {"kind": "bazaar", "out": "results/bazaar/eval/openai/m/micro", "planned_usd": 1.0,
             "spent_usd": 0.2}),
        "results/manifests/deviations.jsonl": '{"id": "x"}\n',
        "results/library/nano_v1.npz": "library",
    }
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)


def _live_tree(project: Path) -> dict[str, str]:
    return {str(p.relative_to(project)): hashlib.sha256(p.read_bytes()).hexdigest()
            for root in LIVE_ROOTS for p in sorted((project / root).rglob("*")) if p.is_file()}


def _make(project: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*MAKE, *args], cwd=project, env=env(**extra_env),
                          capture_output=True, text=True, timeout=900)


def _ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


@pytest.mark.slow(46)
def test_sanity_rehearsal_and_smoke_never_touch_live_results_and_clean_keeps_them(tmp_path):
    project = _project(tmp_path)
    _seed_live_results(project)
    before = _live_tree(project)

    # One sanity run of the contract here; every step's, against sentinels in the live roots:
    # tests/pipeline/test_contract.py.
    _ok(_make(project, "run", "RUN_ID=exploratory_mock", "MODE=sanity"))
    rehearse = [f"rehearse_{t}" for t in ("pilot", "T1", "T2", "T3", "T4", "T5", "T6",
                                          "confirmatory")]
    _ok(smk(project, "--cores", "2", *rehearse))
    _ok(_make(project, "smoke"))

    assert _live_tree(project) == before
    # Each mode wrote its own files under its own root.
    sandbox = project / "results/sanity/exploratory_mock"
    assert pl.read_parquet(sandbox / "eval_inputs/exploratory.parquet").height == 4
    metrics = json.loads((sandbox / "metrics.json").read_text())["inputs"]["exploratory"]
    assert metrics["cell_means"]["share_25"]["n_runs"] == 2
    assert (project / "results/rehearsal/confirmatory/outcomes.parquet").exists()
    assert (project / "results/smoke/results/runs/exploratory/outcomes.parquet").exists()

    _ok(_make(project, "clean"))
    assert _live_tree(project) == before
    for gone in ("results/sanity", "results/smoke", "results/rehearsal", "results/logs",
                 ".snakemake"):
        assert not (project / gone).exists(), gone


PROTECTED = ("results", *LIVE_ROOTS, "results/bazaar", "results/bazaar/eval")


def test_no_make_target_or_rule_deletes_live_results():
    # Every removal a make target can run, with make's own variable expansion.
    dry = subprocess.run(["make", "-pn", "clean", "-f", str(ROOT / "Makefile")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60).stdout
    cleanable = re.search(r"^CLEANABLE :?= (.*)$", dry, re.M).group(1).split()
    assert "results/runs" not in cleanable and cleanable
    removed = [*cleanable]
    for line in (ROOT / "Makefile").read_text().splitlines():
        for m in re.finditer(r"\brm\s+(?:-\w+\s+)*([^&;|]+)", line):
            removed += [t for t in m.group(1).split() if "$(" not in t]
    for target in removed:
        path = target.rstrip("/")
        assert path not in PROTECTED, f"a make target removes {target}"
        assert not any(path.startswith(f"{live}/") for live in LIVE_ROOTS), target
        assert path.startswith(("results/", ".snakemake")), target
    # Snakemake rules run no removal; the freeze is protected; no rule outputs a cache.
    rules = "\n".join(p.read_text() for p in sorted((ROOT / "rules").glob("*.smk")))
    assert not re.search(r"\brm\s|rmtree|unlink", rules)
    assert re.search(r'freeze=protected\(report\(W\.manifest\("freeze"\)', rules)
    assert not re.search(r'output:[^:]*results/cache', rules)

"""Issue 33: no command removes what it did not write, and the project cap does not depend on
where a command starts.

Measured on e83eada: ``ma run --out DIR`` removed whatever DIR was (``precious_dir`` with its
file; ``--out ''`` and ``--out .`` the whole working directory, .git, .venv and the results with
the spend ledger included), and a paid run started one folder above the project with absolute
paths was admitted against an empty ledger there although the project's held 39.98 USD.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market_agents.cli import main
from tests.support import ROOT, inprocess
from tests.support.liverun import SECRET, env, sets

BASELINE = ROOT / "config" / "baseline.yaml"
QUICK = ["--set", "simulation.ticks=60", "--set", "simulation.burn_in=5", "--quiet"]


@contextlib.contextmanager
def cwd(path: Path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def ma(*argv: str) -> tuple[int, str]:
    """``ma`` in-process (``inprocess.ma``, here and now): its exit code and stderr."""
    done = inprocess.ma([str(a) for a in argv], os.environ, os.getcwd())
    return done.returncode, done.stderr


def make_project(root: Path) -> Path:
    """A scratch project: a checkout's markers, sources, a results root with a run directory,
    a response cache and a spend record, a folder of the user's and an empty one."""
    proj = root / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'scratch'\n")
    (proj / "src").mkdir()
    (proj / "src" / "model.py").write_text("x = 1\n")
    (proj / "precious_dir").mkdir()
    (proj / "precious_dir" / "precious.txt").write_text("irreplaceable\n")
    (proj / "empty_dir").mkdir()
    (proj / "notes.txt").write_text("notes\n")
    cache = proj / "results" / "cache" / "live.sqlite"
    cache.mkdir(parents=True)
    (cache / "cache.db").write_bytes(b"SQLite format 3\x00")
    spend = proj / "results" / "manifests" / "spend"
    spend.mkdir(parents=True)
    (spend / "0000.json").write_text(json.dumps({
        "kind": "run", "out": str(proj / "elsewhere"), "design": None, "planned_usd": 1.0,
        "worst_usd": 1.0, "spent_usd": 0.5}))
    with cwd(proj):
        code, err = ma("run", BASELINE, "--seed", "1", "--out", "results/runs/d/c/seed0001",
                       *QUICK)
    assert code == 0, err
    return proj


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` outside run directories, with its bytes."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and not any((q / "manifest.json").exists() for q in p.parents):
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.mark.parametrize("out,why", [
    ("", "an empty path names the working directory"),
    (".", "is the working directory"),
    ("..", "holds the working directory"),
    ("precious_dir", "holds files this command did not write (e.g. precious.txt)"),
    ("results", "is a results root"),
    ("results/cache/live.sqlite", "is a response cache"),
    ("src", "holds files this command did not write"),
    ("notes.txt", "exists and is not a directory"),
])
def test_run_out_that_is_not_a_run_directory_is_refused_with_every_file_in_place(
        project: Path, out: str, why: str):
    before = snapshot(project.parent)
    with cwd(project):
        code, err = ma("run", BASELINE, "--seed", "2", "--out", out, *QUICK)
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("ma run: error: --out ")
    assert snapshot(project.parent) == before


def test_run_out_refusals_through_a_real_process(project: Path):
    """The same refusals from a real ``ma`` process: one line, exit 2, nothing removed."""
    before = snapshot(project.parent)
    for out in ("", ".", "precious_dir", "results/cache/live.sqlite"):
        proc = subprocess.run([sys.executable, "-m", "market_agents.cli", "run", str(BASELINE),
                               "--seed", "2", "--out", out, *QUICK], cwd=project,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert snapshot(project.parent) == before


def test_run_replaces_its_own_run_directory_and_an_empty_folder(project: Path):
    with cwd(project):
        assert ma("run", BASELINE, "--seed", "3", "--out", "results/runs/d/c/seed0001",
                  *QUICK)[0] == 0
        assert ma("run", BASELINE, "--seed", "3", "--out", "empty_dir", *QUICK)[0] == 0
    manifest = json.loads((project / "empty_dir" / "manifest.json").read_text())
    assert manifest["seed"] == 3


def test_a_paid_run_is_never_replaced_by_another_run(project: Path):
    run = project / "results" / "runs" / "d" / "c" / "seed0001"
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["llm_usage"]["usd_live"] = 0.75  # as a run that paid for its answers
    (run / "manifest.json").write_text(json.dumps(manifest))
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    with cwd(project):
        code, err = ma("run", BASELINE, "--seed", "2", "--out", run, *QUICK)
    assert code == 2 and "holds a paid run (0.7500 USD" in err, err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


@pytest.mark.parametrize("argv,why", [
    (["paper", "--design", "exploratory", "--out", "precious_dir"], None),
    (["design", "config/designs/exploratory.yaml", "--results", "."], "is the working directory"),
    (["design", "config/designs/exploratory.yaml", "--results", ""], "an empty path"),
    (["bazaar", "anchors", "--out", ""], "an empty path"),
    (["bazaar", "play", "--tier", "T1", "--seed", "1", "--policy", "hold", "--out", "results"],
     "is a results root"),
    (["validate", str(BASELINE), "--out", "."], "is the working directory"),
    (["validate", str(BASELINE), "--out", "results/cache/live.sqlite"], "is a response cache"),
])
def test_every_command_that_writes_a_folder_applies_the_rule(project: Path, argv, why):
    (project / "precious_dir" / "index.html").write_text("<p>mine</p>")
    before = snapshot(project.parent)
    with cwd(project):
        code, err = ma(*argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert (why or "not a paper this command wrote") in err, err
    assert snapshot(project.parent) == before


# --- the property: whatever --out names, nothing outside a run directory is removed --------

@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> tuple[Path, list[str]]:
    """One scratch project for every example, and the --out values drawn: every path in it,
    relative and absolute, its parents, new paths and odd spellings."""
    root = tmp_path_factory.mktemp("outputs")
    proj = make_project(root)
    candidates = sorted({
        # never above the scratch root: a regression must not reach beyond it
        "", ".", "..", str(proj), str(root),
        *(str(p.relative_to(proj)) for p in proj.rglob("*")),
        *(str(p) for p in proj.rglob("*") if p.is_dir()),
        "new_run", "results/runs/d/c/seed0002", "precious_dir/sub", "results/new",
        "results/cache/live.sqlite/inside", "./results/../precious_dir", "precious_dir/",
    })
    return proj, candidates


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(1, 3))
def test_property_no_file_outside_a_run_directory_is_ever_removed(scratch, data, seed: int):
    proj, candidates = scratch
    out = data.draw(st.sampled_from(candidates), label="--out")
    before = snapshot(proj.parent)
    runs_before = {str(p.parent) for p in proj.parent.rglob("manifest.json")}
    with cwd(proj):
        code, err = ma("run", BASELINE, "--seed", seed, "--out", out, *QUICK)
    assert code in (0, 2), err
    assert len(err.strip().splitlines()) <= 1 and "Traceback" not in err, err
    after = snapshot(proj.parent)
    assert {k: v for k, v in before.items() if k in after} == {
        k: after[k] for k in before if k in after}
    assert set(before) <= set(after), sorted(set(before) - set(after))
    if code == 0:  # it wrote a run directory where none or a free one of its own was
        target = (proj / out).resolve()
        assert (target / "manifest.json").exists()
        assert str(target) in runs_before or not any(
            target.is_relative_to(Path(r)) for r in runs_before if Path(r) != target)


# --- the ledger is the project's, wherever the command starts ------------------------------


@pytest.fixture
def spent_project(tmp_path: Path) -> Path:
    """A project with its own config and 39.98 USD in its ledger."""
    proj = tmp_path / "proj"
    (proj / "config").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'study'\n")
    shutil.copy(BASELINE, proj / "config" / "baseline.yaml")
    spend = proj / "results" / "manifests" / "spend"
    spend.mkdir(parents=True)
    (spend / "0001.json").write_text(json.dumps({
        "kind": "run", "out": str(proj / "earlier"), "design": None, "planned_usd": 40.0,
        "worst_usd": 40.0, "spent_usd": 39.98}))
    return proj


@pytest.mark.parametrize("start,extra", [("root", []), ("parent", []),
                                          ("root", ["--results", "{tmp}/other"])])
def test_the_project_cap_refuses_the_run_wherever_it_starts(spent_project: Path, start, extra):
    from market_agents.testing.fakeserver import FakeAPI

    tmp = spent_project.parent
    (tmp / "other").mkdir(exist_ok=True)
    where = spent_project if start == "root" else tmp
    cmd = [sys.executable, "-m", "market_agents.cli", "run",
           str(spent_project / "config" / "baseline.yaml"), "--seed", "1",
           "--out", str(spent_project / "runs" / "x"), "--cache", str(spent_project / "cache"),
           "--quiet", *sets(population__llm__usd_cap=1.0),
           *[a.format(tmp=tmp) for a in extra]]
    with FakeAPI() as api:
        proc = subprocess.run(cmd, cwd=where, capture_output=True, text=True, env=env(api),
                              timeout=300)
    err = proc.stderr.strip()
    assert proc.returncode == 2 and len(err.splitlines()) == 1, proc.stderr[-2000:]
    assert "refused" in err and SECRET not in err and "Traceback" not in err
    assert "39.98" in err, err
    assert not api.requests  # nothing was paid
    assert not (spent_project / "runs" / "x").exists()
    assert not (tmp / "results").exists()  # no second ledger one folder up


def test_spend_names_a_results_root_without_a_ledger(tmp_path: Path):
    with cwd(tmp_path):
        code, err = ma("spend", "--results", tmp_path / "missing")
        assert code == 2 and "no such folder, so no spend ledger" in err, err
        (tmp_path / "empty").mkdir()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["spend", "--results", str(tmp_path / "empty")]) == 0
    assert "no spend ledger under" in out.getvalue()


def test_free_runs_alone_are_no_ledger_to_step_around(spent_project: Path):
    """After `make run` (free mock runs) in the project, a live run with its own results root
    is admitted: only spend records or paid runs make a ledger (the first version counted the
    free runs' 0 USD entries and refused every test's live run in a checkout after make run)."""
    from market_agents.protocol.ledger import keeps_ledger

    home = spent_project / "results"
    shutil.rmtree(home / "manifests")
    run = home / "runs" / "exploratory" / "share_0" / "seed0001"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"llm_usage": {"usd_live": 0.0}}))
    assert not keeps_ledger(home)
    (run / "manifest.json").write_text(json.dumps({"llm_usage": {"usd_live": 0.25}}))
    assert keeps_ledger(home)

"""Where a study stands (protocol/status.py) on a finished little study: every run present; a
deleted run missing, a failed record failed, a manifest of other code or none stale and
named; a paid run's USD; a changed engine (a scratch copy of the package) makes every run
stale."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from market_agents import layout
from market_agents.protocol.design import load_design
from market_agents.protocol.status import (
    BEFORE_FINGERPRINTS,
    design_status,
    named,
    run_status,
    text,
)
from market_agents.sim import fingerprint as fp
from market_agents.sim.rundir import failed_record
from tests.support.study import DESIGN, REHEARSED, build_study, copy_study

MAKE = ".venv/bin/snakemake --cores 2 exploratory"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("study") / "project")


@pytest.fixture
def study(built, tmp_path):
    return copy_study(built, tmp_path / "project")


def load(project: Path, name: str = DESIGN):
    return load_design(project / "config/test/designs" / f"{name}.yaml",
                       project / layout.ROOT)


def edit_manifest(run: Path, **changes) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    for key, value in changes.items():
        if value is None:
            manifest.pop(key, None)
        elif key == "usd_live":
            manifest["llm_usage"]["usd_live"] = value
        else:
            manifest[key] = value
    (run / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.slow(5)
def test_a_finished_design_is_all_present_with_nothing_to_make(study):
    status = design_status(load(study), make=MAKE)
    assert status.counts() == {"present": 4, "missing": 0, "stale": 0, "failed": 0}
    assert not status.live and status.usd == 0 and named(status) == []
    outcomes = layout.outcomes_path(DESIGN, root=study / layout.ROOT)
    assert status.next == [f"nothing to make: .venv/bin/ma summary {outcomes}"]
    assert [f.name for f in status.figures] == ["volatility.png"]
    price = {(r.cell, r.seed): [f.name for f in r.figures] for r in status.runs}
    assert price[("share_25", 1)] == ["price.png"] and price[("share_0", 1)] == []
    lines = text(status)
    assert lines[-2].split() == ["total", "4", "4", "0", "0", "0", "free"]
    assert len(lines) == 6  # heading, header, a line per cell, total, next: not one per seed
    assert len(text(status, seeds=True)) == 8


def test_missing_failed_and_stale_runs_are_named(study):
    design = load(study)
    shutil.rmtree(design.run_dir("share_0", 2))
    gone = design.run_dir("share_25", 2)
    shutil.rmtree(gone)
    failed_record(gone).write_text(json.dumps({"error": "too many LLM calls failed (3 of 5)"}))
    edit_manifest(design.run_dir("share_0", 1), code_fingerprint=None)
    edit_manifest(design.run_dir("share_25", 1), code_fingerprint="ab" * 32)
    status = design_status(design, make=MAKE)
    states = {(r.cell, r.seed): (r.state, r.why) for r in status.runs}
    assert states == {
        ("share_0", 1): ("stale", BEFORE_FINGERPRINTS),
        ("share_0", 2): ("missing", ""),
        ("share_25", 1): ("stale", "made by code abababababababab"),
        ("share_25", 2): ("failed", "too many LLM calls failed (3 of 5)"),
    }
    assert named(status) == [
        "missing: share_0 seed 2",
        f"stale ({BEFORE_FINGERPRINTS}): share_0 seed 1",
        "stale (made by code abababababababab): share_25 seed 1",
        "failed: share_25 seed 2"]
    assert status.next == [MAKE]  # it makes the stale free runs again (issue 34)


def test_a_run_from_another_config_is_stale_too(study):
    path = study / "config/test/designs" / f"{DESIGN}.yaml"
    path.write_text(path.read_text().replace("simulation.ticks: 120", "simulation.ticks: 121"))
    status = design_status(load(study))
    assert {r.state for r in status.runs} == {"stale"}
    assert named(status) == ["stale (made from another config): all 4 runs"]


def test_a_paid_run_shows_its_usd_and_is_never_proposed_for_re_making(study):
    design = load(study)
    edit_manifest(design.run_dir("share_25", 1), usd_live=0.125)
    status = design_status(design, make=MAKE)
    assert status.usd == 0.125 and status.runs[2].to_dict()["paid"]
    assert "0.1250" in text(status)[3]  # share_25's line: paid, though the cell is free now
    edit_manifest(design.run_dir("share_25", 1), code_fingerprint="cd" * 32)
    status = design_status(design, make=MAKE)
    assert status.next == ["1 stale paid run(s) (0.1250 USD) are kept: re-making one pays "
                           "again, never silently (docs/guards.md)"]


def test_a_changed_engine_makes_every_run_stale(study, tmp_path):
    """The code of today is a scratch copy of the package with a comment appended to a file
    of the fingerprint's list (the checkout is never modified)."""
    package = tmp_path / "market_agents"
    shutil.copytree(fp.PACKAGE_ROOT, package, ignore=shutil.ignore_patterns("__pycache__"))
    with (package / "market" / "book.py").open("a") as fh:
        fh.write("# the engine changed\n")
    changed = fp.fingerprint(package)
    design = load(study)
    shutil.rmtree(design.run_dir("share_0", 1))
    status = design_status(design, make=MAKE, code=changed)
    assert status.counts() == {"present": 0, "missing": 1, "stale": 3, "failed": 0}
    assert named(status) == ["missing: share_0 seed 1",
                             f"stale (made by code {fp.short(fp.fingerprint())}): all of "
                             "share_25; share_0 seed 2"]
    # outside the list, nothing is stale
    package2 = tmp_path / "other" / "market_agents"
    shutil.copytree(fp.PACKAGE_ROOT, package2, ignore=shutil.ignore_patterns("__pycache__"))
    with (package2 / "paper" / "files.py").open("a") as fh:
        fh.write("# the paper changed\n")
    same = design_status(design, code=fp.fingerprint(package2))
    assert same.counts()["stale"] == 0


def test_a_rehearsal_is_its_own_folder_and_free(study):
    design = load(study, REHEARSED)
    live = design_status(design, make="m")
    assert live.live and live.counts()["missing"] == 3
    assert live.next == ["m  # makes paid calls"]
    assert text(live)[0].endswith("none of 3 runs made yet")
    rehearsal = design_status(design, mock=True, make="r")
    assert not rehearsal.live and rehearsal.counts()["present"] == 3
    assert rehearsal.folder == layout.design_dir(REHEARSED, True, study / layout.ROOT)
    assert run_status(design, "share_25", 1, mock=True).state == "present"

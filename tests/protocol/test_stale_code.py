"""Issue 34, results tied to code: a free run made by other code than today's (its manifest's
``code_fingerprint``) is made again by ``ma design`` and by the workflow's next target; a paid
one stops the command in one line and is never made again silently; ``ma gather`` never puts
runs of two engines in one table. (On e83eada a changed engine left every run in place:
``snakemake`` said "Nothing to be done" and a paper could mix runs of two engines.)"""

from __future__ import annotations

import json

import pytest

from market_agents.layout import run_dir
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import StaleRun, gather, run_design
from market_agents.sim.fingerprint import fingerprint
from tests.protocol.test_steps import tiny_design

OTHER = "ab" * 32


def made_by(run, code=OTHER, usd=None):
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["code_fingerprint"] = code
    if usd is not None:
        manifest["llm_usage"]["usd_live"] = usd
    path.write_text(json.dumps(manifest))
    return manifest


@pytest.fixture
def made(tmp_path):
    design = load_design(tiny_design(tmp_path, live=False))
    root = tmp_path / "results"
    run_design(design, workers=1, root=root, progress=False)
    return design, root


def test_ma_design_makes_a_free_run_of_other_code_again(made):
    design, root = made
    run = run_dir("tiny", "share_25", 1, root=root)
    made_by(run)
    counts = run_design(design, workers=1, root=root, progress=False)
    assert (counts["ran"], counts["reused"]) == (1, 3)
    assert json.loads((run / "manifest.json").read_text())["code_fingerprint"] == fingerprint()


def test_a_run_made_before_fingerprints_is_made_again_too(made):
    design, root = made
    run = run_dir("tiny", "share_0", 2, root=root)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["code_fingerprint"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert run_design(design, workers=1, root=root, progress=False)["ran"] == 1


def test_a_paid_run_of_other_code_stops_the_design_and_stays(made):
    design, root = made
    run = run_dir("tiny", "share_25", 2, root=root)
    before = made_by(run, usd=0.5)
    with pytest.raises(StaleRun, match=r"share_25/seed0002: a paid run \(0\.5000 USD\) made by "
                                       r"other code \(abababababababab; now [0-9a-f]{16}\); a "
                                       r"paid run is never made again silently"):
        run_design(design, workers=1, root=root, progress=False)
    assert json.loads((run / "manifest.json").read_text()) == before


def test_gather_never_mixes_runs_of_two_engines(made):
    design, root = made
    assert gather(design, root=root).height == 4
    made_by(run_dir("tiny", "share_0", 1, root=root))
    with pytest.raises(StaleRun, match=r"made by 2 versions of the engine: abababababababab "
                                       r"\(.*share_0/seed0001\), [0-9a-f]{16} \(.*\); one "
                                       r"outcomes.parquet never mixes them"):
        gather(design, root=root)


def test_a_changed_engine_asks_the_workflow_for_new_batch_records(monkeypatch):
    """The batch records are the workflow's targets for free runs: new names, so a dry run
    plans the batches again (and `ma cell --replace-stale` replaces the old runs)."""
    from market_agents.pipeline.workflow import Workflow
    from market_agents.protocol import batches

    today = set(Workflow({})._batches("exploratory"))
    monkeypatch.setattr(batches, "fingerprint", lambda: OTHER)
    changed = set(Workflow({})._batches("exploratory"))
    assert today and changed and not today & changed


def test_a_paid_run_of_other_code_stops_the_workflow_while_it_builds_its_dag(workdir,
                                                                           monkeypatch):
    """The input function of every live run (rule simulate_live's gate) refuses a paid run
    made by other code: Snakemake stops before any job runs, so nothing is paid."""
    from types import SimpleNamespace

    from market_agents.config import load_config
    from market_agents.pipeline.workflow import Workflow
    from market_agents.sim.runner import run_to_dir

    monkeypatch.chdir(workdir)
    workflow = Workflow({})
    cell = SimpleNamespace(design="pilot_openai", cell="share_25", seed="0002")
    gate = workflow.live_gate(cell)  # no run yet: the gate it waits for
    run = run_dir("pilot_openai", "share_25", 2)
    run_to_dir(load_config(workdir / "config" / "baseline.yaml", ["simulation.ticks=60"]), 2, run,
               progress=False)
    assert workflow.live_gate(cell) == gate  # today's code: nothing to say
    made_by(run, usd=0.0)
    assert workflow.live_gate(cell) == gate  # a free one is not refused here
    made_by(run, usd=0.25)
    with pytest.raises(StaleRun, match=r"seed0002: a paid run \(0\.2500 USD\) made by other "
                                       r"code \(abababababababab; now [0-9a-f]{16}\)"):
        workflow.live_gate(cell)


@pytest.mark.slow(46)
def test_a_changed_engine_plans_the_free_runs_again_end_to_end(workdir, tmp_path):
    """The same, through Snakemake with nothing patched: once the design is made its target has
    nothing to do; in an environment whose engine differs (an installed plug-in's module is
    part of the code fingerprint: sim/fingerprint.plugin_files) a dry run plans every batch of
    free runs and the gather again, and the real run replaces the runs of the other code."""
    import re
    import subprocess
    import sys

    from tests.support.workflow import env, smk
    from tests.test_example_plugin import install

    def jobs(out):
        return dict(re.findall(r"^(simulate|gather)\s+(\d+)$", out.stdout + out.stderr, re.M))

    made = smk(workdir, "--cores", "2", "exploratory")
    assert made.returncode == 0, made.stderr[-3000:]
    same = smk(workdir, "-n", "exploratory")
    assert same.returncode == 0 and "Nothing to be done" in same.stdout + same.stderr
    plugged = {"PYTHONPATH": install(tmp_path / "site")["PYTHONPATH"]}
    dry = smk(workdir, "-n", "exploratory", **plugged)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert jobs(dry) == {"simulate": "1", "gather": "1"}  # share_0 and share_25, seeds 1-2
    again = smk(workdir, "--cores", "2", "exploratory", **plugged)
    assert again.returncode == 0, again.stderr[-3000:]
    code = subprocess.run([sys.executable, "-c", "from market_agents.sim.fingerprint import "
                           "fingerprint; print(fingerprint())"], env=env(**plugged),
                          capture_output=True, text=True, check=True).stdout.strip()
    assert code != fingerprint()
    for cell in ("share_0", "share_25"):
        for seed in (1, 2):
            run = workdir / run_dir("exploratory", cell, seed)
            assert json.loads((run / "manifest.json").read_text())["code_fingerprint"] == code
    [record] = (workdir / "results/runs/exploratory").glob("runs_*.json")
    log = workdir / "results/logs/simulate/runs/exploratory" / f"{record.stem}.log"
    assert [line.split()[0] for line in log.read_text().splitlines()] == [
        "replaced"] * 4 + ["wrote"]  # the old runs' record went with them

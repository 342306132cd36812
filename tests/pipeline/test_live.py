"""The live pilot on the local fake OpenAI server, killed with SIGKILL halfway and resumed by the
same command (tests/pipeline/test_resume.py kills a live design at more moments): no paid
request reaches the server again, outcomes.parquet equals an uninterrupted run's, the pilot
manifest is written, and a re-approval by the budget gate re-runs no finished live run. After the
pilot, a confirmatory tier runs behind the freeze and is refused once its base config changes."""

import json
import os
import re
import shutil
import signal
import subprocess
import time

import polars as pl
import pytest

from market_agents.testing.fakeserver import FakeAPI
from tests.support import procs
from tests.support.workflow import BIN, ROOT, env, smk, smk_cmd

GATHERED = "results/runs/pilot_openai/outcomes.parquet"
GATE = "results/manifests/budget/pilot_openai_all.json"
LIVE = [f"results/runs/pilot_openai/share_25/seed{s:04d}/manifest.json" for s in (1, 2, 3)]


def _project(path):
    shutil.copytree(ROOT / "config", path / "config")
    return path


@pytest.mark.slow(165)
def test_kill_resume_pilot_and_reapproval(tmp_path):
    clean = _project(tmp_path / "clean")
    with FakeAPI(latency_s=0.01) as api:
        keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        done = smk(clean, "--cores", "2", "pilot", **keys)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert len(api.requests) == 75  # 5 LLM agents x 5 decisions x 3 seeds
        # Two LLM agents with the same view in the same tick send byte-identical requests
        # concurrently, so a request can legitimately appear twice in one uninterrupted run.
        clean_seen = dict(api.seen)
    expected = pl.read_parquet(clean / GATHERED)
    # api=1 (default profile): the live runs never overlapped, though 2 cores were free.
    spans = sorted((m.stat().st_mtime - json.loads(m.read_text())["wall_time_s"], m.stat().st_mtime)
                   for m in (clean / r for r in LIVE))
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))
    pilot = json.loads((clean / "results/manifests/pilot.json").read_text())
    assert pilot["decisions"] == 75 and set(pilot["criteria"]) == {
        "validity", "failures", "cost_per_decision", "no_budget_halts"}
    assert pilot["sigma_d"]["share_25"]["n_pairs"] == 3
    _confirmatory_t1_behind_the_freeze(clean)

    killed = _project(tmp_path / "killed")
    with FakeAPI(latency_s=0.01) as api:
        keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        proc = procs.popen(smk_cmd("--cores", "2", "pilot"), cwd=killed, env=env(**keys),
                           start_new_session=True)
        deadline = time.monotonic() + 240
        # Live runs are serialized (api=1): kill as soon as the first one is complete.
        while not any((killed / r).exists() for r in LIVE):
            assert proc.poll() is None and time.monotonic() < deadline, "run ended before a kill"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert 1 <= sum((killed / r).exists() for r in LIVE) < 3
        paid_before = len(api.requests)

        # the same command again, no `--unlock`: the dead run's lock is released by itself
        resumed = smk(killed, "--cores", "2", "pilot", **keys)
        assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
        assert f"released the lock of snakemake pid {proc.pid} " in resumed.stderr
        # Exactly the requests of the uninterrupted run, none again: the cache served what the
        # killed run had paid for.
        assert dict(api.seen) == clean_seen, "a paid request was sent again after the kill"
        assert paid_before < 75

        # Re-approval: the gate runs again, no finished live run re-runs.
        stamps = {r: (killed / r).stat().st_mtime_ns for r in LIVE + [GATE]}
        again = smk(killed, "--cores", "2", "pilot", "--forcerun", "gate", **keys)
        assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
        jobs = again.stdout + again.stderr
        assert re.search(r"^gate\s+1$", jobs, re.M)  # the job stats table
        assert not re.search(r"^simulate_live\s+\d+$", jobs, re.M)
        assert (killed / GATE).stat().st_mtime_ns > stamps.pop(GATE)
        assert stamps == {r: (killed / r).stat().st_mtime_ns for r in LIVE}
        assert dict(api.seen) == clean_seen

    # A run whose files were complete but whose job Snakemake had not yet recorded is re-run
    # from the cache: same outcomes, only the serving bookkeeping differs (cache hits, and
    # nothing paid the second time).
    got = pl.read_parquet(killed / GATHERED)
    serving = ["llm_cached_hits", "llm_usd_spent"]
    assert got.drop(serving).equals(expected.drop(serving))
    replayed = got.filter(pl.col("llm_cached_hits") == 1.0)
    assert (replayed["llm_usd_spent"] == 0).all()


def _confirmatory_t1_behind_the_freeze(project):
    """Freeze after the pilot, run tier T1 live, then change the confirmatory base: refused."""
    design = project / "config/test/designs/confirmatory.yaml"
    sigma = smk(project, "--cores", "2", "sigma")  # the freeze confirms the fundamentals on it
    assert sigma.returncode == 0, sigma.stderr[-3000:]
    frozen = subprocess.run([str(BIN / "ma"), "freeze", "create", str(design.relative_to(
        project)), "--accept-failed-pilot"], cwd=project, env=env(), capture_output=True,
        text=True, timeout=60)  # the fake server's tokens are cheap: the cost criterion fails
    assert frozen.returncode == 0, frozen.stderr
    with FakeAPI() as api:
        keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        done = smk(project, "--cores", "2", "tier_T1", **keys)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert len(api.requests) == 50  # share_25: 5 agents x 5 decisions x 2 seeds
        gate = json.loads((project / "results/manifests/budget/confirmatory_T1.json").read_text())
        assert gate["freeze"] == "results/manifests/freeze.json"
        assert gate["approved"] == {"share_0": [101, 102, 103], "share_25": [101, 102]}

        design.write_text(design.read_text().replace("simulation.ticks: 120",
                                                     "simulation.ticks: 130"))
        refused = smk(project, "--cores", "1", "results/manifests/budget/confirmatory_T1.json",
                      **keys)
        assert refused.returncode != 0
        assert "freeze.json no longer matches: confirmatory config_hash" in (
            refused.stdout + refused.stderr)
        assert len(api.requests) == 50

        # With a deviation the gate approves and every live job of the next tier runs; the
        # deviation is logged once and carried by the gate manifest and each run manifest.
        reason = "deviation=ticks 130 after T1 (a test)"
        done = smk(project, "--cores", "2", "tier_T2", "--config", reason, **keys)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert len(api.requests) > 50  # the live runs of T2 (share_50) called
    log = (project / "results/manifests/deviations.jsonl").read_text().splitlines()
    assert len(log) == 1
    entry = json.loads(log[0])
    assert entry["reason"] == "ticks 130 after T1 (a test)"
    assert entry["mismatches"][0].startswith("confirmatory config_hash")
    gate = json.loads((project / "results/manifests/budget/confirmatory_T2.json").read_text())
    assert gate["deviations"] == [entry]
    for seed in (101, 102):
        run = project / f"results/runs/confirmatory/share_50/seed{seed:04d}/manifest.json"
        assert json.loads(run.read_text())["deviations"] == [entry]

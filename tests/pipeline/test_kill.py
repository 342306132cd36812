"""kill -9 (the whole process group) at 20 random moments of a small live Snakemake design,
then resume by running the same command (the holder guard releases a dead run's lock,
tests/pipeline/test_resume.py): the only requests sent again are those in flight at the
kills, the gathered outcomes equal an uninterrupted run's except the columns that say how
answers were served; then `--config replay=true` re-runs every live run from the cache with no
key and no call. (The kill helpers: tests/sim/test_kill.py.)"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from market_agents.testing.fakeserver import FakeAPI
from tests.sim.test_kill import CONCURRENCY, KILLS, account, kill_at_random_moment
from tests.support import ROOT, procs
from tests.support.workflow import env as wf_env
from tests.support.workflow import smk_cmd

GATHERED = "results/runs/live/outcomes.parquet"


def _project(path: Path, seeds: str) -> Path:
    shutil.copytree(ROOT / "config", path / "config")
    design = path / "config/test/designs/live.yaml"
    text = design.read_text().replace('seeds: "1-3"', f'seeds: "{seeds}"')
    design.write_text(text.replace("simulation.ticks: 120", "simulation.ticks: 45\n"
                                   "  simulation.decision_interval: 1").replace(
        "population.llm_share: 0.25", "population.llm_share: 0.4\n"
        f"  population.llm.max_concurrency: {CONCURRENCY}"))
    return path


def _smk(project: Path, api: FakeAPI, *args: str, **kw):
    keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
    return procs.popen(smk_cmd("--cores", "2", "--rerun-incomplete", *args), cwd=project,
                       env=wf_env(**keys), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       **kw)


@pytest.mark.slow(60)
def test_kill_a_small_live_design_at_random_moments_then_resume(tmp_path):
    rng = random.Random(11)
    seeds = "1-2"  # 8 LLM traders x 25 decisions x 2 seeds: 400 requests
    clean = _project(tmp_path / "clean", seeds)
    with FakeAPI(latency_s=0.03) as api:
        proc = _smk(clean, api, GATHERED)
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out[-3000:]
        n_clean = api.n_arrived
        assert n_clean == 400
    killed = _project(tmp_path / "killed", seeds)
    cache = killed / "results/cache/live.sqlite"
    with FakeAPI(latency_s=0.03) as api:
        in_flight: list[int] = []
        while len(in_flight) < KILLS:
            proc = _smk(killed, api, GATHERED, start_new_session=True)
            assert kill_at_random_moment(proc, api, rng), "the design ended before 20 kills"
            account(api, cache, in_flight)  # the lock a kill -9 leaves: the next run frees it
        proc = _smk(killed, api, GATHERED)
        log, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, log[-3000:]
        resent = api.n_arrived - n_clean
        assert resent == sum(in_flight), (resent, in_flight)
        serving = ["llm_cached_hits", "llm_usd_spent"]
        got = pl.read_parquet(killed / GATHERED).drop(serving)
        assert got.equals(pl.read_parquet(clean / GATHERED).drop(serving))
        # the workflow's switch: every live run again, from the cache, with no key
        n = api.n_arrived
        replay = procs.run(
            smk_cmd("--cores", "2", GATHERED, "--config", "replay=true", "--forcerun",
                    "simulate_live"), cwd=killed, timeout=900,
            env=wf_env(OPENAI_BASE_URL=f"{api.url}/v1"))
        assert replay.returncode == 0, (replay.stdout + replay.stderr)[-3000:]
        assert api.n_arrived == n
        again = pl.read_parquet(killed / GATHERED)
        assert again.drop(serving).equals(got) and (again["llm_cached_hits"] == 1.0).all()
    print(f"\nkill figures (snakemake live design, {KILLS} kills, max_concurrency "
          f"{CONCURRENCY}): requests {n_clean}, re-sent {resent}, in flight per kill "
          f"{in_flight}")

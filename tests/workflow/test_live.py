"""A live design on the local fake OpenAI server, killed with SIGKILL halfway and resumed:
no paid request reaches the server again and outcomes.parquet equals an uninterrupted run's."""

import os
import shutil
import signal
import subprocess
import time

import polars as pl
from wfhelp import ROOT, env, smk, smk_cmd

from market_agents.llm.fakeserver import FakeAPI

TARGET = "results/runs/live/outcomes.parquet"
RUNS = [f"results/runs/live/share_25/seed{s:04d}/manifest.json" for s in (1, 2, 3)]


def _project(path):
    shutil.copytree(ROOT / "config", path / "config")
    return path


def test_kill_and_resume_sends_no_request_twice(tmp_path):
    clean = _project(tmp_path / "clean")
    with FakeAPI(latency_s=0.01) as api:
        keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        done = smk(clean, "--cores", "2", TARGET, **keys)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert len(api.requests) == 75
        # Two LLM agents with the same view in the same tick send byte-identical requests
        # concurrently, so a request can legitimately appear twice in one uninterrupted run.
        clean_seen = dict(api.seen)
    expected = pl.read_parquet(clean / TARGET)

    killed = _project(tmp_path / "killed")
    with FakeAPI(latency_s=0.01) as api:
        keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        proc = subprocess.Popen(smk_cmd("--cores", "2", TARGET), cwd=killed, env=env(**keys),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        deadline = time.monotonic() + 240
        # Live runs are serialized (api=1): kill as soon as the first one is complete.
        while not any((killed / r).exists() for r in RUNS):
            assert proc.poll() is None and time.monotonic() < deadline, "run ended before a kill"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        finished = sum((killed / r).exists() for r in RUNS)
        assert 1 <= finished < 3
        paid_before = len(api.requests)

        stale = smk(killed, "--cores", "2", TARGET, **keys)
        assert stale.returncode != 0 and "--unlock" in stale.stdout + stale.stderr
        assert smk(killed, "--unlock", TARGET, **keys).returncode == 0
        resumed = smk(killed, "--cores", "2", TARGET, **keys)
        assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]

        # Exactly the requests of the uninterrupted run, none again: the cache served what the
        # killed run had paid for.
        assert dict(api.seen) == clean_seen, "a paid request was sent again after the kill"
        assert len(api.requests) == 75 and paid_before < 75
    # A run whose files were complete but whose job Snakemake had not yet recorded is re-run
    # from the cache: same outcomes, only the serving bookkeeping differs (cache hits, and
    # nothing paid the second time).
    got = pl.read_parquet(killed / TARGET)
    serving = ["llm_cached_hits", "llm_usd_spent"]
    assert got.drop(serving).equals(expected.drop(serving))
    replayed = got.filter(pl.col("llm_cached_hits") == 1.0)
    assert (replayed["llm_usd_spent"] == 0).all()

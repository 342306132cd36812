"""kill -9 at random moments of a live `ma run`, then resume: every answer received before a
kill is served from the cache, the only requests sent again are those in flight at the kill
(≤ max_concurrency), and the outcomes equal an uninterrupted run's except the columns that say
how answers were served. (The same for a live Snakemake design: tests/pipeline/test_kill.py.)

Kills are placed by events (the n-th request reaching the server, plus a random delay), not
by wall time alone, so they land while requests are in flight however loaded the machine is.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from market_agents.testing.fakeserver import FakeAPI
from tests.support import procs
from tests.support.liverun import env, ma_run, ma_run_cmd, stored, tables

KILLS = 20
CONCURRENCY = 4
# 8 LLM traders deciding every tick for 25 ticks: batches of 8 requests with 4 in flight
LIVE = {"simulation__ticks": 45, "simulation__burn_in": 20, "simulation__decision_interval": 1,
        "population__llm_share": 0.4, "population__llm__max_concurrency": CONCURRENCY}
SERVING = ("latency_s",)  # llm_decisions: how long the call took, not what was said


def kill_at_random_moment(proc: subprocess.Popen, api: FakeAPI, rng: random.Random) -> bool:
    """SIGKILL the process group once 1–4 more requests have reached the server (or, one time
    in four, after a random delay, wherever the process is, but before 8 more requests have
    arrived: on a fast machine a delay alone could outlast the run), plus 0–50 ms. False when
    the process finished first."""
    if rng.random() < 0.25:
        deadline = time.monotonic() + rng.uniform(0.2, 4.0)
        cap = api.n_arrived + 8
        while time.monotonic() < deadline and proc.poll() is None and api.n_arrived < cap:
            time.sleep(0.01)
    else:
        target = api.n_arrived + rng.randint(1, 4)
        while proc.poll() is None and not api.wait_for(target, timeout=0.05):
            pass
        time.sleep(rng.uniform(0, 0.05))
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def account(api: FakeAPI, cache: Path, in_flight: list[int]) -> None:
    """After a kill: requests the server received whose answer is not in the record were in
    flight (counted once the server has read all that the dead process had sent)."""
    assert api.wait_idle(300), "a connection of the killed process stayed open"
    lost = api.n_arrived - stored(cache) - sum(in_flight)
    in_flight.append(lost)
    assert 0 <= lost <= CONCURRENCY, f"kill {len(in_flight)}: {lost} answers lost"


@pytest.mark.slow
def test_kill_a_live_run_at_random_moments_then_resume(tmp_path):
    rng = random.Random(10)
    with FakeAPI(latency_s=0.03, jitter_s=0.03) as api:
        clean = ma_run(tmp_path / "clean", tmp_path / "clean_cache", api, **LIVE)
        assert clean.returncode == 0, clean.stderr[-3000:]
        n_clean = api.n_arrived
        assert n_clean == 200
    cache, out = tmp_path / "cache", tmp_path / "run"
    with FakeAPI(latency_s=0.03, jitter_s=0.03) as api:
        in_flight: list[int] = []
        while len(in_flight) < KILLS:
            proc = procs.popen(ma_run_cmd(out, cache, 1, **LIVE), env=env(api), cwd=tmp_path,
                               start_new_session=True)
            assert kill_at_random_moment(proc, api, rng), "the run ended before 20 kills"
            account(api, cache, in_flight)
            assert not out.exists()  # a killed run leaves no run directory
        done = ma_run(out, cache, api, **LIVE)
        assert done.returncode == 0, done.stderr[-3000:]
        resent = api.n_arrived - n_clean
    # the only requests sent again were those in flight at a kill; none answered was re-paid
    assert resent == sum(in_flight), (resent, in_flight)
    got, want = tables(out, SERVING), tables(tmp_path / "clean", SERVING)
    for name in want:
        assert got[name].equals(want[name]), name
    print(f"\nkill figures (ma run, {KILLS} kills, max_concurrency {CONCURRENCY}): requests "
          f"{n_clean}, re-sent {resent}, in flight per kill {in_flight}")

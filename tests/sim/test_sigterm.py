"""SIGTERM (a SLURM time limit or preemption, systemd stopping a unit) at random moments of a
live `ma run`, then the same command again: each SIGTERM exits 143 with one line, leaves no
pending claim and no run directory, every request that reached the server has its answer in
the record, and the resumed run sends no request a second time and equals an uninterrupted
run's tables except the columns that say how answers were served.

The moments are seeded and placed by events, not by wall time: the fake server holds its
answers from the k-th on until the test releases them, so each SIGTERM lands either while
answers are held at the server (calls in flight) or at a random point after they were
released, but always before the run could end, however loaded the machine is.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import threading

import pytest

from market_agents.llm.cache import ResponseCache
from market_agents.testing.fakeserver import FakeAPI, answer_text
from tests.support import procs
from tests.support.liverun import env, ma_run, ma_run_cmd, stored, tables

TRIES = 10
CONCURRENCY = 4
# 8 LLM traders deciding every tick for 25 ticks: batches of 8 requests with 4 in flight
LIVE = {"simulation__ticks": 45, "simulation__burn_in": 20, "simulation__decision_interval": 1,
        "population__llm_share": 0.4, "population__llm__max_concurrency": CONCURRENCY}
SERVING = ("latency_s",)  # llm_decisions: how long the call took, not what was said
# Every call here ends within milliseconds of its release; a grace far above that keeps a
# loaded machine from turning one into a cancelled call (tests/llm/test_interrupt.py covers
# the cancel at the grace's end)
GRACE = {"MARKET_AGENTS_STOP_GRACE_S": "300"}


class Gate:
    """The fake server's answers, held from the ``hold_from``-th answer on until released."""

    def __init__(self):
        self.cv = threading.Condition()
        self.calls = 0  # answers asked for so far
        self.held = 0  # answers waiting now
        self.hold_from = math.inf
        self.generation = 0

    def answer(self, body, digest):
        with self.cv:
            self.calls += 1
            if self.calls >= self.hold_from:
                mine = self.generation
                self.held += 1
                self.cv.notify_all()
                self.cv.wait_for(lambda: self.generation > mine)
                self.held -= 1
        return answer_text(body, digest)

    def hold(self, after: int) -> None:
        """Hold answers once ``after`` more have been asked for."""
        with self.cv:
            self.hold_from = self.calls + after

    def wait_held(self, proc: subprocess.Popen) -> None:
        with self.cv:
            while not self.cv.wait_for(lambda: self.held > 0, timeout=0.1):
                assert proc.poll() is None, "the run ended before an answer was held"

    def release(self, then_hold_after: float = math.inf) -> None:
        """Let the held answers go; hold again once ``then_hold_after`` more are asked for."""
        with self.cv:
            self.generation += 1
            self.hold_from = self.calls + then_hold_after
            self.cv.notify_all()


def terminate_at_random_moment(proc: subprocess.Popen, gate: Gate, rng: random.Random,
                               in_flight: bool) -> None:
    """SIGTERM the process group while answers are held (released right after), or at a
    random point after their release but before the next hold is passed."""
    gate.hold(rng.randint(1, 24))
    gate.wait_held(proc)  # a call is in flight: the run cannot end before the release
    if in_flight:
        threading.Event().wait(rng.uniform(0, 0.05))
        os.killpg(proc.pid, signal.SIGTERM)
        threading.Event().wait(rng.uniform(0, 0.1))  # the answers come during the drain
        gate.release()
        return
    gate.release(then_hold_after=rng.randint(2, 16))
    threading.Event().wait(rng.uniform(0, 0.3))  # simulating, calling, storing, or held again
    os.killpg(proc.pid, signal.SIGTERM)
    gate.release()


@pytest.mark.slow(30)  # CPU s on 2 cores: out of the quick subset
def test_sigterm_a_live_run_at_random_moments_then_resume(tmp_path):
    rng = random.Random(25)
    with FakeAPI(latency_s=0.01) as api:
        clean = ma_run(tmp_path / "clean", tmp_path / "clean_cache", api, **LIVE)
        assert clean.returncode == 0, clean.stderr[-3000:]
        n_clean = api.n_arrived
        assert n_clean == 200
    cache, out = tmp_path / "cache", tmp_path / "run"
    gate = Gate()
    with FakeAPI(latency_s=0.01, answer=gate.answer) as api:
        for i in range(TRIES):
            proc = procs.popen(ma_run_cmd(out, cache, 1, **LIVE), env=env(api, **GRACE),
                               cwd=tmp_path, start_new_session=True, stderr=subprocess.PIPE)
            terminate_at_random_moment(proc, gate, rng, in_flight=i % 2 == 0)
            err = proc.communicate(timeout=300)[1]
            assert proc.returncode == 143, (i, proc.returncode, err[-3000:])
            line = err.strip()
            assert len(line.splitlines()) == 1 and "Traceback" not in line, err[-3000:]
            assert line.startswith("ma run: terminated (SIGTERM)"), line
            assert api.wait_idle(300)
            c = ResponseCache(cache, readonly=True)
            claims, n_stored = c.claims(), len(c)
            c.close()
            assert claims == [], (i, claims)  # no pending claim left
            # every request that reached the server is in the record: none was lost in flight
            assert n_stored == api.n_arrived, (i, n_stored, api.n_arrived)
            assert not out.exists()
        before = api.n_arrived
        assert 0 < before < n_clean, before  # each try stopped a run midway
        done = ma_run(out, cache, api, **LIVE)
        assert done.returncode == 0, done.stderr[-3000:]
        sent = api.n_arrived
    # nothing answered was paid again: the server saw each request of the run exactly once
    assert sent == n_clean == stored(cache), (sent, n_clean)
    got, want = tables(out, SERVING), tables(tmp_path / "clean", SERVING)
    for name in want:
        assert got[name].equals(want[name]), name
    print(f"\nSIGTERM figures (ma run, {TRIES} tries, max_concurrency {CONCURRENCY}): "
          f"requests {n_clean}, sent over the tries and the resume {sent}, before the resume "
          f"{before}")


@pytest.mark.slow(5)  # CPU s on 2 cores: out of the quick subset
def test_sigterm_a_live_ma_cell_then_resume(workdir):
    """The same stop in a design's cell (`ma cell`, as a workflow job runs it): exit 143, no
    claim in the design's cache, the spend record unsettled at the run's worst case; the same
    command finishes the run and settles it, sending no request twice."""
    from market_agents.protocol import ledger
    from tests.support.workflow import BIN
    from tests.support.workflow import env as workflow_env

    gate = Gate()
    cmd = [str(BIN / "ma"), "cell", "config/test/designs/pilot_openai.yaml", "share_25",
           "--seed", "1"]
    cache = workdir / "results/cache/pilot_openai.sqlite"
    with FakeAPI(latency_s=0.01, answer=gate.answer) as api:
        keys = workflow_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"{api.url}/v1",
                            MARKET_AGENTS_GUARDS='{"designs_dir": "config/test/designs"}',
                            **GRACE)
        proc = procs.popen(cmd, cwd=workdir, env=keys, start_new_session=True,
                           stderr=subprocess.PIPE)
        terminate_at_random_moment(proc, gate, random.Random(4), in_flight=True)
        err = proc.communicate(timeout=300)[1]
        assert proc.returncode == 143, err[-3000:]
        assert err.strip().startswith("ma cell: terminated (SIGTERM)"), err[-3000:]
        assert api.wait_idle(300)
        c = ResponseCache(cache, readonly=True)
        assert c.claims() == [] and len(c) == api.n_arrived > 0
        c.close()
        spent = ledger.spend(workdir / "results")
        assert spent.unsettled_usd == 0.5  # the run's usd_cap: it might have paid that much
        done = subprocess.run(cmd, cwd=workdir, env=keys, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert api.n_arrived == stored(cache)  # no request was sent twice
    assert ledger.spend(workdir / "results").unsettled_usd == 0

"""Resume after a hard stop with the same command, and never two live invocations at once, on
the live test design (config/test/designs/live.yaml) against the local fake OpenAI server:

- the process group killed with SIGKILL at four moments, each time the same command again (no
  `--unlock`): it says it released the dead run's lock, finished runs are never re-run, no
  answer is paid twice beyond those in flight at a kill, and the outputs equal an uninterrupted
  run's except the columns that say how answers were served;
- a second invocation while one runs stops at once (exit 2) naming the holder, and sends
  nothing; a dry run meanwhile is still allowed;
- a lock left by a process on another host (simulated in .snakemake/holder.json) stays until
  released by hand, as the message says.

(The holder without Snakemake: tests/pipeline/test_holder.py.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from market_agents.pipeline.holder import read_holder
from market_agents.testing.fakeserver import FakeAPI, answer_text
from tests.support import ROOT, procs
from tests.support.workflow import env, smk, smk_cmd

TARGET = "results/runs/live/outcomes.parquet"
RUNS = [f"results/runs/live/share_25/seed{s:04d}" for s in (1, 2, 3)]
MARKET_TABLES = ("ticks", "trades", "orders", "agents")
SERVING = ["llm_cached_hits", "llm_usd_spent"]  # how answers were served, not what they were
# Each tick's decisions of the design's 5 LLM traders go out together (max_concurrency 8):
# at most that many requests are in flight when a run is killed.
IN_FLIGHT = 5
HOLDER = ".snakemake/holder.json"
WAIT_S = 600  # generous: the machine may be loaded; nothing here is timed


def _project(path: Path) -> Path:
    shutil.copytree(ROOT / "config", path / "config")
    return path


def _keys(api: FakeAPI) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{api.url}/v1", "OPENAI_API_KEY": "sk-test"}


def _start(project: Path, api: FakeAPI, log: Path, *args: str) -> procs.Process:
    """The command a user types, in its own process group (what a terminal's Ctrl-Z/kill sees)."""
    log.write_text("")
    return procs.popen(smk_cmd("--cores", "2", TARGET, *args), cwd=project,
                       env=env(**_keys(api)), stdout=log, stderr=subprocess.STDOUT,
                       start_new_session=True)


def _wait(proc: subprocess.Popen, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _snakemake_locked(project: Path) -> bool:
    return any((project / ".snakemake/locks").glob("*.lock"))


def _finished(project: Path) -> list[str]:
    return [r for r in RUNS if (project / r / "manifest.json").exists()]


def _market_tables(project: Path) -> dict[tuple[str, str], pl.DataFrame]:
    return {(r, t): pl.read_parquet(project / r / f"{t}.parquet")
            for r in RUNS for t in MARKET_TABLES}


@pytest.mark.slow(72)
def test_killed_at_four_moments_the_same_command_resumes(tmp_path):
    clean = _project(tmp_path / "clean")
    with FakeAPI(latency_s=0.01) as api:
        done = smk(clean, "--cores", "2", TARGET, timeout=WAIT_S, **_keys(api))
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        clean_seen = dict(api.seen)
    assert sum(clean_seen.values()) == 75  # 5 LLM traders x 5 decisions x 3 seeds
    assert "released the lock" not in done.stderr

    killed = _project(tmp_path / "killed")
    with FakeAPI(latency_s=0.01) as api:
        recorded: list[str] = []  # runs Snakemake had recorded as finished at a kill

        def halfway_through_a_tick() -> Callable[[], bool]:
            start = len(api.requests)
            return lambda: len(api.requests) >= start + 3

        def after_a_finished_run_the_next_pays() -> Callable[[], bool]:
            paid: list[int] = []

            def condition() -> bool:
                if not paid:
                    if not _finished(killed):
                        return False
                    paid.append(len(api.requests))
                    recorded.extend(_finished(killed))
                # live runs are serialized (api=1): requests now come from the next run,
                # which Snakemake started only after recording the finished one
                return len(api.requests) > paid[0]
            return condition

        moments = [  # (what, condition made at the start of the attempt)
            ("Snakemake has taken its lock", lambda: lambda: _snakemake_locked(killed)),
            ("a live run is halfway through a tick's requests", halfway_through_a_tick),
            ("one run is finished and the next one pays", after_a_finished_run_the_next_pays),
            ("every live run is finished (scoring, gathering)",
             lambda: lambda: len(_finished(killed)) == len(RUNS)),
        ]
        previous = None
        for i, (what, make_condition) in enumerate(moments):
            condition = make_condition()
            proc = _start(killed, api, tmp_path / f"attempt{i}.log")
            _wait(proc, lambda pid=proc.pid: _holds(killed, pid), f"attempt {i} holding it")
            _wait(proc, condition, what)
            _kill(proc)
            assert _snakemake_locked(killed), what  # what used to need `snakemake --unlock`
            _resumed_from(tmp_path / f"attempt{i}.log", previous)
            previous = proc.pid
        # (Snakemake touches a job's outputs before it records the job: stamp them now)
        kept = {r: (killed / r / "manifest.json").stat().st_mtime_ns for r in recorded}
        assert kept, "no run was finished at the third kill"

        proc = _start(killed, api, tmp_path / "final.log")
        assert proc.wait(WAIT_S) == 0, (tmp_path / "final.log").read_text()[-3000:]
        _resumed_from(tmp_path / "final.log", previous)
        assert not _snakemake_locked(killed)

        # every request of the uninterrupted run was made, and none paid twice but those in
        # flight at a kill
        assert all(api.seen[d] >= n for d, n in clean_seen.items())
        resent = sum(api.seen.values()) - sum(clean_seen.values())
        assert 0 <= resent <= IN_FLIGHT * len(moments), resent
        # runs finished before a kill were never re-run
        assert kept == {r: (killed / r / "manifest.json").stat().st_mtime_ns for r in kept}
        n = len(api.requests)
        again = smk(killed, "--cores", "2", TARGET, timeout=WAIT_S, **_keys(api))
        assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
        assert len(api.requests) == n

    got, expected = (pl.read_parquet(p / TARGET) for p in (killed, clean))
    assert got.drop(SERVING).equals(expected.drop(SERVING))
    ours, theirs = _market_tables(killed), _market_tables(clean)
    assert [k for k in ours if not ours[k].equals(theirs[k])] == []
    print(f"\nkills at {len(moments)} moments: {sum(clean_seen.values())} requests, "
          f"{resent} sent again")


def _holds(project: Path, pid: int) -> bool:
    """The invocation ``pid`` holds the directory and has taken Snakemake's lock."""
    holder = read_holder(project / HOLDER)
    return holder is not None and holder.pid == pid and _snakemake_locked(project)


def _resumed_from(log: Path, previous: int | None) -> None:
    """The attempt's output says, in one line, that it released the dead attempt's lock."""
    text = log.read_text()
    released = re.findall(r"^market_agents: released the lock of snakemake pid (\d+) .*"
                          r"which no longer runs; resuming$", text, re.M)
    assert released == ([] if previous is None else [str(previous)]), text[-3000:]
    assert "LockException" not in text and "--unlock" not in text


@pytest.mark.slow(42)
def test_a_second_invocation_stops_at_once_naming_the_holder(tmp_path):
    project = _project(tmp_path / "p")
    # the first invocation's answers wait until the second ones were refused: it is still
    # running then, however fast the machine is
    release = threading.Event()

    def held_answer(body, digest):
        release.wait(WAIT_S)
        return answer_text(body, digest)

    with FakeAPI(latency_s=0.01, answer=held_answer) as api, FakeAPI() as second_api:
        first = _start(project, api, tmp_path / "first.log")
        _wait(first, lambda: _holds(project, first.pid) and api.n_arrived > 0,
              "the first invocation paying for a live run")
        holder = read_holder(project / HOLDER)
        for args in (["--cores", "2", TARGET], ["--cores", "1", "pilot", "--forcerun", "gate"]):
            second = smk(project, *args, timeout=WAIT_S, **_keys(second_api))
            assert second.returncode == 2, (second.stdout + second.stderr)[-3000:]
            lines = [x for x in second.stderr.splitlines() if x.startswith("market_agents:")]
            assert lines == [f"market_agents: {project} is in use by snakemake pid {first.pid} "
                             f"on host {holder.host} (started {holder.started}, target {TARGET}"
                             "); wait for it to finish or stop it, then run the same command "
                             "again"], second.stderr[-3000:]
            assert "Traceback" not in second.stderr
        # a dry run takes no lock and is still allowed
        dry = smk(project, "-n", TARGET, timeout=WAIT_S, **_keys(second_api))
        assert dry.returncode == 0, (dry.stdout + dry.stderr)[-3000:]
        assert second_api.requests == [] and not second_api.seen
        assert read_holder(project / HOLDER) == holder
        release.set()
        # the first one was not disturbed
        assert first.wait(WAIT_S) == 0, (tmp_path / "first.log").read_text()[-3000:]
        assert sum(api.seen.values()) == 75 and not _snakemake_locked(project)


@pytest.mark.slow(56)
def test_a_lock_from_another_host_waits_for_a_manual_release(tmp_path):
    project = _project(tmp_path / "p")
    with FakeAPI(latency_s=0.01) as api:
        proc = _start(project, api, tmp_path / "killed.log")
        _wait(proc, lambda: _holds(project, proc.pid), "the run holding the directory")
        _kill(proc)
        # the same holder, as a node sharing this filesystem would have recorded it
        record = json.loads((project / HOLDER).read_text())
        (project / HOLDER).write_text(json.dumps(record | {"host": "node-b.cluster"}))
        n = len(api.seen)

        refused = smk(project, "--cores", "2", TARGET, timeout=WAIT_S, **_keys(api))
        assert refused.returncode == 2, (refused.stdout + refused.stderr)[-3000:]
        lines = [x for x in refused.stderr.splitlines() if x.startswith("market_agents:")]
        assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
        assert (f"locked by snakemake pid {proc.pid} on host node-b.cluster (started "
                f"{record['started']}, target {TARGET}); this host") in lines[0]
        assert lines[0].endswith("If it does not, release the lock by hand with "
                                 "`.venv/bin/snakemake --unlock` (or `make unlock`), then run "
                                 "the same command again")
        assert _snakemake_locked(project) and len(api.seen) == n

        # what the message says: release by hand, then the same command
        assert smk(project, "--unlock", TARGET, timeout=WAIT_S).returncode == 0
        done = smk(project, "--cores", "2", TARGET, timeout=WAIT_S, **_keys(api))
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert "market_agents:" not in done.stderr
        assert read_holder(project / HOLDER).host != "node-b.cluster"

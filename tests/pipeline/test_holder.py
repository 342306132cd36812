"""The directory holder without Snakemake: a flock held by a live process is never taken, a dead
holder's Snakemake lock is released, one from another host or with jobs still running is not,
and whatever holder.json holds never crashes the check. (The workflow end to end:
tests/pipeline/test_resume.py.)"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market_agents.pipeline import holder
from market_agents.pipeline.holder import TOKEN_ENV, DirectoryLocked, Holder, hold, jobs_of

HOLD = ("import sys; from pathlib import Path; from market_agents.pipeline.holder import hold; "
        "hold(sys.argv[2], Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()")


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    """hold() keeps its flock and exports its token for the process's life: undo both here."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    yield
    while holder._HELD:
        os.close(holder._HELD.popitem()[1])


def _holding(state: Path, target: str = "pilot") -> subprocess.Popen:
    """A process that holds ``state`` (until its stdin closes or it is killed)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(state), target],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "held\n"
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)


def _snakemake_lock(state: Path) -> Path:
    """A lock file as Snakemake's file persistence writes it."""
    (state / "locks").mkdir(parents=True, exist_ok=True)
    lock = state / "locks/0.output.lock"
    lock.write_text("/project/results/runs/live/outcomes.parquet\n")
    return lock


def test_a_free_directory_is_held_and_the_holder_recorded(tmp_path):
    state = tmp_path / ".snakemake"
    assert hold("pilot tier_T1", state) is None
    record = holder.read_holder(state / "holder.json")
    assert (record.pid, record.host, record.target) == (os.getpid(), socket.gethostname(),
                                                        "pilot tier_T1")
    assert os.environ[TOKEN_ENV] == record.token
    assert hold("pilot", state) is None  # held already by this very process: no clash
    assert holder.read_holder(state / "holder.json") == record


def test_a_live_holder_is_never_taken_over_and_is_named(tmp_path):
    state = tmp_path / ".snakemake"
    live = _holding(state, "tier_T1")
    try:
        lock = _snakemake_lock(state)
        started = holder.read_holder(state / "holder.json").started
        with pytest.raises(DirectoryLocked, match=rf"in use by snakemake pid {live.pid} on host "
                           rf".*\(started {re.escape(started)}, target tier_T1\)"):
            hold("pilot", state)
        assert lock.exists() and holder.read_holder(state / "holder.json").pid == live.pid
    finally:
        _kill(live)


def test_a_dead_holders_lock_is_released(tmp_path):
    state = tmp_path / ".snakemake"
    dead = _holding(state)
    _kill(dead)
    _snakemake_lock(state)
    note = hold("pilot", state)
    assert note.startswith(f"released the lock of snakemake pid {dead.pid} on host ")
    assert note.endswith("target pilot), which no longer runs; resuming")
    assert not (state / "locks").exists()
    assert holder.read_holder(state / "holder.json").pid == os.getpid()


def test_a_dead_holder_without_a_lock_left_needs_no_release(tmp_path):
    state = tmp_path / ".snakemake"
    _kill(_holding(state))
    assert hold("pilot", state) is None


def test_a_lock_from_another_host_is_left_and_the_message_says_how_to_release_it(tmp_path):
    state = tmp_path / ".snakemake"
    state.mkdir()
    other = Holder(4242, "node-b.cluster", "2026-01-05T09:30:00+01:00", "tier_T1")
    (state / "holder.json").write_text(json.dumps(other.__dict__))
    lock = _snakemake_lock(state)
    with pytest.raises(DirectoryLocked, match=r"locked by snakemake pid 4242 on host "
                       r"node-b.cluster \(started 2026-01-05T09:30:00\+01:00, target tier_T1\)"
                       r".*release the lock by hand with `.venv/bin/snakemake --unlock`"):
        hold("tier_T1", state)
    assert lock.exists()


def test_a_lock_nobody_recorded_is_left(tmp_path):
    state = tmp_path / ".snakemake"
    lock = _snakemake_lock(state)
    with pytest.raises(DirectoryLocked,
                       match="no invocation recorded.*`.venv/bin/snakemake --unlock`"):
        hold("pilot", state)
    assert lock.exists()


def test_jobs_of_a_killed_snakemake_keep_its_lock_until_they_end(tmp_path):
    """Only the snakemake process died (an OOM kill picks one process): its jobs, which carry
    its token, still run and may still pay; the lock is released once they are gone."""
    state = tmp_path / ".snakemake"
    dead = _holding(state)
    _kill(dead)
    _snakemake_lock(state)
    token = holder.read_holder(state / "holder.json").token
    job = subprocess.Popen([sys.executable, "-c", "import sys; print(1, flush=True); "
                            "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           env={**os.environ, TOKEN_ENV: token})
    try:
        # Popen returns once the exec began, when /proc/<pid>/environ may still read empty
        # (the new image's environment is set up after): wait until the job runs Python
        job.stdout.readline()
        assert jobs_of(token) == [job.pid]
        with pytest.raises(DirectoryLocked, match=rf"pid {dead.pid} .* was stopped, but its "
                           rf"jobs still run \(pid {job.pid}\)"):
            hold("pilot", state)
    finally:
        _kill(job)
    assert "released the lock" in hold("pilot", state)


def test_jobs_of_matches_the_whole_token_only(tmp_path):
    proc = tmp_path / "proc"
    for pid, env in {"11": b"A=1\0MARKET_AGENTS_HOLDER=h:1:t\0", "12": b"MARKET_AGENTS_HOLDER"
                     b"=h:1:t2\0", "13": b"", "self": b"MARKET_AGENTS_HOLDER=h:1:t\0"}.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "environ").write_bytes(env)
    assert jobs_of("h:1:t", proc) == [11]
    assert jobs_of("h:1:t", tmp_path / "no-proc") == []


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=200) | st.builds(
    lambda d: json.dumps(d).encode(),
    st.dictionaries(st.sampled_from(["pid", "host", "started", "target", "x"]),
                    st.one_of(st.integers(), st.text(max_size=12), st.none()))),
    locked=st.booleans())
def test_whatever_holder_json_holds_the_check_never_crashes(tmp_path_factory, content, locked):
    """A record that cannot be read is no record: with a Snakemake lock left the directory is
    refused with the manual step; without one it is held. A record that can be read names a
    dead process on this host (released) or another host (refused)."""
    state = tmp_path_factory.mktemp("p") / ".snakemake"
    state.mkdir()
    (state / "holder.json").write_bytes(content)
    previous = holder.read_holder(state / "holder.json")
    if locked:
        _snakemake_lock(state)
    try:
        note = hold("pilot", state)
    except DirectoryLocked as exc:
        assert locked and "snakemake --unlock" in str(exc)
        assert previous is None or previous.host != socket.gethostname()
    else:
        assert (note is not None) == locked
        assert not (state / "locks").exists()
        assert holder.read_holder(state / "holder.json").pid == os.getpid()
    finally:
        while holder._HELD:
            os.close(holder._HELD.popitem()[1])

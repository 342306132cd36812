"""One live workflow invocation per project directory, and the lock of a killed one released
by itself (docs/resume.md: after a kill, run the same command again).

Snakemake guards a directory with lock files under ``.snakemake/locks/``. A hard stop (kill -9,
an out-of-memory kill, a reboot, a preempted job) leaves them behind, and Snakemake cannot tell
them from a live invocation's: the next run fails until ``.venv/bin/snakemake --unlock``. Here
every invocation that runs jobs also holds an OS lock (``flock``) on ``.snakemake/holder.json`` for
its whole life and writes there who it is (pid, host, start time, target). The kernel drops a
flock the moment its process dies, however it dies, so the next invocation knows:

- the flock is held: the holder is alive; stop (exit 2) naming its pid, start time and target;
- the flock is free, Snakemake's lock files remain, the recorded holder ran on this host, and
  neither it nor any of its jobs still runs: the lock is stale; release it and go on (one line);
- the recorded holder ran on another host (a shared filesystem, where flock may not reach
  across hosts): this host cannot tell; stop, saying how to release the lock by hand.

Jobs of a holder whose snakemake alone was killed (an OOM kill picks one process) still run and
still spend: the holder exports a token (``MARKET_AGENTS_HOLDER``) that its jobs inherit, and a
lock is stale only when no process carrying it is left (found through ``/proc``; where there is
no ``/proc``, only the snakemake process is checked).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from market_agents.errors import MarketAgentsError
from market_agents.inputs import HOLDER_ENV

STATE_DIR = Path(".snakemake")  # Snakemake's own state directory, relative to the workdir
HOLDER_FILE = "holder.json"
LOCKS_DIR = "locks"  # where Snakemake's file persistence keeps its lock files
TOKEN_ENV = HOLDER_ENV  # its jobs inherit it (a spend record carries it too)
UNLOCK = "`.venv/bin/snakemake --unlock` (or `make unlock`)"
_HELD: dict[Path, int] = {}  # holder file -> the descriptor whose flock lasts this process


class DirectoryLocked(MarketAgentsError):
    """Another invocation holds the directory, or may: the message says which and what to do."""


@dataclass(frozen=True)
class Holder:
    """The invocation that holds a project directory.

    Args:
        pid: its snakemake process.
        host: ``socket.gethostname()`` where it runs.
        started: local start time, ISO 8601 to the second with its UTC offset.
        target: the targets it was asked for, space separated.
    """

    pid: int
    host: str
    started: str
    target: str

    @property
    def token(self) -> str:
        """What its jobs carry in ``MARKET_AGENTS_HOLDER`` (unique per invocation)."""
        return f"{self.host}:{self.pid}:{self.started}"

    def describe(self) -> str:
        """The holder in words, for the message that refuses a second invocation."""
        return (f"snakemake pid {self.pid} on host {self.host} (started {self.started}, "
                f"target {self.target})")


def read_holder(path: Path) -> Holder | None:
    """The holder recorded in ``path``; None when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text())
        return Holder(int(data["pid"]), str(data["host"]), str(data["started"]),
                      str(data["target"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def hold(target: str, state_dir: Path = STATE_DIR) -> str | None:
    """Hold the project directory for the rest of this process's life (see the module doc).

    Args:
        target: what this invocation was asked for (recorded, and named to a second one).
        state_dir: Snakemake's state directory (``.snakemake`` of the working directory).

    Returns:
        The line to print when a stale Snakemake lock was released, or when this filesystem
        has no flock (then only Snakemake's own lock guards the directory); else None.

    Raises:
        DirectoryLocked: a live invocation holds the directory, or one on another host may, or
            the jobs of a killed one still run; the message names it and what to do.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    path = (state_dir / HOLDER_FILE).resolve()
    if path in _HELD:  # this process holds it already (a second flock here would clash)
        return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _live_holder(path)
        who = holder.describe() if holder else f"another snakemake (unreadable {path})"
        raise DirectoryLocked(f"{path.parent.parent} is in use by {who}; wait for it to "
                              "finish or stop it, then run the same command again") from None
    except OSError as exc:  # e.g. a network filesystem without flock
        os.close(fd)
        return (f"cannot lock {path} ({exc.strerror}): a killed run's lock is not released "
                f"by itself here; use {UNLOCK} once no snakemake runs")
    me = Holder(os.getpid(), socket.gethostname(),
                datetime.now().astimezone().isoformat(timespec="seconds"), target)
    try:
        note = _release_if_stale(state_dir, read_holder(path), me.host)
    except DirectoryLocked:
        os.close(fd)
        raise
    # In place, never by rename: the flock belongs to this file, not to its name.
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(asdict(me), indent=1) + "\n").encode(), 0)
    os.fsync(fd)
    _HELD[path] = fd
    os.environ[TOKEN_ENV] = me.token  # inherited by every job this invocation starts
    return note


def held(state_dir: Path = STATE_DIR) -> Holder | str | None:
    """Who holds the project directory of ``state_dir`` now, without holding it: the live
    invocation's record (a string naming the file when it cannot be read), or None when no
    invocation holds it (or this filesystem has no flock). Takes a shared flock for an
    instant: a live holder's exclusive one refuses it."""
    path = state_dir / HOLDER_FILE
    if not path.exists() or path.resolve() in _HELD:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _live_holder(path) or f"another snakemake (unreadable {path})"
    except OSError:
        return None
    finally:
        os.close(fd)  # closing drops the shared flock at once
    return None


def _live_holder(path: Path) -> Holder | None:
    """The record of the process holding the flock. It writes the record right after taking
    the lock, so for a moment the file may still name its dead predecessor: wait for it."""
    holder = None
    for _ in range(100):
        holder = read_holder(path)
        if holder is not None and (holder.host != socket.gethostname() or _alive(holder.pid)):
            return holder
        time.sleep(0.05)
    return holder


def _release_if_stale(state_dir: Path, previous: Holder | None, host: str) -> str | None:
    """Release Snakemake's lock when its holder is gone (this process holds the flock)."""
    locks = state_dir / LOCKS_DIR
    if not any(locks.glob("*.lock")):
        return None
    if previous is None:
        raise DirectoryLocked(
            f"{locks} holds a Snakemake lock that no invocation recorded in "
            f"{state_dir / HOLDER_FILE}; if no snakemake runs in this directory, release it "
            f"by hand with {UNLOCK}, then run the same command again")
    if previous.host != host:
        raise DirectoryLocked(
            f"the directory is locked by {previous.describe()}; this host ({host}) cannot tell "
            f"whether it still runs. If it does not, release the lock by hand with {UNLOCK}, "
            "then run the same command again")
    jobs = jobs_of(previous.token)
    if jobs:
        raise DirectoryLocked(
            f"{previous.describe()} was stopped, but its jobs still run (pid "
            f"{', '.join(map(str, jobs))}); wait for them to end or stop them, then run the "
            "same command again")
    shutil.rmtree(locks)  # what `snakemake --unlock` does with its file persistence
    return f"released the lock of {previous.describe()}, which no longer runs; resuming"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def jobs_of(token: str, proc: Path = Path("/proc")) -> list[int]:
    """Pids of the processes (readable by this user) started under holder ``token``: their
    environment carries ``MARKET_AGENTS_HOLDER=token``. Empty where there is no ``/proc``."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def guard(workflow: Any) -> None:
    """Make this Snakemake invocation hold its directory before it takes Snakemake's lock;
    called once from ``rules/common.smk`` with Snakemake's ``workflow``.

    Snakemake 9 offers no hook between reading the Snakefile and taking its lock (``onstart``
    runs after the lock), and it reads the Snakefile first. So this wraps the invocation's
    ``Workflow.execute``, the one call that takes the lock and runs jobs: dry runs,
    ``--unlock``, ``--rulegraph``, ``--summary`` and the like never reach it, nor do jobs that
    Snakemake starts itself (cluster and group jobs, with ``--nolock``). A refusal prints one
    line and exits 2.
    """
    execute = workflow.execute

    def execute_holding(*args: Any, **kwargs: Any) -> Any:
        if _takes_the_lock(workflow, kwargs["executor_plugin"]):
            targets = workflow.dag_settings.targets or [workflow.default_target]
            try:
                note = hold(" ".join(sorted(map(str, targets))))
            except DirectoryLocked as exc:
                print(f"market_agents: {exc}", file=sys.stderr, flush=True)
                raise SystemExit(2) from None
            if note:
                print(f"market_agents: {note}", file=sys.stderr, flush=True)
        return execute(*args, **kwargs)

    workflow.execute = execute_holding


def _takes_the_lock(workflow: Any, executor_plugin: Any) -> bool:
    # the user's invocation (not a job Snakemake started itself), not --nolock, not a dry run
    return (not workflow.remote_exec and not workflow.subprocess_exec
            and workflow.execution_settings.lock
            and not executor_plugin.common_settings.dryrun_exec)

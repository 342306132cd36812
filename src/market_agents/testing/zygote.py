"""A fork server for tests that start many processes: one process imports the libraries once,
then forks each command, a Python program (``python -m MODULE ARGS`` or a script such as
``.venv/bin/snakemake ARGS``) that runs from there on.

Starting Python is most of what such a test pays: ``import openai`` and ``import anthropic``
are 0.5 and 1.2 CPU s of every live ``ma`` process; Snakemake's command line (its imports and
its registries of installed plugins) and the Snakefile's imports are 0.75 of the 1.0 CPU s of a
dry run. A forked child is still a process of its own, with the command's
argv, working directory, environment, output streams, session (``start_new_session``), signals
and exit status, and it ends through the interpreter's normal exit; only the imports of its
:data:`preload <Zygote>` list were done before the fork. A command runs as ``__main__``
through :func:`runpy.run_module` (as under ``python -m``) or :func:`runpy.run_path` (as its
interpreter runs a script). What differs from a new interpreter: what the preloaded modules
computed at import saw the zygote's environment and directory (Snakemake logs the directory it
was imported in as its "Run directory"), and every child of one zygote shares its string-hash
seed (``PYTHONHASHSEED``); the processes the child starts (Snakemake's jobs) are new
interpreters.

polars is never preloaded: it starts threads at import, and a fork of a process with threads
may deadlock (the zygote refuses to start with a thread running). ``faults/run.py`` and the
tests' process helpers (``tests/support/procs.py``) use it, each with its list of modules;
``tests/test_zygote.py`` checks that a forked command and a new interpreter leave the same
files, lines and exit statuses.

    python -m market_agents.testing.zygote MODULE[:FUNCTION]...   # preload, then serve

Requests are JSON lines on the server's stdin; it answers ``start <id> <pid>`` (written by the
child once its session and streams are in place) and ``exit <id> <code>`` (the code as
:mod:`subprocess` reports it: negative for a signal) on its stdout.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import random
import runpy
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

# Where a child's stream goes: subprocess.DEVNULL, subprocess.PIPE (kept in a file the parent
# reads once the child has ended), subprocess.STDOUT (stderr only), or a file path.
Stream = int | str | Path


class Child:
    """A forked command, used as a :class:`subprocess.Popen` is: ``pid``, ``returncode``,
    :meth:`poll`, :meth:`wait`, :meth:`communicate` (text), :meth:`send_signal`,
    :meth:`terminate`, :meth:`kill`."""

    def __init__(self, args: list[str], pid: int, exit_code: Future, capture: Path | None,
                 captured: tuple[bool, bool]) -> None:
        self.args, self.pid, self.returncode = args, pid, None
        self._exit, self._capture, self._captured = exit_code, capture, captured

    def poll(self) -> int | None:
        """The exit code once the child has ended and been reaped, else None."""
        if self._exit.done():
            self.returncode = self._exit.result()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds for the child's end; its exit code.

        Raises: subprocess.TimeoutExpired.
        """
        try:
            self.returncode = self._exit.result(timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        """Wait for the end; the captured stdout and stderr as text (None where not PIPE).

        Raises: subprocess.TimeoutExpired.
        """
        self.wait(timeout)
        if self._capture is None:
            return None, None
        out = tuple(
            (self._capture / name).read_text(encoding="utf-8", errors="replace") if kept
            else None for name, kept in zip(("stdout", "stderr"), self._captured, strict=True))
        shutil.rmtree(self._capture, ignore_errors=True)
        self._capture = None
        return out  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child (nothing once it has been reaped)."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM the child."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the child."""
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The client of one fork server that has imported ``preload`` (module names).

    Args:
        preload: the modules to import once, before any fork (never polars); ``module:function``
            also calls ``function()``, to fill a cache that every child would fill alike.
        env: the server's own environment (default: this process's), which the preloaded
            modules see at import.

    :meth:`popen` and :meth:`run` may be called from several threads.
    """

    def __init__(self, preload: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)  # what the preloads saw
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, *preload],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env)
        self.lock = threading.Lock()
        self.ids = itertools.count()
        self.pending: dict[str, dict[str, Future]] = {}  # id -> its start and exit
        threading.Thread(target=self._replies, daemon=True).start()

    def _replies(self) -> None:
        for line in self.proc.stdout:
            kind, key, value = line.decode().split()
            with self.lock:
                futures = self.pending.get(key)
                if kind == "exit":
                    self.pending.pop(key, None)
            if futures is None:
                continue
            if kind == "exit" and not futures["start"].done():  # it failed in its set-up
                futures["start"].set_exception(RuntimeError(
                    f"the forked child ended (exit {value}) before it started; its error is "
                    "above"))
            futures[kind].set_result(int(value))
        with self.lock:  # the server is gone: nothing pending will be answered
            for futures in self.pending.values():
                for f in futures.values():
                    if not f.done():
                        f.set_exception(RuntimeError("the zygote ended (its error is above)"))

    def popen(self, argv: Sequence[str | Path], *, cwd: str | Path, env: dict[str, str],
              stdout: Stream = subprocess.DEVNULL, stderr: Stream = subprocess.DEVNULL,
              start_new_session: bool = False, start_timeout: float = 60) -> Child:
        """Fork the command ``argv`` (``[sys.executable, "-m", MODULE, *args]`` or
        ``[SCRIPT, *args]``, SCRIPT a Python file) in ``cwd`` with exactly ``env``; returns
        once the child is in place (its session started, its streams open), as Popen returns
        once the new program runs.

        Raises: ValueError (another interpreter, or ``-m`` without a module); TimeoutError
        when the server does not fork it within ``start_timeout`` s.
        """
        argv = [str(a) for a in argv]
        if argv[0] == sys.executable and (len(argv) < 3 or argv[1] != "-m"):
            raise ValueError(f"the fork server runs `python -m MODULE` or a script: {argv[:3]}")
        if Path(argv[0]).name.startswith("python") and argv[0] != sys.executable:
            raise ValueError(f"the fork server runs its own interpreter only: {argv[0]}")
        key = str(next(self.ids))
        capture = Path(tempfile.mkdtemp(prefix="zygote-out-")) \
            if subprocess.PIPE in (stdout, stderr) else None
        paths = [str(capture / name) if s == subprocess.PIPE else
                 os.devnull if s == subprocess.DEVNULL else
                 "&1" if s == subprocess.STDOUT else str(s)
                 for name, s in (("stdout", stdout), ("stderr", stderr))]
        futures = {"start": Future(), "exit": Future()}
        request = {"id": key, "argv": argv, "cwd": str(cwd),
                   "env": env, "stdout": paths[0], "stderr": paths[1],
                   "session": start_new_session}
        with self.lock:
            self.pending[key] = futures
            try:
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                raise RuntimeError("the zygote ended (its error is above)") from None
        pid = futures["start"].result(start_timeout)
        child = Child(argv, pid, futures["exit"], capture,
                      (stdout == subprocess.PIPE, stderr == subprocess.PIPE))
        if capture is not None:  # what nobody read (a killed child's) goes with the handle
            weakref.finalize(child, shutil.rmtree, capture, True)
        return child

    def run(self, argv: Sequence[str | Path], *, cwd: str | Path, env: dict[str, str],
            timeout: float | None = None) -> subprocess.CompletedProcess:
        """The command ``argv`` forked (see :meth:`popen`), as ``subprocess.run(argv, ...,
        capture_output=True, text=True, timeout=timeout)`` would run it; on a timeout the
        child is killed.

        Raises: subprocess.TimeoutExpired; what :meth:`popen` raises.
        """
        child = self.popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        try:
            out, err = child.communicate(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate(60)
            raise
        return subprocess.CompletedProcess(child.args, child.returncode, out, err)

    def close(self) -> None:
        """End the server: it waits up to a minute for its children, then exits (or is
        killed, leaving a child that still runs to itself)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def serve(preload: Sequence[str]) -> dict[str, Any] | None:
    """The server: import ``preload``, then fork a child per request until stdin ends.

    Returns:
        The request, in a forked child (which then becomes the command); None in the server
        once stdin has ended and every child has been reaped.
    """
    for name in preload:
        module, _, warm = name.partition(":")
        found = importlib.import_module(module)
        if warm:  # a cache every child would fill the same way (Snakemake's plugin registries)
            getattr(found, warm)()
    if "polars" in sys.modules:  # its threads would not survive the fork
        raise SystemExit(f"{__name__}: the preloaded modules imported polars")
    if threading.active_count() > 1 or (
            os.path.isdir("/proc/self/task") and len(os.listdir("/proc/self/task")) > 1):
        raise SystemExit(f"{__name__}: a thread was started before the forks")
    requests, replies = sys.stdin.fileno(), sys.stdout.fileno()
    pending, eof = b"", False
    children: dict[int, tuple[int, str]] = {}  # pidfd (or pid) -> (pid, the request's id)
    pidfd = hasattr(os, "pidfd_open")  # Linux: a child's end wakes select; else poll
    while not eof or children:
        waits = ([] if eof else [requests]) + (list(children) if pidfd else [])
        ready = select.select(waits, [], [], None if pidfd else 0.02)[0]
        if requests in ready:
            chunk = os.read(requests, 1 << 16)
            eof = not chunk
            pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                for fd in children if pidfd else ():
                    os.close(fd)
                os.close(requests)
                return request
            children[os.pidfd_open(pid) if pidfd else pid] = (pid, request["id"])
        for handle in [h for h in children if not pidfd or h in ready]:
            pid, key = children[handle]
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            del children[handle]
            if pidfd:
                os.close(handle)
            os.write(replies, f"exit {key} {os.waitstatus_to_exitcode(status)}\n".encode())
    return None


def become(request: dict[str, Any]) -> None:
    """In the forked child: take the request's session, directory, environment and streams,
    say ``start``, then run its module as ``__main__`` (its exit is the child's)."""
    replies = sys.stdout.fileno()
    if request["session"]:
        os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    reply_copy = os.dup(replies)  # fd 1 becomes the command's stdout below
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        if path == "&1":
            os.dup2(1, fd)
            continue
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(f, fd)
        os.close(f)
    os.write(reply_copy, f"start {request['id']} {os.getpid()}\n".encode())
    os.close(reply_copy)
    random.seed()  # as a new interpreter would seed it
    argv = request["argv"]
    if argv[0] == sys.executable:  # python -m MODULE ARGS: runpy sets argv[0] as -m does
        sys.argv = argv[2:]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    else:  # SCRIPT ARGS
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    forked = serve(sys.argv[1:])
    if forked is not None:
        become(forked)

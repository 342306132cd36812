"""The processes the tests start, forked from a fork server that has imported what they
import (``market_agents.testing.zygote``): a Snakemake invocation or a live ``ma`` then costs
its own work, not an interpreter's start (0.75 CPU s of every Snakemake invocation, 0.5-1.7 CPU s
of every live ``ma``). Each is still its own process, with its argv, directory, environment,
streams, session and exit status; ``tests/test_zygote.py`` checks it leaves what a new
interpreter leaves. The processes those start (Snakemake's jobs) are new interpreters, and a
command whose environment changes what an interpreter reads as it starts (``PYTHONPATH``,
``PYTHONPROFILEIMPORTTIME``, the BLAS threads) gets a new interpreter too.

    proc = procs.popen(smk_cmd("--cores", "2", "pilot"), cwd=..., env=..., start_new_session=True)
    done = procs.run(ma_run_cmd(...), cwd=..., env=..., timeout=600)
"""

from __future__ import annotations

import atexit
import functools
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from faults.run import PRELOAD as LIVE_PRELOAD  # what a live `ma` imports

from market_agents.testing.zygote import Child, Stream, Zygote

BIN = Path(sys.executable).parent
# What every Snakemake invocation imports and builds before it runs a job: Snakemake's command
# line (its argument parser fills the registries of the installed plugins, a fifth of a dry
# run) and what the Snakefile imports; the package first, which keeps numpy's BLAS to one thread
# (a thread started before the forks makes the server refuse).
WORKFLOW_PRELOAD = ("market_agents", "snakemake.cli:get_argument_parser",
                    "market_agents.pipeline.workflow", "market_agents.pipeline.holder",
                    "market_agents.protocol.tiers")
SERVERS = {str(BIN / "snakemake"): WORKFLOW_PRELOAD, str(BIN / "ma"): LIVE_PRELOAD,
           "market_agents.cli": LIVE_PRELOAD}
# Read by the interpreter or a library as it starts: a forked child would keep the server's.
START_UP = ("PYTHON", "OPENBLAS_", "OMP_", "MKL_")
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
Process = Child | subprocess.Popen  # what popen returns: both are used alike


@functools.cache
def zygote(preload: tuple[str, ...]) -> Zygote:
    """This process's fork server for ``preload``, started on first use (with no provider key
    or URL in its own environment) and ended at exit."""
    z = Zygote(preload, env=server_env())
    atexit.register(z.close)
    return z


def server_env() -> dict[str, str]:
    """The fork servers' own environment: this process's, without provider keys and URLs."""
    return {k: v for k, v in os.environ.items() if k not in KEYS}


def forked(cmd: Sequence[str | Path], env: dict[str, str]) -> Zygote | None:
    """The fork server for ``cmd`` (``.venv/bin/snakemake``, ``.venv/bin/ma`` or
    ``python -m market_agents.cli``), or None: another command, or an environment that differs
    from the server's in what an interpreter reads as it starts."""
    argv = [str(c) for c in cmd]
    key = argv[2] if argv[:2] == [sys.executable, "-m"] and len(argv) > 2 else argv[0]
    if key not in SERVERS:
        return None
    server = zygote(SERVERS[key])
    differs = any(env.get(k) != server.env.get(k) for k in {*env, *server.env}
                  if k.startswith(START_UP))
    return None if differs else server


def popen(cmd: Sequence[str | Path], *, cwd: str | Path, env: dict[str, str],
          stdout: Stream = subprocess.DEVNULL, stderr: Stream = subprocess.DEVNULL,
          start_new_session: bool = False) -> Process:
    """``subprocess.Popen(cmd, ..., text=True)``, forked where it can be (streams: DEVNULL,
    PIPE, STDOUT or a file path, appended to)."""
    server = forked(cmd, env)
    if server is not None:
        return server.popen(cmd, cwd=cwd, env=env, stdout=stdout, stderr=stderr,
                            start_new_session=start_new_session)
    files = [open(s, "a") if isinstance(s, (str, Path)) else s  # noqa: SIM115 - the child's
             for s in (stdout, stderr)]
    try:
        return subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdout=files[0],
                                stderr=files[1], start_new_session=start_new_session, text=True)
    finally:
        for f in files:
            if not isinstance(f, int):
                f.close()


def run(cmd: Sequence[str | Path], *, cwd: str | Path, env: dict[str, str],
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, ..., capture_output=True, text=True, timeout=timeout)``, forked
    where it can be."""
    server = forked(cmd, env)
    if server is not None:
        return server.run(cmd, cwd=cwd, env=env, timeout=timeout)
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)

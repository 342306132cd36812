"""``ma`` run in the test's own process, as a child process would run it: the ~0.3-0.8 CPU s of
a process's start-up (the package, numpy, polars, pydantic and the provider SDK imported again)
saved where a test checks a command's files, exit code and lines, not the process itself."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from market_agents import prices
from market_agents.cli import main


def ma(argv: Sequence[str], environ: Mapping[str, str], cwd: Path | str
       ) -> subprocess.CompletedProcess:
    """``ma ARGV`` in this process with exactly ``environ`` as its environment and ``cwd`` as
    its working directory (both restored after), stdout and stderr captured. The price table
    is read afresh, as a new process reads it (``prices.load_prices`` keeps it per process): a
    test may have edited it since the last command.

    Returns:
        What ``subprocess.run(..., capture_output=True, text=True)`` would: the exit code (a
        ``SystemExit``'s, as argparse's usage errors raise) and the captured text. Any other
        exception propagates: in a process it would have been a traceback.
    """
    # a copy first: ``environ`` may be os.environ itself, which clear() would empty
    given, saved, here = dict(environ), dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(given)
    os.chdir(cwd)
    prices._load.cache_clear()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["ma", *argv], code, out.getvalue(), err.getvalue())

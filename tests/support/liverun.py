"""Helpers to run `ma run` live against the local fake server (tests of the record): in the
test's process (`ma_run`) or as a command to start (`ma_run_cmd`)."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from market_agents.layout import project_of
from market_agents.sim.rundir import TABLES, table_file
from tests.support import ROOT, inprocess

BASELINE = ROOT / "config" / "baseline.yaml"
SECRET = "sk-test-record-NEVER-PRINT-4242"
# 5 LLM traders x 5 decisions on a 120-tick market: 25 requests per run
SMALL = {"simulation.ticks": 120, "simulation.burn_in": 20, "population.n_traders": 20,
         "population.n_market_makers": 2, "population.llm_share": 0.25,
         "population.llm.provider_mix": "{openai: 1.0}",
         "population.llm.models": "{openai: gpt-5.4-nano}", "population.llm.usd_cap": 0.5}


def sets(**extra) -> list[str]:
    """`--set` arguments of the small live run, with dotted keys given as a__b__c."""
    out = []
    for key, value in {**SMALL, **{k.replace("__", "."): v for k, v in extra.items()}}.items():
        out += ["--set", f"{key}={value}"]
    return out


def env(api=None, key: bool = True, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items()
         if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                      "ANTHROPIC_BASE_URL", "MARKET_AGENTS_REPLAY", "MARKET_AGENTS_NEW_CACHE")}
    if api is not None:
        e["OPENAI_BASE_URL"] = f"{api.url}/v1"
        e["ANTHROPIC_BASE_URL"] = api.url
    if key:
        e["OPENAI_API_KEY"] = e["ANTHROPIC_API_KEY"] = SECRET
    e.update(extra)
    return e


@functools.cache
def baseline() -> Path:
    """``config/baseline.yaml`` copied outside every project, once per process (removed at
    exit). A live run of the checkout's own file is checked against the checkout's spend
    ledger (``layout.project_root``): in a checkout where a study was run, every test's live
    run into its scratch results root was refused."""
    folder = Path(tempfile.mkdtemp(prefix="ma-test-config-"))
    folder.chmod(0o755)  # read by the tests' unprivileged runs too
    atexit.register(shutil.rmtree, folder, True)
    shutil.copy(BASELINE, folder / BASELINE.name)
    assert project_of(folder) is None, folder
    return folder / BASELINE.name


def ma_run_cmd(out: Path, cache: Path | None, seed: int = 1, *args: str, **overrides
               ) -> list[str]:
    cmd = [sys.executable, "-m", "market_agents.cli", "run", str(baseline()), "--seed",
           str(seed), "--out", str(out), "--quiet", *sets(**overrides), *args]
    if "--results" not in args:  # the test's own ledger, beside its run
        cmd += ["--results", str(Path(out).parent / "results")]
    return cmd + (["--cache", str(cache)] if cache is not None else [])


def ma_run(out: Path, cache: Path | None, api=None, *args: str, seed: int = 1,
           key: bool = True, **overrides) -> subprocess.CompletedProcess:
    """The small live run in this process (``inprocess.ma``), from ``out``'s folder: the tests
    of the record check its files, exit code and lines, not a process's start (the kill and
    SIGTERM tests start ``ma_run_cmd`` as a process)."""
    return inprocess.ma(ma_run_cmd(out, cache, seed, *args, **overrides)[3:], env(api, key),
                        out.parent)


def stored(cache: Path) -> int:
    """Entries in a cache directory (0 when it has no cache.db)."""
    from market_agents.llm.cache import ResponseCache

    if not (cache / "cache.db").exists():
        return 0
    c = ResponseCache(cache, readonly=True)
    n = len(c)
    c.close()
    return n


def tables(run: Path, drop: tuple[str, ...] = ()) -> dict[str, pl.DataFrame]:
    """The run's parquet tables, less the columns in ``drop`` (where present)."""
    out = {}
    for name in TABLES:
        frame = pl.read_parquet(run / table_file(name))
        out[name] = frame.drop([c for c in drop if c in frame.columns])
    return out


def same_bytes(a: Path, b: Path) -> bool:
    return all((a / table_file(n)).read_bytes() == (b / table_file(n)).read_bytes()
               for n in TABLES)


def one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The single stderr line of a refused command (asserting there is one, and no trace)."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, proc.stderr[-3000:]
    assert SECRET not in proc.stdout + proc.stderr
    return err

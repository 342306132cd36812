"""Run one simulation into a run directory, atomically.

Files are written into a temporary sibling directory that is renamed into place only when
everything is written, so a run directory either is complete or does not exist.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from market_agents.config import Config, check_seed, config_hash, dump_yaml
from market_agents.errors import ConfigError
from market_agents.sim import rundir


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_version() -> str:
    try:
        return version("market_agents")
    except PackageNotFoundError:
        return "unknown"


def prepare_out(out: str | Path) -> Path:
    """Check early that ``out`` can be created, so a bad path fails before any work."""
    out = Path(out)
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create parent directory ({exc.strerror})") from None
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--out {out}: directory {parent} is not writable")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    return out


def run_to_dir(config: Config, seed: int, out: str | Path, cache: str | Path | None = None,
               progress: bool | None = None, record: dict | None = None) -> Path:
    """Simulate ``config`` with ``seed`` into ``out`` (complete or absent). ``record``: keys
    added to manifest.json (the guards' freeze and deviation record of a live run)."""
    from market_agents.sim.simulation import simulate

    check_seed(seed)
    out = prepare_out(out)
    started = time.perf_counter()
    tables = simulate(config, seed, cache, progress)
    summary = tables.pop("summary")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.resolve().parent))
    try:
        manifest = {
            "config_hash": config_hash(config),
            "git_revision": git_revision(),
            "package_version": package_version(),
            "seed": seed,
            "shocks": [s.model_dump(mode="json") for s in config.shocks],
            "treatment": config.treatment,
            "wall_time_s": round(time.perf_counter() - started, 4),
            **summary,
            **(record or {}),
        }
        rundir.write_files(tmp, dump_yaml(config), tables, manifest)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out

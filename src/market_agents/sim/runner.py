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
from market_agents.errors import ConfigError, MarketAgentsError
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


def check_valid_counts(summary: dict, llm_decisions) -> None:
    """Validity is counted once: the manifest's ``llm_usage.valid``, the valid rows of
    ``llm_decisions.parquet`` and the response cache's valid entries for the run's requests
    must agree; a run that disagrees with itself is not written (MarketAgentsError)."""
    usage = summary.get("llm_usage")
    if usage is None:
        return
    counts = {"manifest": usage["valid"],
              "llm_decisions.parquet": int(llm_decisions["valid"].sum() or 0)}
    if summary.get("cache_valid") is not None:
        counts["cache"] = summary["cache_valid"]
    if len(set(counts.values())) > 1:
        raise MarketAgentsError(f"valid LLM answers counted differently: {counts}")


def run_to_dir(config: Config, seed: int, out: str | Path, cache: str | Path | None = None,
               progress: bool | None = None) -> Path:
    from market_agents.sim.simulation import simulate

    check_seed(seed)
    out = prepare_out(out)
    started = time.perf_counter()
    tables = simulate(config, seed, cache, progress)
    summary = tables.pop("summary")
    check_valid_counts(summary, tables["llm_decisions"])
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
        }
        rundir.write_files(tmp, dump_yaml(config), tables, manifest)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out

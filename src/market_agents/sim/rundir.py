"""Reading a saved run directory (the schema in docs/interfaces.md) and writing JSON atomically.

Kept apart from ``outcomes.py`` so the frozen scoring code does no I/O.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from market_agents.analysis.outcomes import RunFiles, Thresholds, score
from market_agents.atomic import write_json_atomic
from market_agents.errors import MarketAgentsError

TABLES = ("ticks", "trades", "orders", "agents", "llm_decisions")
OUTCOMES_FILE = "outcomes.json"


class RunDirError(MarketAgentsError):
    """A run directory is missing a file or holds an unreadable one."""


def load_run(path: str | Path) -> RunFiles:
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{path}: not a run directory")
    frames = {}
    for name in TABLES:
        f = path / f"{name}.parquet"
        if not f.exists():
            raise RunDirError(f"{f}: missing (is {path} a finished run?)")
        try:
            frames[name] = pl.read_parquet(f)
        except Exception as exc:  # pyarrow/polars raise several types for a bad file
            raise RunDirError(f"{f}: unreadable parquet ({exc})") from None
    manifest = read_json(path / "manifest.json")
    cfg_path = path / "config.yaml"
    config = yaml.safe_load(cfg_path.read_text()) if cfg_path.exists() else {}
    return RunFiles(**frames, manifest=manifest, config=config or {})


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDirError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: malformed JSON ({exc})") from None


def write_parquet_atomic(path: Path, frame: pl.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.write_parquet(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _finite(value: Any) -> Any:
    # JSON has no NaN/inf; an undefined outcome is null.
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


def score_run(path: str | Path, th: Thresholds | None = None) -> dict[str, Any]:
    """Outcomes of the run at ``path`` plus its provenance (seed, config_hash)."""
    run = load_run(path)
    out = {k: _finite(v) for k, v in score(run, th).items()}
    out["seed"] = run.manifest.get("seed")
    out["config_hash"] = run.manifest.get("config_hash")
    return out


def write_outcomes(path: str | Path, th: Thresholds | None = None) -> dict[str, Any]:
    out = score_run(path, th)
    write_json_atomic(Path(path) / OUTCOMES_FILE, out)
    return out

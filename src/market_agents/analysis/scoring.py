"""Scoring a saved run: read its directory (``sim.rundir``), apply the frozen, pure
:func:`market_agents.analysis.outcomes.score`, write ``outcomes.json`` atomically.

Kept apart from ``outcomes.py`` so the frozen scoring code does no I/O.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from market_agents.analysis.outcomes import RunFiles, Thresholds, episode_outcomes, score
from market_agents.atomic import write_json_atomic
from market_agents.sim.rundir import OUTCOMES_FILE, read_config, read_manifest, read_tables


def load_run(path: str | Path) -> RunFiles:
    """The saved run at ``path`` as :class:`RunFiles`; ``RunDirError`` naming a bad file."""
    return RunFiles(**read_tables(path), manifest=read_manifest(path), config=read_config(path))


def _finite(value: Any) -> Any:
    # JSON has no NaN/inf; an undefined outcome is null.
    if isinstance(value, float) and not math.isfinite(value):
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
    """Score the run at ``path`` into ``<path>/outcomes.json`` (atomic) and return the values."""
    out = score_run(path, th)
    write_json_atomic(Path(path) / OUTCOMES_FILE, out)
    return out


def episodes_at(run: RunFiles, grid: list[Thresholds]) -> list[dict[str, Any]]:
    """The run's bubble and crash episodes re-scored at every grid point (thresholds and
    episode outcomes per row), from its saved ticks and burn-in alone."""
    return [{"bubble_gap": th.bubble_gap, "bubble_ticks": th.bubble_ticks,
             "crash_drop": th.crash_drop, "crash_ticks": th.crash_ticks,
             **episode_outcomes(run, th)} for th in grid]

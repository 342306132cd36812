"""Scoring a saved run: read its directory (``sim.rundir``), apply the frozen, pure
:func:`market_agents.analysis.outcomes.score`, write ``outcomes.json`` atomically.

Kept apart from ``outcomes.py`` so the frozen scoring code does no I/O.
"""

from __future__ import annotations

import math
from dataclasses import asdict
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


# outcomes.json's record of the thresholds it was scored at (gather checks it, then drops it).
THRESHOLDS_KEY = "thresholds"


def score_run(path: str | Path, th: Thresholds | None = None) -> dict[str, Any]:
    """Outcomes of the run at ``path`` plus its provenance (seed, config_hash) and the
    thresholds they were scored at (``thresholds``)."""
    run = load_run(path)
    th = th or Thresholds()
    out = {k: _finite(v) for k, v in score(run, th).items()}
    out["seed"] = run.manifest.get("seed")
    out["config_hash"] = run.manifest.get("config_hash")
    out[THRESHOLDS_KEY] = asdict(th)
    return out


def outcomes_name(th: Thresholds | None = None) -> str:
    """The file a run's outcomes at ``th`` go to: ``outcomes.json`` at the protocol's
    thresholds (§5.1: what gather and the paper read), else a file beside it named by the
    thresholds, e.g. ``outcomes_bubble0.03x10_crash0.1x20_var1_h10.json``, so re-scoring never
    overwrites the run's outcomes."""
    th = th or Thresholds()
    if th == Thresholds():
        return OUTCOMES_FILE
    return (f"outcomes_bubble{th.bubble_gap:g}x{th.bubble_ticks}_crash{th.crash_drop:g}x"
            f"{th.crash_ticks}_var{th.var_order}_h{th.horizon}.json")


def write_outcomes(path: str | Path, th: Thresholds | None = None) -> tuple[Path, dict[str, Any]]:
    """Score the run at ``path`` into ``<path>/<outcomes_name(th)>`` (atomic).

    Returns:
        (the file written, the values).
    """
    out = score_run(path, th)
    target = Path(path) / outcomes_name(th)
    write_json_atomic(target, out)
    return target, out


def episodes_at(run: RunFiles, grid: list[Thresholds]) -> list[dict[str, Any]]:
    """The run's bubble and crash episodes re-scored at every grid point (thresholds and
    episode outcomes per row), from its saved ticks and burn-in alone."""
    return [{"bubble_gap": th.bubble_gap, "bubble_ticks": th.bubble_ticks,
             "crash_drop": th.crash_drop, "crash_ticks": th.crash_ticks,
             **episode_outcomes(run, th)} for th in grid]

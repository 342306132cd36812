"""The pilot manifest (protocol §4): what the live pilot cost and how well the LLM traders
behaved, the SD of paired differences vs the control for every primary outcome (the σ̂_d table the
freeze records), and a pass/fail per criterion.

Reads only the gathered ``outcomes.parquet`` and, for latency, each run's
``llm_decisions.parquet``; writes ``results/manifests/pilot.json``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from market_agents.analysis.stats import PRIMARY_OUTCOMES, paired_differences
from market_agents.errors import ConfigError
from market_agents.protocol.design import Design
from market_agents.protocol.planning import run_config
from market_agents.sim.rundir import table_file

if TYPE_CHECKING:  # annotations only: polars loads where a table is read or built
    import polars as pl

CRITERIA = {
    "validity": "llm_valid_rate >= 0.80",
    "failures": "llm_failure_rate <= 0.10",
    "cost_per_decision": "usd per decision within ±30 % of {usd_per_decision:g}",
    "no_budget_halts": "no run hit its usd_cap",
}


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _weighted(frame: pl.DataFrame, col: str, weight: str = "n_llm_decisions") -> float | None:
    import polars as pl  # why: src.main and `ma gate` import this module, never a table
    if col not in frame.columns:
        return None
    f = frame.filter(pl.col(col).is_not_null() & (pl.col(weight) > 0))
    return _ratio(float((f[col] * f[weight]).sum()), float(f[weight].sum())) if f.height else None


def paired_sd(outcomes: pl.DataFrame, control: str) -> dict[str, dict[str, Any]]:
    """For each treated cell and primary outcome: SD (ddof 1) of y(cell, s) − y(control, s)
    over the seeds both have, with the number of pairs."""
    if control not in outcomes["cell"].unique().to_list():
        raise ConfigError(f"outcomes.parquet has no control cell {control!r} for paired SDs")
    return {
        cell: {y: d if y == "n_pairs" else (float(d.std(ddof=1)) if len(d) > 1 else None)
               for y, d in row.items()}
        for cell, row in paired_differences(outcomes, control, PRIMARY_OUTCOMES).items()
    }


def latency(run_dirs: list[Path]) -> dict[str, float | None]:
    """Median and 95th percentile of call latency, in seconds (the recorded latency of the live
    call, also when a decision was served from the cache)."""
    import polars as pl  # why: src.main and `ma gate` import this module, never a table
    frames = []
    for d in run_dirs:
        path = d / table_file("llm_decisions")
        if path.exists():
            f = pl.read_parquet(path)
            if "latency_s" in f.columns and f.height:
                frames.append(f["latency_s"].drop_nulls())
    lat = pl.concat(frames) if frames else pl.Series("latency_s", [], dtype=pl.Float64)
    if not len(lat):
        return {"median_s": None, "p95_s": None}
    return {"median_s": float(lat.median()), "p95_s": float(lat.quantile(0.95))}


def criteria(summary: dict[str, Any], usd_per_decision: float,
             tolerance: float = 0.30) -> dict[str, dict[str, Any]]:
    """Pass/fail per criterion; ``usd_per_decision`` is the planned cost the pilot's cost per
    decision must lie within ``tolerance`` of (workflow config ``planning_usd_per_decision``)."""
    cost = summary["usd_per_decision"]
    lo, hi = usd_per_decision * (1 - tolerance), usd_per_decision * (1 + tolerance)
    checks = {
        "validity": (summary["validity_rate"], summary["validity_rate"] is not None
                     and summary["validity_rate"] >= 0.80),
        "failures": (summary["failure_rate"], summary["failure_rate"] is not None
                     and summary["failure_rate"] <= 0.10),
        "cost_per_decision": (cost, cost is not None and lo <= cost <= hi),
        "no_budget_halts": (summary["budget_halts"], summary["budget_halts"] == 0),
    }
    return {k: {"value": v, "rule": CRITERIA[k].format(usd_per_decision=usd_per_decision),
                "pass": bool(ok)} for k, (v, ok) in checks.items()}


def usd_per_run(live: pl.DataFrame,
                models: dict[str, list[str]] | None = None) -> dict[str, dict[str, Any]]:
    """Mean priced spend (``llm_usd``) per run of each live cell, with its number of runs and the
    model ids it called: T5's equal-USD cap is the ``share_25`` mean (§5.2), recorded by the
    freeze."""
    out = {}
    for (cell,), g in sorted(live.group_by(["cell"]), key=lambda kv: kv[0]):
        out[cell] = {"mean_usd": float(g["llm_usd"].fill_null(0).mean()), "runs": g.height,
                     "models": sorted((models or {}).get(cell, []))}
    return out


def summarize(outcomes: pl.DataFrame, run_dirs: list[Path] | None = None, *, control: str,
              usd_per_decision: float,
              models: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The pilot manifest from the pilot design's gathered outcomes: paired SDs against the
    ``control`` cell, cost per decision checked against ``usd_per_decision``; ``models``: the
    model ids each cell calls (recorded beside its spend per run)."""
    import polars as pl  # why: src.main and `ma gate` import this module, never a table
    for col in ("cell", "seed", "n_llm_decisions", "llm_usd"):
        if col not in outcomes.columns:
            raise ConfigError(f"outcomes.parquet lacks column {col!r}; re-run `ma gather`")
    live = outcomes.filter(pl.col("n_llm_decisions") > 0)
    n = int(live["n_llm_decisions"].sum()) if live.height else 0
    usd = float(outcomes["llm_usd"].fill_null(0).sum())

    def per_decision(col: str) -> float | None:
        return _ratio(float(live[col].fill_null(0).sum()), n) if col in live.columns else None

    summary: dict[str, Any] = {
        "runs": outcomes.height,
        "live_runs": live.height,
        "decisions": n,
        "total_usd": round(usd, 6),
        "usd_per_decision": _ratio(usd, n),
        "tokens_per_decision": {
            "in": per_decision("llm_tokens_in"),
            "out": per_decision("llm_tokens_out"),
            "reasoning": per_decision("llm_tokens_reasoning"),
        },
        "latency": latency(run_dirs or []),
        "validity_rate": _weighted(live, "llm_valid_rate"),
        "failure_rate": _weighted(live, "llm_failure_rate"),
        "cache_hit_share": _weighted(live, "llm_cached_hits"),
        "budget_halts": int(outcomes["llm_budget_halts"].fill_null(0).sum())
        if "llm_budget_halts" in outcomes.columns
        else 0,
        "realized_shares": {
            cell: {
                "llm_order_share": _mean(g, "llm_order_share"),
                "llm_volume_share": _mean(g, "llm_volume_share"),
            }
            for (cell,), g in sorted(live.group_by(["cell"]), key=lambda kv: kv[0])
        },
        "usd_per_run": usd_per_run(live, models),
        "sigma_d": paired_sd(outcomes, control),
    }
    summary["criteria"] = criteria(summary, usd_per_decision)
    summary["pass"] = all(c["pass"] for c in summary["criteria"].values())
    return summary


def _mean(frame: pl.DataFrame, col: str) -> float | None:
    if col not in frame.columns:
        return None
    v = frame[col].drop_nulls()
    m = v.mean() if len(v) else None
    return float(m) if m is not None and math.isfinite(m) else None


def require_failed(path: Path) -> dict[str, Any]:
    """The failure path (§4) starts only once a failed pilot is recorded: the pilot manifest at
    ``path`` must exist and fail a criterion. Returns {path, failed criteria}; ConfigError
    naming the file otherwise (no pilot yet, or a pilot that passed)."""
    if not path.exists():
        raise ConfigError(f"{path} does not exist: the re-pilot (§4) runs only after the pilot "
                          "has run and failed; run `.venv/bin/snakemake pilot` first")
    try:
        pilot = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg})") from None
    failed = sorted(k for k, c in (pilot.get("criteria") or {}).items() if not c.get("pass"))
    if pilot.get("pass") or not failed:
        raise ConfigError(f"{path} records a pilot that passed: the failure path (prompt v2, "
                          "mock re-run, one-seed re-pilot) is only for a failed pilot; freeze "
                          "instead (`.venv/bin/snakemake freeze`)")
    return {"path": str(path), "failed": failed}


def prompt_versions(design: Design) -> list[str]:
    """The prompt revisions the design's live cells use (one, normally)."""
    return sorted({run_config(design, c).population.llm.prompt_version
                   for c in design.cells if not design.cells[c].unavailable
                   and design.is_live(c)})


def after_failed_pilot(pilot: dict[str, Any], repilot: dict[str, Any] | None,
                       versions: list[str], where: str) -> dict[str, Any] | None:
    """Whether the freeze may follow a failed pilot (§4): only when the re-pilot passed and the
    confirmatory design uses the revision it passed with. Returns None for a pilot that passed,
    else what the freeze records (``repilot``); ConfigError saying what to do otherwise.

    Args:
        pilot: the pilot manifest.
        repilot: the re-pilot's manifest, or None when absent.
        versions: the confirmatory design's prompt revisions (:func:`prompt_versions`).
        where: the re-pilot manifest's path, for the messages.
    """
    failed = sorted(k for k, c in (pilot.get("criteria") or {}).items() if not c.get("pass"))
    if not failed:
        return None
    if repilot is None or not repilot.get("pass"):
        state = "does not exist" if repilot is None else "records a re-pilot that failed too"
        raise ConfigError(
            f"pilot criteria failed: {', '.join(failed)}, and {where} {state}. Protocol §4: "
            "revise the prompt (v2), re-run the mock and a one-seed re-pilot (`.venv/bin/snakemake "
            "repilot`); to freeze anyway pass --accept-failed-pilot and record the deviation")
    if versions != repilot.get("prompt_versions"):
        raise ConfigError(
            f"the re-pilot passed with prompt {repilot.get('prompt_versions')}, but the "
            f"confirmatory design uses {versions}: set population.llm.prompt_version to the "
            "revision that passed before freezing")
    return {"failed_pilot_criteria": failed, "path": where,
            "prompt_versions": repilot["prompt_versions"], "criteria": repilot.get("criteria")}

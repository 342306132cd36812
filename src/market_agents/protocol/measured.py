"""What the pilot and the sigma runs fill in of the freeze (§5.1, §5.2: the protocol's TBDs),
each its own field of ``freeze.json``, kept apart from ``freeze.build``: ``equal_usd`` (the
measured spend per pilot run that becomes an equal-USD cell's cap), ``fundamentals_check``
(SD(V^pub/V − 1) on the sigma seeds) and ``token_profiles`` (tokens per decision in force for
each model).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from market_agents.protocol.design import Design
from market_agents.protocol.facts import base_config, market_fundamentals
from market_agents.protocol.freeze import FreezeError
from market_agents.protocol.planning import run_config
from market_agents.sim.rundir import table_file

# §5.1: the confirmatory fundamentals are chosen so that SD(V^pub/V - 1) ≈ 0.5 %; the freeze
# confirms it on the sigma seeds, within this relative tolerance.
FUNDAMENTALS_TARGET_SD = 0.005
FUNDAMENTALS_TOLERANCE = 0.25


def equal_usd(pilot: dict[str, Any], cells: list[str]) -> dict[str, dict[str, Any]]:
    """``freeze.json``'s ``equal_usd``: for each reference cell (``equal_usd_of`` of the
    design's equal-USD cells, e.g. ``share_25``), the measured mean spend per pilot run that
    becomes the equal-USD cell's ``llm.usd_cap`` (§5.2 T5, TBD ≈ 0.34).

    Args:
        pilot: the pilot manifest (``usd_per_run`` by cell: mean_usd, runs, models).
        cells: the reference cells.

    Raises: FreezeError when the pilot has no spend for a reference cell.
    """
    per_run = pilot.get("usd_per_run") or {}
    out = {}
    for cell in sorted(set(cells)):
        row = per_run.get(cell)
        if not row or not row.get("runs") or not row.get("mean_usd"):
            raise FreezeError(f"the pilot manifest has no measured spend per {cell!r} run "
                              "(usd_per_run): the equal-USD cap cannot be frozen; re-run "
                              "`ma pilot` on a pilot with that live cell")
        out[cell] = {"usd_cap": float(row["mean_usd"]), "runs": row["runs"],
                     "models": row.get("models", []),
                     "measured_as": "mean llm_usd per pilot run of this cell"}
    return out


def public_value_gap_sd(ticks: Any) -> float:
    """SD (ddof 1) over a run's ticks of V^pub/V − 1 (``ticks.parquet``: public_value,
    fundamental; the first asset)."""
    t = ticks.filter(ticks["asset"] == 0)
    return float((t["public_value"] / t["fundamental"] - 1.0).std(ddof=1))


def fundamentals_check(run_dirs: dict[int, Path], fundamentals: dict[str, Any],
                       confirmatory: dict[str, Any], target: float = FUNDAMENTALS_TARGET_SD,
                       tolerance: float = FUNDAMENTALS_TOLERANCE) -> dict[str, Any]:
    """``freeze.json``'s ``fundamentals_check`` (§5.1): SD(V^pub/V − 1) measured on each sigma
    seed, their mean, and whether it lies within ``tolerance`` (relative) of ``target``.

    Args:
        run_dirs: sigma seed -> its run directory.
        fundamentals: the sigma runs' fundamentals block and shocks (``{"fundamentals": …,
            "shocks": …}``); they must be the confirmatory base's (``confirmatory``), or the
            measurement confirms nothing.
        confirmatory: the confirmatory base's fundamentals block and shocks.
        target: the target SD of V^pub/V − 1 (default 0.005: the protocol's ≈ 0.5 %).
        tolerance: the relative tolerance around ``target`` (default 0.25: 25 %).

    Raises: FreezeError when the blocks differ or a run's ticks are missing.
    """
    if fundamentals != confirmatory:
        raise FreezeError("the sigma design's fundamentals and shocks differ from the "
                          "confirmatory base's: the check would measure another market; give "
                          "them the same overrides")
    per_seed = {}
    for seed, path in sorted(run_dirs.items()):
        f = Path(path) / table_file("ticks")
        if not f.exists():
            raise FreezeError(f"{f} does not exist: run `.venv/bin/snakemake sigma` before "
                              "the freeze")
        per_seed[str(seed)] = public_value_gap_sd(pl.read_parquet(f))
    if not per_seed:
        raise FreezeError("no sigma runs to measure SD(V^pub/V - 1) on")
    mean = sum(per_seed.values()) / len(per_seed)
    return {"measure": "SD(V^pub/V - 1) over the ticks of each sigma run", "target": target,
            "tolerance": tolerance, "mean_sd": mean, "per_seed": per_seed,
            "confirmed": abs(mean / target - 1.0) <= tolerance, **confirmatory}


def token_profiles(pilot: dict[str, Any], models: list[str],
                   measured: list[str]) -> dict[str, dict[str, Any]]:
    """``freeze.json``'s ``token_profiles``: tokens per decision in force for each model of the
    design. The pilot's models (``measured``) carry the pilot's measured means; any other model
    (gpt-5.4-mini) is assumed equal to the first measured one until it is measured (§5.2)."""
    tokens = pilot.get("tokens_per_decision") or {}
    profile = {k: tokens.get(k) for k in ("in", "out", "reasoning")}
    source = sorted(measured)[0] if measured else None
    out = {}
    for m in sorted(set(models)):
        if m in measured:
            out[m] = {**profile, "source": "measured in the pilot"}
        else:
            out[m] = {**profile, "source": f"assumed equal to {source} (not measured)"
                      if source else "unmeasured"}
    return out


def sigma_runs(sigma: Design, gathered: Path | None = None) -> list[tuple[str, int]]:
    """The sigma runs the freeze measures: those of the stage's gathered ``outcomes.parquet``
    (every seed, or the first ``max_seeds`` of a small stage), else every run of the design.
    Each one's ticks.parquet must exist (:func:`fundamentals_check`)."""
    if gathered is None or not gathered.exists():
        return sigma.runs()
    frame = pl.read_parquet(gathered, columns=["cell", "seed"])
    return sorted((str(c), int(s)) for c, s in frame.iter_rows()) or sigma.runs()


def pilot_and_sigma_records(facts: dict[str, Any], design: Design, sigma: Design,
                            pilot: dict[str, Any],
                            accept_unconfirmed: bool = False, sigma_mock: bool = False,
                            sigma_gathered: Path | None = None) -> dict[str, Any]:
    """The freeze's fields that the pilot and the sigma runs fill in (the protocol's TBDs):
    ``equal_usd`` (§5.2 T5), ``fundamentals_check`` (§5.1) and ``token_profiles`` (§5.2).

    Args:
        facts: ``facts.design_facts`` of the confirmatory design (its live models).
        design: the confirmatory design (its base, its equal-USD cells).
        sigma: the sigma design, whose runs (under its results root) are measured.
        pilot: the pilot manifest.
        accept_unconfirmed: freeze although the fundamentals miss their target (recorded).
        sigma_mock: read the sigma runs of the rehearsal (a rehearsal's freeze never reads the
            live roots).
        sigma_gathered: the sigma design's gathered outcomes.parquet: which runs to measure.

    Raises: FreezeError when a measurement is missing or the fundamentals are unconfirmed.
    """
    runs = sigma_runs(sigma, sigma_gathered)
    check = fundamentals_check(
        {seed: sigma.run_dir(cell, seed, sigma_mock) for cell, seed in runs},
        market_fundamentals(run_config(sigma, runs[0][0])),
        market_fundamentals(base_config(design)))
    if not check["confirmed"]:
        if not accept_unconfirmed:
            raise FreezeError(
                f"SD(V^pub/V - 1) on the sigma seeds is {check['mean_sd']:.4%}, not within "
                f"{check['tolerance']:.0%} of {check['target']:.2%} (§5.1): adjust "
                "fundamentals.jump_sigma, or freeze anyway with "
                "--accept-unconfirmed-fundamentals and record the deviation")
        check["accepted_unconfirmed"] = True
    models = sorted({m for c in facts["cells"].values() for m in c.get("models", [])})
    measured = sorted({m for row in (pilot.get("usd_per_run") or {}).values()
                       for m in row.get("models", [])})
    refs = [c.equal_usd_of for c in design.cells.values() if c.equal_usd_of]
    return {"equal_usd": equal_usd(pilot, refs), "fundamentals_check": check,
            "token_profiles": token_profiles(pilot, models, measured)}

"""Statistics over a design's gathered outcomes (one row per run: cell, seed, outcomes).

The paired difference y(cell, s) - y(control, s) over the seeds both cells ran is the protocol's
effect estimate (§4: its SD is the pilot's σ̂_d, which sizes the confirmatory tiers); the pilot
manifest and the run contract's metrics both take it from :func:`paired_differences`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl


def paired_differences(outcomes: pl.DataFrame, control: str,
                       columns: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per treated cell: ``{"n_pairs": seeds shared with the control, y: differences}``.

    Args:
        outcomes: one row per run with columns ``cell``, ``seed`` and the outcome columns.
        control: the control cell (``share_0`` in the protocol); it must be present.
        columns: outcome columns to difference; those absent from ``outcomes`` are skipped.

    Returns:
        Cells in sorted order (the control excluded); for each outcome a Float64 series of the
        finite differences y(cell, s) - y(control, s) (nulls and NaN/inf dropped).
    """
    base = outcomes.filter(pl.col("cell") == control)
    present = [y for y in columns if y in outcomes.columns]
    table: dict[str, dict[str, Any]] = {}
    for cell in sorted(set(outcomes["cell"].to_list()) - {control}):
        joined = outcomes.filter(pl.col("cell") == cell).join(base, on="seed", suffix="__ctl")
        row: dict[str, Any] = {"n_pairs": joined.height}
        for y in present:
            d = (joined[y].cast(pl.Float64) - joined[f"{y}__ctl"].cast(pl.Float64)).drop_nulls()
            row[y] = d.filter(d.is_finite())
        table[cell] = row
    return table


# Numeric columns of a gathered outcomes frame that describe the run, not its market.
RUN_COLUMNS = ("seed", "llm_share")


def outcome_columns(outcomes: pl.DataFrame) -> list[str]:
    """The numeric outcome columns of a gathered frame, in its order (run columns excluded)."""
    return [c for c in outcomes.columns
            if outcomes[c].dtype.is_numeric() and c not in RUN_COLUMNS]


def control_sd(outcomes: pl.DataFrame, control: str) -> pl.DataFrame:
    """The free σ estimates (protocol §3): for every outcome of the ``control`` cell, the number
    of runs with a finite value, their mean and their SD (ddof 1; null below two runs).

    Args:
        outcomes: one row per run (``cell``, ``seed``, outcome columns), e.g. the sigma design's
            outcomes.parquet (share_0, seeds 1-30).
        control: the control cell; ValueError when absent.

    Returns: columns outcome, n, mean, sd; one row per outcome, in the frame's column order.
    """
    base = outcomes.filter(pl.col("cell") == control)
    if not base.height:
        raise ValueError(f"no runs of the control cell {control!r}")
    rows = []
    for y in outcome_columns(base):
        v = base[y].cast(pl.Float64).drop_nulls()
        v = v.filter(v.is_finite())
        rows.append({"outcome": y, "n": len(v), "mean": float(v.mean()) if len(v) else None,
                     "sd": float(v.std(ddof=1)) if len(v) > 1 else None})
    return pl.DataFrame(rows, schema={"outcome": pl.Utf8, "n": pl.Int64, "mean": pl.Float64,
                                      "sd": pl.Float64})

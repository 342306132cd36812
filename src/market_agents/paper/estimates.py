"""The paper's estimates as pure functions of :class:`~market_agents.paper.data.PaperData`:
the pre-registered paired estimates (every cell against ``share_0``, and E5), the dose
response over the share cells, each comparison table the design declares (its cells against
the cells they are compared with, or the equal-USD comparison:
:mod:`market_agents.protocol.comparisons`) and the two-asset spillover. Each returns a polars
frame, or a :class:`~market_agents.paper.data.Skip` saying why the design does not support it. The
estimator is :mod:`market_agents.analysis.stats`; the contrasts are
:mod:`market_agents.analysis.estimands`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from market_agents.analysis import stats
from market_agents.analysis.estimands import CONTROL, tier_contrasts
from market_agents.analysis.stats import Contrast, PairedSample, estimate
from market_agents.paper.data import PaperData, Skip
from market_agents.protocol.comparisons import Comparison

PHI = (0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 1.0)  # §5.2 dose shape
SPILLOVER_CELL = "k2_25"


def primary_contrasts(data: PaperData) -> list[Contrast]:
    """:func:`tier_contrasts` of the cells that ran."""
    return tier_contrasts(data.cells, data.tier, data.against, data.interactions)


def primary_estimates(data: PaperData) -> pl.DataFrame | Skip:
    """The pre-registered paired estimates: every cell against the cell its design names
    (default ``share_0``) and the design's interactions (E5), per
    outcome, with t and bootstrap intervals and the MDE (Run protocol §5.1-§5.2).

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    if CONTROL not in data.cells:
        return Skip(f"no {CONTROL} cell: nothing to pair the cells with")
    contrasts = primary_contrasts(data)
    return stats.estimates(data.outcomes, contrasts, exclude_seeds=data.exclude_seeds,
                           mde=data.mde, primary={c.family: data.primary_of(c.family)
                                                  for c in contrasts})


def dose_response(primary: pl.DataFrame | Skip, data: PaperData) -> pl.DataFrame | Skip:
    """The share cells' rows of the primary estimates, by phi (phi = 0: the control)."""
    if isinstance(primary, Skip):
        return primary
    phi = share_cells(data)
    if len(phi) < 2:
        return Skip("fewer than two share cells")
    rows = primary.filter(pl.col("cell").is_in(list(phi)) & (pl.col("control") == CONTROL))
    zero = (data.outcomes.filter(pl.col("cell") == CONTROL)
            .filter(~pl.col("seed").is_in(list(data.exclude_seeds))))
    zero_rows = pl.DataFrame([{"cell": CONTROL, "outcome": y, "n": zero[y].drop_nulls().len(),
                               "treated_mean": _finite_mean(zero[y]), "diff": 0.0}
                              for y in rows["outcome"].unique(maintain_order=True)],
                             schema={"cell": pl.Utf8, "outcome": pl.Utf8, "n": pl.Int64,
                                     "treated_mean": pl.Float64, "diff": pl.Float64})
    keep = ["cell", "outcome", "n", "treated_mean", "diff", "t_low", "t_high", "boot_low",
            "boot_high", "p", "p_holm"]
    table = pl.concat([zero_rows, rows.select(keep)], how="diagonal_relaxed")
    table = table.with_columns(pl.col("cell").replace_strict(phi, return_dtype=pl.Float64)
                               .alias("phi"))
    return table.select("phi", *keep).sort("outcome", "phi", maintain_order=True)


def share_cells(data: PaperData) -> dict[str, float]:
    """``share_<pct>`` cells whose LLM share is one of the protocol's phi, with that share."""
    out = {}
    shares = data.outcomes.group_by("cell", maintain_order=True).agg(pl.col("llm_share").first())
    for cell, share in shares.iter_rows():
        if cell.startswith("share_") and share is not None and any(
                math.isclose(share, p) for p in PHI):
            out[cell] = float(share)
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def _finite_mean(s: pl.Series) -> float | None:
    v = s.cast(pl.Float64).drop_nulls()
    v = v.filter(v.is_finite())
    return float(v.mean()) if len(v) else None


def comparison(data: PaperData, c: Comparison) -> pl.DataFrame | Skip:
    """A comparison table the design declares (``tables:``, its cells' ``table`` and
    ``compare_with``): :func:`paired`, or :func:`equal_usd` for an ``equal_usd`` table.

    Returns:
        A polars frame, or a :class:`Skip` saying why the runs do not support the table.
    """
    if not c.pairs:
        return Skip(f"no cell of the design joins it (a cell joins with table: {c.name})")
    return equal_usd(data, c) if c.kind == "equal_usd" else paired(data, c)


def paired(data: PaperData, c: Comparison) -> pl.DataFrame | Skip:
    """Each cell of the table against the cell it is compared with, paired by seed; one Holm
    family (the table's name) over these contrasts x the primary outcomes of the first cell's
    tier, every other outcome secondary. A cell that did not run, or whose reference did not,
    has no row.

    Returns:
        A polars frame, or a :class:`Skip` saying why the runs do not support the table.
    """
    ran = [(cell, ref) for cell, ref in c.pairs if cell in data.cells]
    if not ran:
        return Skip(f"none of the {c.name} cells ran ({', '.join(c.cells)})")
    kept = [(cell, ref) for cell, ref in ran if ref in data.cells]
    if not kept:
        refs = list(dict.fromkeys(ref for _, ref in ran))
        return Skip(f"no {' or '.join(refs)} cell to compare the {c.name} cells with")
    contrasts = [Contrast(cell, c.name, {cell: 1}, {ref: 1}) for cell, ref in kept]
    # Holm over these cells x the primary outcomes of their tier; the rest are secondary.
    return stats.estimates(data.outcomes, contrasts, exclude_seeds=data.exclude_seeds,
                           primary={c.name: data.primary_of(data.tier(ran[0][0]))})


def equal_usd(data: PaperData, c: Comparison) -> pl.DataFrame | Skip:
    """The equal-USD comparison (T5: e.g. ``mini_25_equalusd`` against ``mini_25``):
    decisions per agent, USD, budget halts and valid rate of each cell and the cell it is
    compared with, then the paired estimate of each pair.

    Returns:
        A polars frame, or a :class:`Skip` saying why the runs do not support the table.
    """
    kept = [(cell, ref) for cell, ref in c.pairs if cell in data.cells and ref in data.cells]
    if not kept:
        need = "; ".join(f"{ref} and {cell}" for cell, ref in c.pairs)
        has = [x for x in dict.fromkeys(x for p in c.pairs for x in p[::-1]) if x in data.cells]
        return Skip(f"needs both {need} (has: {', '.join(has) or 'none'})")
    present = {x for p in kept for x in p}
    o = data.outcomes.filter(pl.col("cell").is_in(list(present)))
    if {"n_llm_decisions", "llm_budget_halts", "n_llm_agents"} <= set(o.columns):
        # Opportunities are equal by design; what the treatment changes is how many of them
        # got an answer before the per-run USD cap halted the rest.
        agents = pl.col("n_llm_agents").cast(pl.Float64)
        held = pl.col("llm_budget_halts") + (pl.col("llm_decision_cap_holds") if (
            "llm_decision_cap_holds" in o.columns) else 0)
        o = o.with_columns(
            ((pl.col("n_llm_decisions") - held) / agents).alias("made_per_agent"),
            (pl.col("llm_budget_halts") / agents).alias("halted_per_agent"))
    cols = [c for c in ("llm_decisions_per_agent", "made_per_agent",
                        "halted_per_agent", "llm_usd", "llm_valid_rate")
            if c in o.columns]
    levels = o.group_by("cell", maintain_order=True).agg(
        pl.len().alias("runs"), *[pl.col(c).cast(pl.Float64).mean() for c in cols]).rename(
        {"llm_decisions_per_agent": "offered_per_agent"}, strict=False)
    est = stats.estimates(data.outcomes, [Contrast(cell, c.name, {cell: 1}, {ref: 1})
                                          for cell, ref in kept],
                          exclude_seeds=data.exclude_seeds,
                          primary={c.name: data.primary_of(data.tier(kept[0][0]))})
    # One family and no MDE (the freeze sized contrasts against share_0): those columns say
    # nothing here and would push the table off the page; the SE is the interval's. With one
    # reference the part's label names the contrast, so its control column goes too.
    drop = ["family", "se", "mde"] + (["control"] if len({r for _, r in kept}) == 1 else [])
    # and what says nothing in these rows: no caveat, no seed dropped
    drop += [c for c in ("caveat", "dropped") if est[c].fill_null("").str.len_chars().max() == 0]
    est = est.drop(*drop)
    return pl.concat([levels.with_columns(pl.lit("levels").alias("part")),
                      est.with_columns(pl.lit("equal USD - equal decisions").alias("part"))],
                     how="diagonal_relaxed").select("part", pl.all().exclude("part"))


def level_estimate(values: list[float]) -> dict[str, Any]:
    """Mean of per-seed values with the paired estimator against zero (t interval, p)."""
    arr = np.array(values, dtype=float)
    return estimate(PairedSample(list(range(len(arr))), arr, np.zeros(len(arr))))


def spillover(data: PaperData) -> pl.DataFrame | Skip:
    """The two-asset cell ``k2_25``: return correlation and DY spillover per seed, with their
    mean, t interval and p value.

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    if SPILLOVER_CELL not in data.cells:
        return Skip(f"the design has no two-asset cell {SPILLOVER_CELL}")
    o = data.outcomes.filter(pl.col("cell") == SPILLOVER_CELL)
    if data.exclude_seeds:
        o = o.filter(~pl.col("seed").is_in(list(data.exclude_seeds)))
    rows = [{"seed": str(s), "ret_corr": r, "spillover_dy": d}
            for s, r, d in o.select("seed", "ret_corr", "spillover_dy").iter_rows()]
    for stat in ("mean", "t_low", "t_high", "p", "n"):
        row: dict[str, Any] = {"seed": stat}
        for y in ("ret_corr", "spillover_dy"):
            vals = [v for v in o[y].to_list() if v is not None and math.isfinite(v)]
            e = level_estimate(vals)
            row[y] = e["treated_mean"] if stat == "mean" else e[stat]
        rows.append(row)
    return pl.DataFrame(rows, schema={"seed": pl.Utf8, "ret_corr": pl.Float64,
                                      "spillover_dy": pl.Float64})

"""The paper's estimates as pure functions of :class:`~market_agents.paper.data.PaperData`:
the pre-registered paired estimates (every cell against ``share_0``, and E5), the dose
response over the share cells, the mechanism and diversity cells against ``share_25``, the
equal-USD comparison and the two-asset spillover. Each returns a polars frame, or a
:class:`~market_agents.paper.data.Skip` saying why the design does not support it. The
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

PHI = (0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 1.0)  # §5.2 dose shape
MECHANISM_CELLS = ("memory_25", "channel_25", "leverage_25", "breaker_25", "poslimit_25")
MECHANISM_REFERENCE = "share_25"
DIVERSITY_CELLS = ("diverse_25", "mix_25", "mini_25")
FAIRNESS_CELLS = ("mini_25", "mini_25_equalusd")
SPILLOVER_CELL = "k2_25"


def primary_contrasts(data: PaperData) -> list[Contrast]:
    """:func:`tier_contrasts` of the cells that ran."""
    return tier_contrasts(data.cells, data.tier)


def primary_estimates(data: PaperData) -> pl.DataFrame | Skip:
    """The pre-registered paired estimates: every cell against ``share_0`` (and E5), per
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


def _against(data: PaperData, cells: tuple[str, ...], reference: str, family: str,
             what: str) -> pl.DataFrame | Skip:
    present = [c for c in cells if c in data.cells]
    if not present:
        return Skip(f"the design has none of the {what} cells ({', '.join(cells)})")
    if reference not in data.cells:
        return Skip(f"no {reference} cell to compare the {what} cells with")
    contrasts = [Contrast(c, family, {c: 1}, {reference: 1}) for c in present]
    # Holm over these cells x the primary outcomes of their tier; the rest are secondary.
    return stats.estimates(data.outcomes, contrasts, exclude_seeds=data.exclude_seeds,
                           primary={family: data.primary_of(data.tier(present[0]))})


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


def mechanisms(data: PaperData) -> pl.DataFrame | Skip:
    """Each mechanism cell (memory, channel, leverage, breaker, position limit) against
    ``share_25``, paired by seed.

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    return _against(data, MECHANISM_CELLS, MECHANISM_REFERENCE, "mechanisms", "mechanism")


def diversity(data: PaperData) -> pl.DataFrame | Skip:
    """Each diversity cell (diverse prompts, model mix, mini) against ``share_25``, paired by
    seed.

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    return _against(data, DIVERSITY_CELLS, MECHANISM_REFERENCE, "diversity", "diversity")


def fairness(data: PaperData) -> pl.DataFrame | Skip:
    """The equal-USD comparison (``mini_25`` against ``mini_25_equalusd``, T5): decisions per
    agent, USD, budget halts and valid rate of each cell.

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    present = [c for c in FAIRNESS_CELLS if c in data.cells]
    if len(present) < 2:
        return Skip(f"needs both {' and '.join(FAIRNESS_CELLS)} "
                    f"(has: {', '.join(present) or 'none'})")
    o = data.outcomes.filter(pl.col("cell").is_in(present))
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
    equal_usd, equal_dec = FAIRNESS_CELLS[1], FAIRNESS_CELLS[0]
    est = stats.estimates(data.outcomes, [Contrast(equal_usd, "fairness", {equal_usd: 1},
                                                   {equal_dec: 1})],
                          exclude_seeds=data.exclude_seeds,
                          primary={"fairness": data.primary_of(data.tier(equal_usd))})
    # One family, one control (the part's label names the contrast) and no MDE (the freeze
    # sized contrasts against share_0): those columns say nothing here and would push the
    # table off the page; the SE is the interval's.
    est = est.drop("family", "control", "se", "mde")
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

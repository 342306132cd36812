"""The paper's tables as pure functions of data frames (:class:`PaperData`, which
``protocol/paper.py`` reads from the run directories and manifests). Each builder returns a
polars frame, or a :class:`Skip` saying why the design does not support the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from market_agents import layout
from market_agents.analysis import stats
from market_agents.analysis.stats import Contrast, PairedSample, estimate

CONTROL = "share_0"
PHI = (0.0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 1.0)  # §5.2 dose shape
MECHANISM_CELLS = ("memory_25", "channel_25", "leverage_25", "breaker_25", "poslimit_25")
MECHANISM_REFERENCE = "share_25"
DIVERSITY_CELLS = ("diverse_25", "mix_25", "mini_25")
FAIRNESS_CELLS = ("mini_25", "mini_25_equalusd")
SPILLOVER_CELL = "k2_25"
LIBRARY_CELL = "library_1000"
E5 = Contrast("E5 (leverage_25 - leverage_0) - (share_25 - share_0)", "T4",
              {"leverage_25": 1, "leverage_0": -1}, {"share_25": 1, "share_0": -1})
# The mechanism-activity outcomes (analysis/outcomes.py), mean per run; `ma summary` prints them.
ACTIVITY = ("n_halts", "halted_ticks", "rejects_halted", "rejects_position_limit",
            "rejects_insufficient_funds", "rejects_invalid", "margin_calls", "forced_sale_volume",
            "llm_channel_sent", "llm_channel_read", "llm_memory_lines", "llm_decision_cap_holds",
            "llm_budget_halts")


@dataclass(frozen=True)
class Skip:
    """A table or figure the design does not support, and why."""

    reason: str


@dataclass
class PaperData:
    """Everything the paper reads, as frames and plain values.

    Attributes:
        design: the design's name; ``rehearsal``: its runs are the mock rehearsal;
            ``mock_note``: set when the answers are mock answers (marks every title).
        confirmatory: pilot seeds are excluded from the estimates.
        outcomes: the gathered outcomes.parquet (one row per run).
        plan: one row per cell: cell, tier, llm_share, seeds (planned), live, decisions and
            usd planned, models.
        budget: tier -> USD; ``cap_usd``: the project cap (None: none).
        cuts: seeds cut by the gate (tier, cell, seed, usd).
        runs: one row per run from its manifest (cell, seed, date, usd_spent, library stats).
        decisions: every llm_decisions row with cell and seed.
        sensitivity: episode outcomes per run and grid point.
        sigma: the sigma design's outcomes (None when absent).
        pilot: the pilot summary (protocol.pilot.summarize) with its outcomes (None: absent).
        mde: cell -> outcome -> MDE; ``mde_source``: where it came from.
        primary: tier -> the design's primary outcomes (Holm's family; a tier not named takes
            ``stats.DEFAULT_PRIMARY``).
        not_estimable: a confirmatory design's estimands its runs cannot estimate, as the
            freeze names them ("none" when all can; None for another design).
        ticks: representative run per cell -> (ticks, manifest).
        tiers: the protocol's tiers in order (``protocol.tiers.TIERS``), one row each in the
            protocol DAG figure.
    """

    design: str
    rehearsal: bool
    mock_note: str | None
    confirmatory: bool
    outcomes: pl.DataFrame
    plan: pl.DataFrame
    budget: dict[str, float] = field(default_factory=dict)
    cap_usd: float | None = None
    cuts: pl.DataFrame = field(default_factory=pl.DataFrame)
    runs: pl.DataFrame = field(default_factory=pl.DataFrame)
    decisions: pl.DataFrame = field(default_factory=pl.DataFrame)
    sensitivity: pl.DataFrame = field(default_factory=pl.DataFrame)
    sigma: pl.DataFrame | None = None
    pilot: dict[str, Any] | None = None
    pilot_outcomes: pl.DataFrame | None = None
    mde: dict[str, dict[str, float | None]] = field(default_factory=dict)
    mde_source: str = ""
    primary: dict[str, tuple[str, ...]] = field(default_factory=dict)
    not_estimable: str | None = None
    ticks: dict[str, tuple[pl.DataFrame, dict[str, Any]]] = field(default_factory=dict)
    tiers: tuple[str, ...] = ()

    @property
    def exclude_seeds(self) -> tuple[int, ...]:
        """Seeds left out of the estimates: the pilot seeds in a confirmatory design (Run
        protocol §4: pilot seeds are excluded from confirmatory estimates), else none.
        """
        return stats.PILOT_SEEDS if self.confirmatory else ()

    @property
    def cells(self) -> list[str]:
        """The design's cells in the order of its outcomes table."""
        return self.outcomes["cell"].unique(maintain_order=True).to_list()

    def primary_of(self, family: str) -> tuple[str, ...]:
        """The primary outcomes of a family (a tier), as the design declares them."""
        return self.primary.get(family, stats.DEFAULT_PRIMARY)

    def tier(self, cell: str) -> str:
        """The tier of ``cell`` in the design's plan; ``all`` for a design without tiers."""
        row = self.plan.filter(pl.col("cell") == cell)
        return (row["tier"][0] if row.height and row["tier"][0] else None) or "all"


# --- estimates ----------------------------------------------------------------------------------


def tier_contrasts(cells: Sequence[str], tier: Callable[[str], str]) -> list[Contrast]:
    """The pre-registered contrasts of a design's cells: every cell against share_0 in its
    tier's family (``tier(cell)``), and E5 in leverage_25's when its four cells are present.
    The freeze counts a tier's Holm family from the same list (``protocol/freeze.py``)."""
    out = [Contrast(c, tier(c), {c: 1}, {CONTROL: 1}) for c in cells if c != CONTROL]
    if all(c in cells for c in E5.cells):
        out.append(Contrast(E5.label, tier("leverage_25"), E5.treated, E5.control))
    return out


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


def fired(table: pl.DataFrame) -> dict[str, dict[str, tuple[int, int]]]:
    """Per cell and switched-on mechanism: (seeds where it acted, seeds where it was on)."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    if "mechanisms" not in table.columns:
        return out
    for row in table.iter_rows(named=True):
        idle = set((row.get("mechanisms_idle") or "").split(","))
        cell = out.setdefault(row["cell"], {})
        for m in filter(None, (row["mechanisms"] or "").split(",")):
            acted, on = cell.get(m, (0, 0))
            cell[m] = (acted + (m not in idle), on + 1)
    return out


def mechanism_activity(data: PaperData) -> pl.DataFrame | Skip:
    """What each mechanism did, per cell: mean activity per run and, per switched-on
    mechanism, the seeds where it acted (a cell whose mechanism never acted measures nothing).

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    present = [c for c in ACTIVITY if c in data.outcomes.columns]
    if not present or "mechanisms" not in data.outcomes.columns:
        return Skip("outcomes.parquet has no mechanism-activity columns (re-run `ma gather`)")
    acted = fired(data.outcomes)
    table = (data.outcomes.group_by("cell", maintain_order=True)
             .agg(pl.len().alias("runs"), *[pl.col(c).cast(pl.Float64).mean() for c in present]))
    label = {c: ", ".join(f"{m} {a}/{n}" for m, (a, n) in ms.items()) for c, ms in acted.items()}
    never = {c: ", ".join(m for m, (a, _) in ms.items() if a == 0) for c, ms in acted.items()}
    return table.with_columns(
        pl.col("cell").replace_strict(label, default="").alias("acted (seeds)"),
        pl.col("cell").replace_strict(never, default="").alias("NEVER FIRED"))


def model_mix(data: PaperData) -> pl.DataFrame | Skip:
    """Per cell and model: decisions, valid rate, mean tokens in and out.

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    d = data.decisions
    if d.is_empty():
        return Skip("no LLM decisions in the design")
    sent = d.with_columns(pl.col("valid").cast(pl.Float64))
    table = (sent.group_by("cell", "model", maintain_order=True)
             .agg(pl.len().alias("decisions"), pl.col("valid").mean().alias("valid_rate"),
                  pl.col("tokens_in").mean().alias("tokens_in"),
                  pl.col("tokens_out").mean().alias("tokens_out"),
                  pl.col("usd").mean().alias("usd_per_decision")))
    total = table.group_by("cell").agg(pl.col("decisions").sum().alias("_all"))
    return (table.join(total, on="cell")
            .with_columns((pl.col("decisions") / pl.col("_all")).alias("share"))
            .select("cell", "model", "decisions", "share", "valid_rate", "tokens_in",
                    "tokens_out", "usd_per_decision").sort("cell", "model"))


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
    import numpy as np

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


def library(data: PaperData) -> pl.DataFrame | Skip:
    """The frozen-library cell ``library_1000``: its replay distances and whether it is out of
    support (Run protocol §5.4).

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    if LIBRARY_CELL not in data.cells:
        return Skip(f"the design has no frozen-library cell {LIBRARY_CELL}")
    runs = data.runs
    if runs.is_empty() or "nn_median" not in runs.columns:
        return Skip(f"the {LIBRARY_CELL} run manifests have no library distances")
    lib = runs.filter((pl.col("cell") == LIBRARY_CELL) & pl.col("nn_median").is_not_null())
    if lib.is_empty():
        return Skip(f"the {LIBRARY_CELL} run manifests have no library distances")
    lib = lib.sort("seed").select(pl.col("seed").cast(pl.Utf8), "nn_median", "nn_p90",
                                  "loo_nn_p90", "out_of_support")
    median = float(lib["nn_median"].median())
    p90 = float(lib["loo_nn_p90"].max())
    arm = pl.DataFrame({"seed": ["arm (median of seed medians)"], "nn_median": [median],
                        "nn_p90": [float(lib["nn_p90"].median())], "loo_nn_p90": [p90],
                        "out_of_support": [median > p90]})
    return pl.concat([lib, arm], how="vertical_relaxed").with_columns(
        pl.when(pl.col("out_of_support")).then(pl.lit("OUT-OF-SUPPORT: reported, not evidence"))
        .otherwise(pl.lit("in support")).alias("verdict"))


def control_sd(data: PaperData) -> pl.DataFrame | Skip:
    """The control SD of every numeric outcome over the sigma design's seeds (Run protocol §3:
    the free σ estimates).

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    s = data.sigma
    if s is None or s.is_empty():
        return Skip(f"no sigma design outcomes ({layout.outcomes_path('sigma')}; "
                    "`.venv/bin/snakemake sigma`, free)")
    skip = {"seed", "llm_share"}
    numeric = [c for c in s.columns if s[c].dtype.is_numeric() and c not in skip
               and not c.startswith("treatment_")]
    rows = []
    for y in numeric:
        v = s[y].cast(pl.Float64).drop_nulls()
        v = v.filter(v.is_finite())
        rows.append({"outcome": y, "n": len(v), "mean": float(v.mean()) if len(v) else None,
                     "sd": float(v.std(ddof=1)) if len(v) > 1 else None,
                     "min": float(v.min()) if len(v) else None,
                     "max": float(v.max()) if len(v) else None})
    return pl.DataFrame(rows, schema={"outcome": pl.Utf8, "n": pl.Int64, "mean": pl.Float64,
                                      "sd": pl.Float64, "min": pl.Float64, "max": pl.Float64})


def sensitivity(data: PaperData) -> pl.DataFrame | Skip:
    """Bubble and crash episodes per cell at every threshold of the sensitivity grid (Run
    protocol §6: re-scored from saved ticks).

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    g = data.sensitivity
    if g.is_empty():
        return Skip("no saved ticks to re-score")
    if data.exclude_seeds:
        g = g.filter(~pl.col("seed").is_in(list(data.exclude_seeds)))
    # A bubble depends on the bubble gap only and a crash on the crash drop only, so the 3 x 3
    # grid is two rows of three: one row per cell, one column per outcome and threshold.
    cells = g["cell"].unique(maintain_order=True).to_list()
    out = g.group_by("cell", maintain_order=True).agg(pl.col("seed").n_unique().alias("runs"))
    for key, by in (("n_bubbles", "bubble_gap"), ("bubble_share", "bubble_gap"),
                    ("n_crashes", "crash_drop"), ("crash_share", "crash_drop")):
        part = (g.group_by("cell", by).agg(pl.col(key).cast(pl.Float64).mean())
                .with_columns(pl.format(f"{key} @ {{}} %", (pl.col(by) * 100).round(1)
                                        .cast(pl.Utf8).str.strip_suffix(".0")).alias("column"))
                .sort(by).pivot("column", index="cell", values=key))
        out = out.join(part, on="cell", how="left")
    return out.sort(pl.col("cell").replace_strict(cells, list(range(len(cells)))))


def llm_behaviour(data: PaperData) -> pl.DataFrame | Skip:
    """How the LLM traders behaved, per cell: decision-weighted validity and failure rates,
    order and volume shares, decisions per agent, tokens, USD per decision and latency.

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    o = data.outcomes.filter(pl.col("n_llm_decisions") > 0) if (
        "n_llm_decisions" in data.outcomes.columns) else pl.DataFrame()
    if o.is_empty():
        return Skip("no LLM decisions in the design")
    w = pl.col("n_llm_decisions")

    def weighted(c: str) -> pl.Expr:
        ok = pl.col(c).is_not_null()
        return ((pl.col(c) * w).filter(ok).sum() / w.filter(ok).sum()).alias(c)

    table = o.group_by("cell", maintain_order=True).agg(
        pl.len().alias("runs"), w.sum().alias("decisions"), weighted("llm_valid_rate"),
        weighted("llm_failure_rate"), pl.col("llm_order_share").mean(),
        pl.col("llm_volume_share").mean(), pl.col("llm_decisions_per_agent").mean())
    d = data.decisions
    if not d.is_empty():
        per = d.group_by("cell", maintain_order=True).agg(
            pl.col("tokens_in").mean().alias("tokens_in"),
            pl.col("tokens_out").mean().alias("tokens_out"),
            pl.col("tokens_reasoning").mean().alias("tokens_reasoning"),
            pl.col("usd").mean().alias("usd_per_decision"),
            pl.col("latency_s").median().alias("latency_median_s"),
            pl.col("latency_s").quantile(0.95, "nearest").alias("latency_p95_s"))
        table = table.join(per, on="cell", how="left", maintain_order="left")
    return table


def design_overview(data: PaperData) -> pl.DataFrame:
    """Per tier: cells, seeds, cuts, decisions and USD planned vs made/spent, cumulative spend."""
    o, plan, runs = data.outcomes, data.plan, data.runs
    rows = []
    cumulative = 0.0
    for tier in plan["tier_label"].unique(maintain_order=True).to_list():
        p = plan.filter(pl.col("tier_label") == tier)
        cells = p["cell"].to_list()
        done = o.filter(pl.col("cell").is_in(cells))
        cut = data.cuts.filter(pl.col("tier") == tier) if not data.cuts.is_empty() else data.cuts
        spent = float(runs.filter(pl.col("cell").is_in(cells))["usd_spent"].sum()) if (
            not runs.is_empty()) else 0.0
        cumulative += spent
        rows.append({
            "tier": tier, "cells": len(cells), "seeds_planned": int(p["seeds"].sum()),
            "runs_done": done.height, "seeds_cut": cut.height,
            "cut": ", ".join(f"{c}/{s}" for c, s in cut.select("cell", "seed").iter_rows())
            if cut.height else "",
            "decisions_planned": int(p["decisions"].sum()),
            "decisions_made": int(done["n_llm_decisions"].sum()) if done.height else 0,
            "usd_planned": float(p["usd"].sum()),
            "usd_spent": spent,
            "usd_priced": float(done["llm_usd"].fill_null(0).sum()) if done.height else 0.0,
            "tier_budget": data.budget.get(tier),
            "cumulative_spent": cumulative,
            "project_cap": data.cap_usd,
        })
    return pl.DataFrame(rows, infer_schema_length=None)

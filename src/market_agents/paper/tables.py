"""The paper's descriptive tables as pure functions of
:class:`~market_agents.paper.data.PaperData`: the design overview (planned vs made and spent,
per tier), what each mechanism did, the model mix, the frozen library's replay distances, the
control SDs of the sigma design, the sensitivity grid's episodes and the LLM traders'
behaviour. Each returns a polars frame, or a :class:`~market_agents.paper.data.Skip` saying
why the design does not support it (the estimates are ``paper/estimates.py``).
"""

from __future__ import annotations

import polars as pl

from market_agents import layout
from market_agents.analysis.estimands import activity_by_seed, activity_labels, fired
from market_agents.analysis.stats import activity_phrase
from market_agents.paper.data import PaperData, Skip

LIBRARY_CELL = "library_1000"
OUT_OF_SUPPORT = "OUT-OF-SUPPORT: reported, not evidence"  # §5.4: median > the N = 100 p90


def _verdict(when_null: pl.Expr | None = None) -> pl.Expr:
    """The verdict column of an ``out_of_support`` column (null rows: ``when_null``)."""
    expr = pl.when(pl.col("out_of_support")).then(pl.lit(OUT_OF_SUPPORT))
    if when_null is not None:
        expr = expr.when(pl.col("out_of_support").is_null()).then(when_null)
    return expr.otherwise(pl.lit("in support")).alias("verdict")


def replayed(data: PaperData) -> pl.DataFrame:
    """Every replayed decision's standardized nearest-neighbour distance in the N = 1,000
    library cell (seed, distance): what the table and the figure of §5.4 both read."""
    return data.library_nn.filter(pl.col("cell") == LIBRARY_CELL)


def mechanism_activity(data: PaperData) -> pl.DataFrame | Skip:
    """What each mechanism did, per cell: mean activity per run and, per switched-on
    mechanism, on how many seeds and which it acted ("breaker acted on 1 of 3 seeds (102)":
    on the others the cell is its reference; a cell whose mechanism never acted measures
    nothing).

    Returns:
        A polars frame, or a :class:`Skip` saying why the design does not support the table.
    """
    present = [c for c in activity_labels() if c in data.outcomes.columns]
    if not present or "mechanisms" not in data.outcomes.columns:
        return Skip("outcomes.parquet has no mechanism-activity columns (re-run `ma gather`)")
    acted = fired(data.outcomes)
    table = (data.outcomes.group_by("cell", maintain_order=True)
             .agg(pl.len().alias("runs"), *[pl.col(c).cast(pl.Float64).mean() for c in present]))
    label = {c: "; ".join(activity_phrase(m, seeds) for m, seeds in ms.items())
             for c, ms in activity_by_seed(data.outcomes).items()}
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
    if not data.library_nn.is_empty() and data.library_reference:
        return library_distribution(data)
    lib = lib.sort("seed").select(pl.col("seed").cast(pl.Utf8), "nn_median", "nn_p90",
                                  "loo_nn_p90", "out_of_support")
    median = float(lib["nn_median"].median())
    p90 = float(lib["loo_nn_p90"].max())
    arm = pl.DataFrame({"seed": ["arm (median of seed medians)"], "nn_median": [median],
                        "nn_p90": [float(lib["nn_p90"].median())], "loo_nn_p90": [p90],
                        "out_of_support": [median > p90]})
    return pl.concat([lib, arm], how="vertical_relaxed").with_columns(_verdict())


QUANTILES = (10, 25, 50, 75, 90)


def library_distribution(data: PaperData) -> pl.DataFrame:
    """§5.4 on every replayed decision: the distribution of standardized nearest-neighbour
    distances at N = 1,000 (per seed, then every decision of the arm) against the library's
    own states at N = 100 (each recorded state's distance to the others), as quantiles; the
    arm is out of support when its median at N = 1,000 exceeds the 90th percentile at N = 100.
    """
    ref = data.library_reference or []
    p90_100 = ref[90]
    rows = [{"sample": "N = 100: the library's recorded states (leave-one-out)",
             "decisions": None, **{f"p{q}": ref[q] for q in QUANTILES},
             "out_of_support": None}]
    nn = replayed(data)

    def row(label: str, d: pl.Series) -> dict:
        q = {f"p{k}": float(d.quantile(k / 100, "linear")) for k in QUANTILES}
        return {"sample": label, "decisions": len(d), **q, "out_of_support": q["p50"] > p90_100}

    for seed in sorted(nn["seed"].unique().to_list()):
        rows.append(row(f"N = 1,000: seed {seed}", nn.filter(pl.col("seed") == seed)["distance"]))
    rows.append(row("N = 1,000: the arm (every replayed decision)", nn["distance"]))
    return pl.DataFrame(rows, infer_schema_length=None).with_columns(
        _verdict(pl.lit("the reference: its p90 is the threshold")))


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

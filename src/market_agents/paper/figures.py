"""The paper's figures as pure functions of frames: each returns a matplotlib Figure (or a
:class:`~market_agents.paper.data.Skip`); ``paper/files.py`` saves it as PNG and PDF. The price
paths reuse :func:`market_agents.analysis.figures.price_figure`.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from market_agents import layout
from market_agents.analysis.figures import _pyplot
from market_agents.analysis.stats import PAPER_OUTCOMES
from market_agents.paper.data import PaperData, Skip
from market_agents.paper.tables import replayed

# The tier whose paid answers build the decision library (rules/library.smk); the gate of the
# tier after it waits for the library.
LIBRARY_TIER = "T1"


def _grid(n: int, cols: int = 3):
    plt = _pyplot()
    rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.9 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat


def _title(fig, title: str, mock_note: str | None) -> None:
    text = f"[{mock_note}] {title}" if mock_note else title
    # wrapped to the figure's width (about 10 characters an inch at this size), so a long
    # caption is never cut off; the panels start below however many lines it takes
    lines = textwrap.wrap(text, width=max(40, int(fig.get_figwidth() * 10)))
    fig.suptitle("\n".join(lines), fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 * len(lines) / fig.get_figheight()))


def dose_response(table: pl.DataFrame | Skip, mock_note: str | None, title: str):
    """The dose-response figure: per outcome, the paired difference vs ``share_0`` at each
    share of LLM traders phi, with its 95 % t interval (bars) and bootstrap interval (band).

    Args:
        table: the dose-response table (columns outcome, phi, diff, t_low, t_high, boot_low,
            boot_high), or the :class:`Skip` that replaced it.
        mock_note: the rehearsal mark for the title, or None.
        title: the figure's title.

    Returns:
        A matplotlib Figure, or the :class:`Skip` passed in.
    """
    if isinstance(table, Skip):
        return table
    every = table["outcome"].unique(maintain_order=True).to_list()
    # an outcome whose paired differences are 0 at every phi, with no interval, never moved
    flat = _never_moved(table, every)
    outcomes = [y for y in every if y not in flat]
    if not outcomes:
        return Skip("no outcome moved at any phi (" + ", ".join(flat) + ")")
    fig, axes = _grid(len(outcomes))
    half = 0.012  # half-width of a bootstrap band, in units of phi
    for ax, y in zip(axes, outcomes, strict=False):
        t = table.filter(pl.col("outcome") == y).sort("phi")
        x = t["phi"].to_list()  # phi on its own scale: 0.01 and 0.05 sit near 0, not 1 apart
        diff = t["diff"].to_list()
        lo, hi = t["t_low"].to_list(), t["t_high"].to_list()
        blo, bhi = t["boot_low"].to_list(), t["boot_high"].to_list()
        ax.axhline(0, color="0.6", lw=0.8)
        for xi, d, a, b, c, e in zip(x, diff, lo, hi, blo, bhi, strict=True):
            if d is None:
                continue
            if c is not None and e is not None:
                ax.fill_between([xi - half, xi + half], c, e, color="tab:orange", alpha=0.3,
                                lw=0)
            if a is not None and b is not None:
                ax.errorbar(xi, d, yerr=[[d - a], [b - d]], fmt="o", color="tab:blue", ms=4,
                            capsize=3)
            else:
                ax.plot(xi, d, "o", color="tab:blue", ms=4)
        ax.set_xlim(-0.05, 1.05)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0", "0.25", "0.5", "0.75", "1"], fontsize=7)
        ax.set_title(y, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    axes[0].set_ylabel("paired difference vs share_0", fontsize=8)
    for ax in axes[-min(len(axes), 4):]:
        ax.set_xlabel("φ, share of LLM traders", fontsize=7)
    _title(fig, title + " (bars: 95 % t interval; band: bootstrap)" + _not_shown(flat),
           mock_note)
    return fig


def _never_moved(estimates: pl.DataFrame, outcomes: Sequence[str]) -> list[str]:
    """The ``outcomes`` whose every paired difference in ``estimates`` (rows of
    ``stats.estimates``) is 0 or missing, with no interval: no panel for them."""
    return [y for y in outcomes if estimates.filter(pl.col("outcome") == y).select(
        (pl.col("diff").fill_null(0) == 0).all() & pl.col("t_low").is_null().all()).item()]


def _not_shown(flat: Sequence[str]) -> str:
    """The caption's note of the panels left out because the outcome never moved."""
    return (f"; not shown, never moved (one value, or none, in every run): {', '.join(flat)}"
            if flat else "")


def _constant(outcomes: pl.DataFrame, y: str) -> bool:
    v = outcomes[y].cast(pl.Float64).drop_nulls()
    v = v.filter(v.is_finite())
    return v.n_unique() <= 1


def outcome_distributions(outcomes: pl.DataFrame, mock_note: str | None, title: str):
    """The distribution of each paper outcome by cell, over seeds.

    Args:
        outcomes: a design's outcomes.parquet (one row per cell and seed).
        mock_note: the rehearsal mark for the title, or None.
        title: the figure's title.

    Returns:
        A matplotlib Figure, or a :class:`Skip` when the table has none of the paper outcomes.
    """
    every = [y for y in PAPER_OUTCOMES if y in outcomes.columns]
    if not every:
        return Skip("outcomes.parquet has none of the paper outcomes")
    flat = [y for y in every if _constant(outcomes, y)]  # one value in every run: no panel
    present = [y for y in every if y not in flat]
    if not present:
        return Skip("every paper outcome has one value in every run (" + ", ".join(flat) + ")")
    cells = outcomes["cell"].unique(maintain_order=True).to_list()
    fig, axes = _grid(len(present))
    for ax, y in zip(axes, present, strict=False):
        for i, cell in enumerate(cells):
            v = outcomes.filter(pl.col("cell") == cell)[y].cast(pl.Float64).drop_nulls()
            v = v.filter(v.is_finite()).to_numpy()
            if len(v):
                ax.bar(i, v.mean(), color="tab:blue", alpha=0.3)
                ax.plot([i] * len(v), v, "o", color="tab:blue", ms=2.5)
        ax.set_xticks(range(len(cells)), cells, rotation=60, ha="right", fontsize=6)
        ax.set_title(y, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    _title(fig, title + " (dots: seeds; bars: means)" + _not_shown(flat), mock_note)
    return fig


def forest(compared: Sequence[tuple[str, pl.DataFrame | Skip]], mock_note: str | None,
           title: str):
    """The forest plot: every declared contrast's mean paired difference with its 95 % t
    interval, one panel per outcome (its own units), one row per contrast, zero marked.

    Args:
        compared: (table title, its estimates: ``stats.estimates`` rows with cell, control,
            outcome, diff, t_low, t_high; a Skip is left out), the primary estimates first.
        mock_note: the rehearsal mark for the title, or None.
        title: the figure's title.

    Returns:
        A matplotlib Figure, or a :class:`Skip` when no contrast has a difference.
    """
    frames = []
    for i, (_, f) in enumerate(compared):
        if isinstance(f, Skip) or f.is_empty() or "diff" not in f.columns:
            continue
        f = f if "control" in f.columns else f.with_columns(pl.lit("").alias("control"))
        tag = "" if i == 0 else f" [{compared[i][0]}]"
        frames.append(f.select(
            (pl.col("cell") + pl.when(pl.col("control") != "").then(" - " + pl.col("control"))
             .otherwise(pl.lit(""))).alias("pair"), pl.lit(tag).alias("tag"),
            "outcome", "diff", "t_low", "t_high").filter(pl.col("diff").is_not_null()))
    if not frames:
        return Skip("no contrast has a paired difference")
    # a comparison table's pair that the primary estimates already hold is drawn once
    rows = (pl.concat(frames).unique(["pair", "outcome"], keep="first", maintain_order=True)
            .with_columns((pl.col("pair") + pl.col("tag")).alias("row")))
    labels = rows["row"].unique(maintain_order=True).to_list()
    every = [y for y in PAPER_OUTCOMES if y in rows["outcome"].to_list()]
    flat = _never_moved(rows, every)
    shown = [y for y in every if y not in flat]
    if not shown:
        return Skip("no outcome moved in any contrast (" + ", ".join(flat) + ")")
    plt = _pyplot()
    cols = min(3, len(shown))
    n_rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(n_rows, cols, figsize=(4.2 * cols + 3.0, (0.2 * len(labels) + 1.0)
                                                    * n_rows), squeeze=False)
    flat_axes = [ax for r in axes for ax in r]
    for ax in flat_axes[len(shown):]:
        ax.set_visible(False)
    pos = {label: i for i, label in enumerate(labels)}
    for k, (ax, y) in enumerate(zip(flat_axes, shown, strict=False)):
        ax.axvline(0, color="0.6", lw=0.8)
        for r in rows.filter(pl.col("outcome") == y).iter_rows(named=True):
            yi = pos[r["row"]]
            if r["t_low"] is not None and r["t_high"] is not None:
                ax.errorbar(r["diff"], yi, xerr=[[r["diff"] - r["t_low"]],
                                                  [r["t_high"] - r["diff"]]],
                            fmt="o", color="tab:blue", ms=3, capsize=2, lw=1)
            else:
                ax.plot(r["diff"], yi, "o", mfc="none", color="tab:blue", ms=3)
        ax.set_ylim(len(labels) - 0.5, -0.5)
        ax.set_yticks(range(len(labels)), labels if k % cols == 0 else [""] * len(labels),
                      fontsize=6)
        ax.set_title(y, fontsize=9)
        ax.tick_params(axis="x", labelsize=6)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
    _title(fig, title + " (dots: mean paired difference; bars: 95 % t interval; hollow: no "
           "interval)" + _not_shown(flat), mock_note)
    # room for the contrasts' labels (about 0.05 inch a character at this size)
    left = (0.05 * max(len(label) for label in labels) + 0.2) / fig.get_figwidth()
    fig.subplots_adjust(left=max(fig.subplotpars.left, left))
    return fig


def library_support(data: PaperData, mock_note: str | None, title: str):
    """§5.4's distribution: the empirical CDF of every replayed decision's standardized
    nearest-neighbour distance at N = 1,000 (the arm, and each seed faintly) against the
    library's own states at N = 100 (leave-one-out, from its percentiles), the N = 100 90th
    percentile and the N = 1,000 median marked: out of support when the median is right of it.

    Returns:
        A matplotlib Figure, or a :class:`Skip` without per-decision distances.
    """
    nn, ref = replayed(data), data.library_reference
    if nn.is_empty() or not ref:
        return Skip("no per-decision library distances (a frozen-library run made before "
                    "they were saved, or no library_1000 cell)")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for seed in sorted(nn["seed"].unique().to_list()):
        d = np.sort(nn.filter(pl.col("seed") == seed)["distance"].to_numpy())
        ax.step(d, np.arange(1, len(d) + 1) / len(d), where="post", color="tab:blue",
                alpha=0.25, lw=0.8)
    d = np.sort(nn["distance"].to_numpy())
    ax.step(d, np.arange(1, len(d) + 1) / len(d), where="post", color="tab:blue", lw=2,
            label=f"N = 1,000, every replayed decision ({len(d):,}; faint: each seed)")
    ax.plot(ref, np.arange(len(ref)) / (len(ref) - 1), color="tab:orange", lw=2,
            label="N = 100, the library's recorded states (leave-one-out)")
    median = float(np.median(d))
    ax.axvline(ref[90], color="tab:orange", ls="--", lw=1, label=f"N = 100 p90 {ref[90]:.3g}")
    ax.axvline(median, color="tab:blue", ls=":", lw=1.5, label=f"N = 1,000 median {median:.3g}")
    ax.set_xlabel("standardized nearest-neighbour distance")
    ax.set_ylabel("share of decisions at or below")
    ax.legend(fontsize=8, loc="lower right")
    verdict = ("OUT OF SUPPORT: reported, not evidence" if median > ref[90] else "in support")
    _title(fig, f"{title}: {verdict}", mock_note)
    return fig


def pilot_diagnostics(data: PaperData, title: str):
    """The pilot's diagnostics (validity, failures, cost per decision against the pass
    criteria of Run protocol §4) from its outcomes.

    Returns:
        A matplotlib Figure, or a :class:`Skip` when there are no pilot outcomes.
    """
    p, o = data.pilot, data.pilot_outcomes
    if p is None or o is None:
        return Skip(f"no pilot outcomes ({layout.outcomes_path('pilot_openai')}: "
                    "`.venv/bin/snakemake pilot`; rehearsal: `.venv/bin/snakemake rehearse_pilot`)")
    live = o.filter(pl.col("n_llm_decisions") > 0)
    if live.is_empty():
        return Skip("the pilot has no LLM decisions")
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    per = live.group_by("cell", maintain_order=True).agg(
        pl.col("llm_valid_rate").mean(), pl.col("llm_failure_rate").mean(),
        (pl.col("llm_usd").sum() / pl.col("n_llm_decisions").sum()).alias("usd_per_decision"))
    cells = per["cell"].to_list()
    x = range(len(cells))
    for ax, col, rule, label in ((axes[0][0], "llm_valid_rate", 0.80, "valid rate (>= 0.80)"),
                                 (axes[0][1], "llm_failure_rate", 0.10, "failure rate (<= 0.10)")):
        ax.bar(x, per[col].fill_null(0).to_list(), color="tab:blue")
        ax.axhline(rule, color="tab:red", ls="--", lw=1)
        ax.set_xticks(list(x), cells, fontsize=8)
        ax.set_title(label, fontsize=9)
    crit = (p.get("criteria") or {}).get("cost_per_decision", {})
    planned = _planned_rate(crit.get("rule", ""))
    ax = axes[1][0]
    ax.bar(x, per["usd_per_decision"].fill_null(0).to_list(), color="tab:blue")
    if planned:
        ax.axhspan(planned * 0.7, planned * 1.3, color="tab:green", alpha=0.15)
        ax.axhline(planned, color="tab:green", lw=1)
    ax.set_xticks(list(x), cells, fontsize=8)
    ax.set_title("USD per decision (band: planned ±30 %)", fontsize=9)
    ax = axes[1][1]
    sigma = p.get("sigma_d") or {}
    sd = _control_sd(data)
    outcomes = sorted({k for row in sigma.values() for k in row if k != "n_pairs"})
    width = 0.8 / max(1, len(sigma))
    for j, (cell, row) in enumerate(sorted(sigma.items())):
        vals = [(row.get(y) or 0.0) / sd[y] if sd.get(y) else (row.get(y) or 0.0)
                for y in outcomes]
        ax.bar([i + j * width for i in range(len(outcomes))], vals, width, label=cell)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(outcomes))], outcomes, rotation=60,
                  ha="right", fontsize=7)
    ax.set_title("σ̂_d / control SD" if sd else "σ̂_d (no control SD)", fontsize=9)
    ax.legend(fontsize=7)
    verdict = "PASS" if p.get("pass") else "FAIL"
    _title(fig, f"{title}: {verdict}, {p.get('total_usd', 0):.4f} USD, "
                f"{p.get('decisions', 0):,} decisions", data.mock_note)
    return fig


def _planned_rate(rule: str) -> float | None:
    try:
        return float(rule.rsplit(" ", 1)[-1])
    except ValueError:
        return None


def _control_sd(data: PaperData) -> dict[str, float]:
    s = data.sigma
    if s is None or s.is_empty():
        return {}
    out = {}
    for y in s.columns:
        if s[y].dtype.is_numeric():
            v = s[y].cast(pl.Float64).drop_nulls()
            if len(v) > 1 and (sd := v.std(ddof=1)):
                out[y] = float(sd)
    return out


def spend(overview: pl.DataFrame, mock_note: str | None, title: str):
    """Planned, spent and priced USD per tier against the tier budgets, and the cumulative
    spend against the project cap (Run protocol §1, §5.2-§5.3).

    Returns:
        A matplotlib Figure, or a :class:`Skip` when there are no tiers.
    """
    if overview.is_empty():
        return Skip("no tiers")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    tiers = overview["tier"].to_list()
    x = list(range(len(tiers)))
    w = 0.27
    # A mock design pays nothing: its planned bars say what the cells would cost live, and
    # there is no spend to set against a cap (a 0 USD cap line under them misleads).
    ax.bar([i - w for i in x], overview["usd_planned"].to_list(), w,
           label="planned if live" if mock_note else "planned")
    ax.bar(x, overview["usd_spent"].to_list(), w, label="spent")
    ax.bar([i + w for i in x], overview["usd_priced"].to_list(), w,
           label="priced (prices.yaml)" + (", mock answers" if mock_note else ""))
    budgets = overview["tier_budget"].to_list()
    for i, b in zip(x, budgets, strict=True):
        if b is not None and b > 0:
            ax.plot([i - 0.45, i + 0.45], [b, b], color="k", lw=1.5)
    ax.set_xticks(x, tiers)
    ax.set_ylabel("USD per tier (black: tier budget)")
    if mock_note:
        ax.set_xlabel("mock answers: nothing was paid (spent 0 USD); priced: what the "
                      "recorded answers would have cost at config/prices.yaml", fontsize=8)
        ax.legend(fontsize=8, loc="upper left")
        _title(fig, title, mock_note)
        return fig
    cum = ax.twinx()
    cum.plot(x, overview["cumulative_spent"].to_list(), "o-", color="tab:red",
             label="cumulative spent")
    cap = overview["project_cap"][0] if "project_cap" in overview.columns else None
    if cap is not None:
        cum.axhline(cap, color="tab:red", ls="--", lw=1, label=f"project cap {cap:g} USD")
    cum.set_ylabel("cumulative USD")
    cum.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()
    h2 = cum.get_legend_handles_labels()
    ax.legend(handles[0] + h2[0], handles[1] + h2[1], fontsize=8, loc="upper left")
    _title(fig, title, mock_note)
    return fig


@dataclass(frozen=True)
class Node:
    """A box of the protocol DAG figure: its key, label and grid position (row, column)."""

    key: str
    label: str
    row: int
    col: int


def protocol_graph(plan: pl.DataFrame, tiers: Sequence[str]) -> tuple[list[Node],
                                                                      list[tuple[str, str]]]:
    """The protocol's steps laid out by stage: one row per stage (Phase 5a and sigma, the pilot,
    the freeze, each tier, then the paper), each tier's row gate -> live runs -> outcomes
    -> reconcile, and each tier's gate below the previous tier's reconciliation.

    Args:
        plan: the design's cells (cell, tier_label, seeds, live, usd); a tier's row lists its
            cells when the design has that tier.
        tiers: the protocol's tiers in order (``PaperData.tiers``), one row each.

    Returns:
        Nodes with (row, col) grid positions (row 0 on top) and edges (from key, to key).
    """
    nodes = [Node("explore", "Phase 5a exploratory\n(mock, free)", 0, 0),
             Node("sigma", "sigma: share_0 x 30 seeds\n(free)", 0, 2),
             Node("pilot_runs", "pilot runs\n(live, <= 5 USD)", 1, 0),
             Node("pilot", "pilot manifest\n(σ̂_d, pass/fail)", 1, 1),
             Node("freeze", "freeze.json\n(code, design, MDE)", 2, 1)]
    edges = [("explore", "pilot_runs"), ("pilot_runs", "pilot"), ("pilot", "freeze")]
    prev = "freeze"
    library_gate = None  # the gate that waits for the decision library
    for i, tier in enumerate(tiers):
        row = 3 + i
        cells = plan.filter(pl.col("tier_label") == tier) if "tier_label" in plan.columns else (
            plan.clear())
        names = cells["cell"].to_list()
        shown = ", ".join(names[:4]) + (f", +{len(names) - 4}" if len(names) > 4 else "")
        live = int(cells.filter(pl.col("live"))["seeds"].sum()) if cells.height else 0
        budget = f"{float(cells['usd'].sum()):.2f} USD planned" if cells.height else "budget"
        nodes += [Node(f"gate_{tier}", f"gate {tier}\n{budget}", row, 0),
                  Node(f"live_{tier}", f"live runs {tier}\n{shown or 'cells of ' + tier}"
                       + (f"\n{live} live runs" if cells.height else ""), row, 1),
                  Node(f"out_{tier}", f"outcomes {tier}", row, 2),
                  Node(f"rec_{tier}", f"reconcile {tier}\n(spend vs plan)", row, 3)]
        edges += [(prev, f"gate_{tier}"), (f"gate_{tier}", f"live_{tier}"),
                  (f"live_{tier}", f"out_{tier}"), (f"out_{tier}", f"rec_{tier}")]
        if prev == f"rec_{LIBRARY_TIER}":
            library_gate = f"gate_{tier}"
        prev = f"rec_{tier}"
        if tier == LIBRARY_TIER:
            nodes.append(Node("library", f"decision library\n(from {tier} answers)", row, 4))
            edges.append((f"rec_{tier}", "library"))
    last = 3 + len(tiers)
    nodes += [Node("gather", "gather\noutcomes.parquet", last, 1),
              Node("sensitivity", "sensitivity grid\n(saved ticks)", last, 2),
              Node("paper", "paper/\n(tables, figures)", last, 3)]
    edges += [(prev, "gather"), *([("library", library_gate)] if library_gate else []),
              ("gather", "sensitivity"), ("sensitivity", "paper")]
    return nodes, edges


def protocol_dag(plan: pl.DataFrame, tiers: Sequence[str], mock_note: str | None, title: str):
    """The protocol as a DAG of its steps (the appendix figure), from the plan of the design and
    the protocol's tiers (one row each).

    Returns:
        A matplotlib Figure.
    """
    nodes, edges = protocol_graph(plan, tiers)
    plt = _pyplot()
    by_key = {n.key: n for n in nodes}
    rows = max(n.row for n in nodes) + 1
    fig, ax = plt.subplots(figsize=(11, 0.95 * rows + 0.6))
    dx, dy, w, h = 2.3, 1.0, 2.0, 0.72

    def xy(n: Node) -> tuple[float, float]:
        return n.col * dx, -n.row * dy

    for a, b in edges:
        (xa, ya), (xb, yb) = xy(by_key[a]), xy(by_key[b])
        if ya == yb:  # along the row: side to side
            start, end = (xa + w / 2, ya), (xb - w / 2, yb)
        else:  # down: bottom to top
            start, end = (xa, ya - h / 2), (xb, yb + h / 2)
        ax.annotate("", xy=end, xytext=start,
                    arrowprops={"arrowstyle": "-|>", "color": "0.3", "lw": 1.0,
                                "shrinkA": 0, "shrinkB": 0})
    for n in nodes:
        x, y = xy(n)
        live = n.key.startswith("live_") or n.key == "pilot_runs"
        ax.add_patch(plt.Rectangle((x - w / 2, y - h / 2), w, h, facecolor="#fde9d9" if live
                                   else "#eef3fb", edgecolor="#3465a4", lw=1))
        ax.text(x, y, n.label, ha="center", va="center", fontsize=7.5)
    for i, tier in enumerate(tiers):
        ax.text(-dx * 0.62, -(3 + i) * dy, tier, ha="right", va="center", fontsize=11,
                fontweight="bold")
    ax.set_xlim(-dx * 0.9, 4 * dx + w / 2 + 0.1)
    ax.set_ylim(-(rows - 1) * dy - h, h)
    ax.axis("off")
    _title(fig, title + " (orange: paid live runs)", mock_note)
    return fig

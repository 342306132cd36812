"""``ma summary``: one line per cell of a design's outcomes table (means over seeds), then the
mechanism-activity table, with every cell whose switched-on mechanism acted in no seed flagged."""

from __future__ import annotations

import argparse
from pathlib import Path

from market_agents.analysis import estimands
from market_agents.errors import ConfigError

COLUMNS = {
    "n": ("seeds", "{:.0f}"),
    "llm_share_traders": ("llm", "{:.2f}"),
    "llm_decisions_per_agent": ("dec/agent", "{:.1f}"),
    "llm_valid_rate": ("valid", "{:.3f}"),
    "volatility": ("vol", "{:.5f}"),
    "excess_kurtosis": ("kurt", "{:.1f}"),
    "mispricing": ("|P/V-1|", "{:.4f}"),
    "premium": ("P/V-1", "{:+.4f}"),
    "premium_pub": ("P/Vpub-1", "{:+.4f}"),
    "rad": ("RAD", "{:.4f}"),
    "n_bubbles": ("bubbles", "{:.2f}"),
    "n_crashes": ("crashes", "{:.2f}"),
    "shock_half_ticks": ("shock½", "{:.1f}"),
    "reject_ratio": ("rejects", "{:.4f}"),
    "spillover_dy": ("DY %", "{:.1f}"),
    "llm_usd": ("USD", "{:.4f}"),
}
def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma summary`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "summary",
        help="print a design's outcomes and mechanism activity, one line per cell",
        description="Read OUTCOMES (a design's outcomes.parquet, written by `ma gather` or the "
        "workflow) and print the mean of the main outcomes over each cell's seeds, then the "
        "mechanism-activity table (halts, rejects by reason, each mechanism's counts as its "
        "module labels them, the LLM traders' channel, memory, decision-cap and budget "
        "counts; mean per run) "
        "with, for each mechanism the cell switches on, the seeds in which it acted. USD is "
        "the answers' cost at the price table, also for the mock (which pays nothing; what "
        "was paid is printed below the table). A cell "
        "whose mechanism acted in no seed is flagged. Blank: undefined in that cell (e.g. "
        "spillover with one asset, channel counts without LLM traders).",
    )
    p.add_argument("outcomes", help="e.g. results/runs/exploratory/outcomes.parquet")
    p.add_argument("--runs", action="store_true",
                   help="also print the activity table for every run (cell x seed)")
    p.set_defaults(func=main)


def _table(frame, key: str, columns: dict[str, tuple[str, str]], extra: str | None = None):
    """Print ``frame`` (one row per ``key`` value) with the formatted ``columns``."""
    shown = [c for c in columns if c in frame.columns]
    width = max(len(str(k)) for k in frame[key]) + 2
    head = "".join(f"{columns[c][0]:>10}" for c in shown)
    print(f"{key:<{width}}{head}" + (f"  {extra}" if extra else ""))
    for row in frame.iter_rows(named=True):
        vals = "".join(f"{'' if row[c] is None else columns[c][1].format(row[c]):>10}"
                       for c in shown)
        print(f"{row[key]!s:<{width}}{vals}" + (f"  {row[extra]}" if extra else ""))


def main(args: argparse.Namespace) -> int:
    """Print a design's outcomes and mechanism activity, one line per cell, flagging a cell whose
    mechanism acted in no seed.

    Args:
        args: the parsed arguments of ``ma summary`` (``ma summary --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: no such outcomes table.

    Protocol:
        Run protocol §3 (the Phase 5a checks: every cell completes, halts only in the breaker cell,
        …).
    """
    import polars as pl

    path = Path(args.outcomes)
    if not path.is_file():
        raise ConfigError(f"{path}: no such outcomes table (run the design, then `ma gather`)")
    table = pl.read_parquet(path)
    present = [c for c in COLUMNS if c in table.columns]
    cells = (table.group_by("cell", maintain_order=True)
             .agg(pl.len().alias("n"), *[pl.col(c).mean() for c in present]))
    _table(cells, "cell", COLUMNS)
    if "llm_usd" in present:  # a mock run's answers are priced too: say what was paid
        line = "USD: the answers at the price table (config/prices.yaml), as if bought live"
        if "llm_usd_spent" in table.columns:
            paid = float(table["llm_usd_spent"].fill_null(0).sum())
            line += f"; paid: {paid:.4f} USD in all (llm_usd_spent)"
        print(line)
    labels = estimands.activity_labels()
    activity = [c for c in labels if c in table.columns]
    if not activity:
        return 0
    acted = estimands.fired(table)
    label = {cell: ", ".join(f"{m} {a}/{n}" for m, (a, n) in mechs.items()) or "-"
             for cell, mechs in acted.items()}
    per_cell = (table.group_by("cell", maintain_order=True)
                .agg(*[pl.col(c).mean() for c in activity])
                .with_columns(pl.col("cell").replace_strict(label, default="-").alias("fired")))
    print("\nmechanism activity (mean per run; fired: seeds where each mechanism the cell "
          "switches on acted / seeds)")
    _table(per_cell, "cell", labels, "fired")
    if args.runs:
        print("\nmechanism activity per run")
        runs = table.select("cell", "seed", *activity).with_columns(
            pl.format("{}/{}", "cell", "seed").alias("run"))
        _table(runs, "run", labels)
    for cell, mechs in acted.items():
        for m, (a, n) in mechs.items():
            if a == 0:
                print(f"FLAG {cell}: {m} is switched on but acted in none of its {n} seed(s)")
    return 0

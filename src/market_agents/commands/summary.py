"""``ma summary``: one line per cell of a design's outcomes table (means over seeds)."""

from __future__ import annotations

import argparse
from pathlib import Path

from market_agents.errors import ConfigError

COLUMNS = {
    "n": ("seeds", "{:.0f}"),
    "llm_share_traders": ("llm", "{:.2f}"),
    "llm_decisions_per_agent": ("dec/agent", "{:.1f}"),
    "llm_valid_rate": ("valid", "{:.3f}"),
    "volatility": ("vol", "{:.5f}"),
    "excess_kurtosis": ("kurt", "{:.1f}"),
    "mispricing": ("|P/V-1|", "{:.4f}"),
    "rad": ("RAD", "{:.4f}"),
    "n_bubbles": ("bubbles", "{:.2f}"),
    "n_crashes": ("crashes", "{:.2f}"),
    "shock_half_ticks": ("shock½", "{:.1f}"),
    "n_halts": ("halts", "{:.2f}"),
    "reject_ratio": ("rejects", "{:.4f}"),
    "spillover_dy": ("DY %", "{:.1f}"),
    "llm_usd": ("USD", "{:.4f}"),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "summary",
        help="print a design's outcomes, one line per cell",
        description="Read OUTCOMES (a design's outcomes.parquet, written by `ma gather` or the "
        "workflow) and print the mean of the main outcomes over each cell's seeds. Blank: the "
        "outcome is undefined in that cell (e.g. spillover with one asset).",
    )
    p.add_argument("outcomes", help="e.g. results/runs/exploratory/outcomes.parquet")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import polars as pl

    path = Path(args.outcomes)
    if not path.is_file():
        raise ConfigError(f"{path}: no such outcomes table (run the design, then `ma gather`)")
    table = pl.read_parquet(path)
    present = [c for c in COLUMNS if c in table.columns]
    cells = (table.group_by("cell", maintain_order=True)
             .agg(pl.len().alias("n"), *[pl.col(c).mean() for c in present]))
    shown = ["n", *present]
    width = max(len(c) for c in cells["cell"]) + 2
    print(f"{'cell':<{width}}" + "".join(f"{COLUMNS[c][0]:>10}" for c in shown))
    for row in cells.iter_rows(named=True):
        vals = "".join(f"{'' if row[c] is None else COLUMNS[c][1].format(row[c]):>10}"
                       for c in shown)
        print(f"{row['cell']:<{width}}{vals}")
    return 0

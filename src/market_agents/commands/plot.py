"""``ma plot``: figures from saved files (a run's price path, or an outcome across cells)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma plot`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "plot",
        help="draw a run's price path, or one outcome across a design's cells",
        description="PATH is a run directory: draw mid price, V and V^pub with shocks, halts "
        "and margin calls marked, and volume (default OUT: PATH/price.png). PATH is an "
        "outcomes.parquet: draw --outcome for every cell, seeds as dots and means as bars "
        "(default OUT: <outcome>.png beside it). Reads saved files only.",
    )
    p.add_argument("path", help="a run directory or a design's outcomes.parquet")
    p.add_argument("--outcome", default="volatility", help="column to draw for a design")
    p.add_argument("--asset", type=int, default=0, help="asset of a two-asset run")
    p.add_argument("--out", default=None, help="PNG file to write")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Draw a run's price path (a run directory) or one outcome across a design's cells (an
    outcomes.parquet).

    Args:
        args: the parsed arguments of ``ma plot`` (``ma plot --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: PATH is neither a complete run directory nor a readable outcomes
            table, or ``--outcome`` is not one of its columns.

    Protocol:
        None (a look at the data; the paper's figures are ``ma paper``'s).
    """
    from market_agents.analysis.figures import design_figure, run_figure

    path = Path(args.path)
    if path.is_dir():
        out = run_figure(path, args.out or path / "price.png", args.asset)
    else:
        out = design_figure(path, args.outcome,
                            args.out or path.with_name(f"{args.outcome}.png"))
    print(f"wrote {out}")
    return 0

"""``ma sigma``: the free σ estimates (protocol §3), the control SD of every outcome."""

from __future__ import annotations

import argparse

from market_agents import layout
from market_agents.pipeline.workflow_config import DEFAULTS


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma sigma`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "sigma", help="the control SD of every outcome (the free σ estimates, §3)",
        description="Read DESIGN's gathered outcomes.parquet (the sigma design: share_0, seeds "
        "1-30) and write control_sd.parquet beside it: one row per outcome with the number of "
        "control runs, their mean and SD (ddof 1).")
    p.add_argument("design", help="design YAML, e.g. config/designs/sigma.yaml")
    p.add_argument("--control", default=DEFAULTS.control,
                   help="control cell (default %(default)s)")
    p.add_argument("--mock", action="store_true", help="the rehearsal's outcomes")
    p.add_argument("--results", default=str(layout.ROOT),
                   help="results root (default %(default)s)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Write the control SD of every outcome from a design's gathered outcomes (the free σ
    estimates).

    Args:
        args: the parsed arguments of ``ma sigma`` (``ma sigma --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: the design's outcomes.parquet is missing or unreadable.

    Protocol:
        Run protocol §3 (free σ estimates: ``share_0``, seeds 1–30).
    """
    from market_agents.protocol.planning import load_checked
    from market_agents.protocol.steps import write_control_sd

    out = write_control_sd(load_checked(args.design, args.results), args.control, args.mock,
                           args.results)
    print(f"wrote {out}")
    return 0

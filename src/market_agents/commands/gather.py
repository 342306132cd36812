"""``ma gather``: every run's outcomes of a design into one parquet."""

from __future__ import annotations

import argparse

from market_agents import layout


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma gather`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "gather", help="gather a design's outcomes.json files into outcomes.parquet",
        description="Collect outcomes.json of every cell x seed of DESIGN into "
        f"{layout.outcomes_path('<design>')} ({layout.runs_dir(mock=True)}/... with --mock), "
        "one row "
        "per run with design, cell, tier, seed, llm_share, treatment_* labels and config_hash.")
    p.add_argument("design", help="design YAML, e.g. config/designs/exploratory.yaml")
    p.add_argument("--mock", action="store_true", help="gather the mock rehearsal")
    p.add_argument("--allow-missing", action="store_true",
                   help="skip runs without outcomes.json instead of failing")
    p.add_argument("--tier", default=None,
                   help="only the runs of TIER and of the --control cell, into "
                   "outcomes_<TIER>.parquet")
    p.add_argument("--control", default=None, help="the control cell gathered with --tier")
    p.add_argument("--results", default=str(layout.ROOT),
                   help="results root (default %(default)s)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Gather the outcomes.json of every cell × seed of a design into its outcomes.parquet.

    Args:
        args: the parsed arguments of ``ma gather`` (``ma gather --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        MissingRuns: a run of the design has no outcomes.json.
        StaleRun: a run's config no longer matches the design.

    Protocol:
        Run protocol §1 (``results/runs/<design>/outcomes.parquet``).
    """
    from market_agents.protocol.planning import load_checked
    from market_agents.protocol.steps import write_gather

    out = write_gather(load_checked(args.design, args.results), args.mock, args.results,
                       args.allow_missing, args.tier, args.control)
    print(f"wrote {out}")
    return 0

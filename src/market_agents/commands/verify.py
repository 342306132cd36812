"""``ma verify [RUN_ID]``: check the contract's results against their provenance and record."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma verify`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "verify", help="check .research/results/ against .provenance.json and the record",
        description="For RUN_ID (default: every results directory): re-derive metrics.json from "
        "eval_inputs/, check the sha256 of every file against .research/results/.provenance.json "
        "and the run against its declaration in .research/record.json. One line per check; "
        "exit 1 on any mismatch.")
    p.add_argument("run_id", nargs="?", default=None, help="one results directory")
    p.add_argument("--root", type=Path, default=Path("."), help="project directory")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Check ``.research/results/`` against each run's ``.provenance.json`` and the record
    (docs/contract.md).

    Args:
        args: the parsed arguments of ``ma verify`` (``ma verify --help`` lists them).

    Returns:
        The exit code: 0 when every checked run verifies, else 1.

    Raises:
        ConfigError: an unreadable record or results directory.

    Protocol:
        Run protocol §6 (the replication checklist).
    """
    from market_agents.pipeline.contract import verify

    checks = verify(args.run_id, args.root)
    for ok, line in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {line}")
    bad = sum(not ok for ok, _ in checks)
    print(f"{len(checks) - bad} of {len(checks)} checks passed")
    return 1 if bad else 0

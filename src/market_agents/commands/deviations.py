"""``ma deviations``: show the deviations log, or add a deviation not tied to a run."""

from __future__ import annotations

import argparse

from market_agents import layout


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma deviations`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "deviations", help=f"show the deviations log ({layout.deviations_log()})",
        description="Every deviation from the pre-registration, dated, oldest first: those "
        "given with --deviation to a confirmatory live call the freeze would refuse (with what "
        "differed), and those added here. `ma deviations add REASON` records one that is not "
        "tied to a run (protocol §6). The log is append-only.")
    p.add_argument("--results", default=str(layout.ROOT),
                   help="results root (default %(default)s)")
    p.add_argument("--json", action="store_true", help="the entries as JSON lines")
    dsub = p.add_subparsers(dest="deviations_command", metavar="ACTION")
    a = dsub.add_parser("add", help="record a deviation that is not tied to a run")
    a.add_argument("reason", help="what departs from the pre-registration, and why")
    a.add_argument("--design", default=None, help="the design it concerns")
    a.add_argument("--results", default=argparse.SUPPRESS,
                   help=f"results root (default {layout.ROOT})")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print the deviations log (``results/manifests/deviations.jsonl``), oldest first.

    Args:
        args: the parsed arguments of ``ma deviations`` (``ma deviations --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: an unreadable line in the log.

    Protocol:
        Run protocol §6 (deviations are listed in the paper's appendix with date and reason).
    """
    import json

    from market_agents.protocol import deviations
    from market_agents.protocol.freeze import git_revision

    if args.deviations_command == "add":
        entry = deviations.record(args.results, args.reason, [], args.design, git_revision())
        print(f"{entry['date']}  {entry['id']}: {entry['reason']} -> "
              f"{deviations.log_path(args.results)}")
        return 0
    entries = deviations.read(args.results)
    if args.json:
        for e in entries:
            print(json.dumps(e, sort_keys=True))
    else:
        print(deviations.render(entries))
    return 0

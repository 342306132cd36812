"""``ma spend``: the project's spend ledger against its caps."""

from __future__ import annotations

import argparse

from market_agents import layout


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma spend`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "spend", help="recorded live spend of the project against the project and pilot caps",
        description="The spend ledger every paying command reads before its first call "
        "(docs/guards.md): the USD of the paid answers of every finished live run under "
        "RESULTS/runs, every settled job of RESULTS/manifests/spend/ (ma run elsewhere, live "
        "Bazaar evaluations), and the plan of every job that started and never finished.")
    p.add_argument("--results", default=str(layout.ROOT),
                   help="results root (default %(default)s)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print (or with ``--json`` write) the project's spend ledger against the project and pilot
    caps (docs/guards.md).

    Args:
        args: the parsed arguments of ``ma spend`` (``ma spend --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: an unreadable ledger entry.

    Protocol:
        Run protocol §1 (hard limits: project ≤ 40 USD, pilot ≤ 5 USD).
    """
    import json

    from market_agents.pipeline.workflow_config import guard_settings
    from market_agents.protocol.ledger import spend, usd

    s = guard_settings()
    ledger = spend(args.results)
    summary = {**ledger.summary(), "pilot_usd": round(ledger.design_usd(s.pilot), 6),
               "project_cap_usd": s.project_cap_usd, "pilot_cap_usd": s.pilot_cap_usd}
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
        return 0
    for e in ledger.entries:
        state = "" if e.settled else "  (unfinished: counted at its plan)"
        print(f"{e.kind:<6} {usd(e.usd):>9} USD  {e.path}{state}")
    print(f"spent {usd(ledger.total_usd)} USD of the {usd(s.project_cap_usd)} USD project cap "
          f"({usd(ledger.unsettled_usd)} USD unfinished); pilot {s.pilot} "
          f"{usd(summary['pilot_usd'])} USD of {usd(s.pilot_cap_usd)} USD")
    return 0

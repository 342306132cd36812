"""``ma spend``: the project's spend ledger against its caps."""

from __future__ import annotations

import argparse

from market_agents.commands import add_results_flag, results_root


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma spend`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "spend", help="recorded live spend of the project against the project and pilot caps",
        description="The spend ledger every paying command reads before its first call "
        "(docs/guards.md): the USD of the paid answers of every finished live run under "
        "RESULTS/runs, every settled job of RESULTS/manifests/spend/ (ma run elsewhere, live "
        "Bazaar evaluations), and the plan of every job that started and never finished.")
    add_results_flag(p, "the working directory")
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
        ConfigError: an unreadable ledger entry, or ``--results`` is not a folder (a path with
            no ledger is never reported as 0 USD spent).

    Protocol:
        Run protocol §1 (hard limits: project ≤ 40 USD, pilot ≤ 5 USD).
    """
    import json
    from pathlib import Path

    from market_agents.errors import ConfigError
    from market_agents.pipeline.workflow_config import guard_settings
    from market_agents.protocol.ledger import spend, usd

    root = Path(results_root(args.results, None))
    if not root.is_dir() and args.results is not None:
        raise ConfigError(f"--results {root}: no such folder, so no spend ledger to read "
                          "(a results root holds runs/ and manifests/spend/)")
    s = guard_settings()
    ledger = spend(root)
    summary = {**ledger.summary(), "results_root": str(root),
               "pilot_usd": round(ledger.design_usd(s.pilot), 6),
               "project_cap_usd": s.project_cap_usd, "pilot_cap_usd": s.pilot_cap_usd}
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
        return 0
    if not ledger.entries:
        print(f"no spend ledger under {root}/ (no paid run, no spend record"
              f"{'' if root.is_dir() else '; the folder does not exist yet'}): nothing spent "
              "there")
    for e in ledger.entries:
        state = "" if e.settled else "  (unfinished: counted at its plan)"
        print(f"{e.kind:<6} {usd(e.usd):>9} USD  {e.path}{state}")
    print(f"spent {usd(ledger.total_usd)} USD of the {usd(s.project_cap_usd)} USD project cap "
          f"({usd(ledger.unsettled_usd)} USD unfinished); pilot {s.pilot} "
          f"{usd(summary['pilot_usd'])} USD of {usd(s.pilot_cap_usd)} USD")
    return 0

"""``ma spend``: the project's spend ledger against its caps; ``ma spend settle``: release the
reservation of a paid job that will not be resumed."""

from __future__ import annotations

import argparse

from market_agents.commands import add_results_flag, results_root


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma spend`` (and ``ma spend settle``) and their arguments to the ``ma``
    subcommands."""
    p = sub.add_parser(
        "spend", help="recorded live spend of the project against the project and pilot caps",
        description="The spend ledger every paying command reads before its first call "
        "(docs/guards.md): the USD of the paid answers of every finished live run under "
        "RESULTS/runs, every settled job of RESULTS/manifests/spend/ (ma run elsewhere, live "
        "Bazaar evaluations), and the worst case of every job that started and never finished "
        "(listed with its run directory and the command that started it).")
    add_results_flag(p, "the working directory")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=main)
    ssub = p.add_subparsers(dest="spend_command", metavar="ACTION")
    s = ssub.add_parser(
        "settle", help="settle a paid job that will not be resumed",
        description="Settle the spend record of a paid job that was stopped and will not be "
        "resumed (a run re-made under another --out): at the USD of the answers its process "
        "paid for, as its response cache recorded them, plus the worst case of the calls it "
        "had in flight, at most its worst case. Refused while its process, its Snakemake "
        "invocation's jobs, or a workflow that may resume it still run. The record is kept "
        "(docs/guards.md).")
    s.add_argument("run_dir", metavar="RUN_DIR",
                   help="the job's run directory (or output folder), as `ma spend` lists it")
    s.add_argument("--cache", default=None,
                   help="its response cache, for a record that does not name one (written "
                   "before records did)")
    s.add_argument("--in-flight-usd", type=float, default=None, metavar="USD",
                   help="the worst case of its calls in flight, for a record that cannot "
                   "bound them")
    # why: SUPPRESS keeps `ma spend --results DIR settle RUN_DIR` from being reset to None
    s.add_argument("--results", default=argparse.SUPPRESS,
                   help="results root whose ledger holds the record (default: as `ma spend`)")
    s.set_defaults(func=settle_main)


def main(args: argparse.Namespace) -> int:
    """Print (or with ``--json`` write) the project's spend ledger against the project and pilot
    caps (docs/guards.md), with each unfinished job's run directory and command.

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

    from market_agents.pipeline.workflow_config import guard_settings
    from market_agents.protocol.ledger import spend, usd

    root = _root(args)
    s = guard_settings()
    ledger = spend(root)
    unfinished = [e for e in ledger.entries if not e.settled]
    summary = {**ledger.summary(), "results_root": str(root),
               "pilot_usd": round(ledger.design_usd(s.pilot), 6),
               "project_cap_usd": s.project_cap_usd, "pilot_cap_usd": s.pilot_cap_usd,
               "unfinished": [{"path": e.path, "usd": round(e.usd, 6), "kind": e.kind,
                               "command": e.command, "started_at": e.started_at,
                               "record": e.record} for e in unfinished]}
    if args.json:
        print(json.dumps(summary, indent=1, sort_keys=True))
        return 0
    if not ledger.entries:
        print(f"no spend ledger under {root}/ (no paid run, no spend record"
              f"{'' if root.is_dir() else '; the folder does not exist yet'}): nothing spent "
              "there")
    for e in ledger.entries:
        if not e.settled:
            state = (f"  (unfinished: counted at its worst case; started {e.started_at} by "
                     f"`{e.command}`)")
        elif e.settled_by:
            state = f"  (settled by `{e.settled_by}`)"
        else:
            state = ""
        print(f"{e.kind:<6} {usd(e.usd):>9} USD  {e.path}{state}")
    print(f"spent {usd(ledger.total_usd)} USD of the {usd(s.project_cap_usd)} USD project cap "
          f"({usd(ledger.unsettled_usd)} USD unfinished); pilot {s.pilot} "
          f"{usd(summary['pilot_usd'])} USD of {usd(s.pilot_cap_usd)} USD")
    if unfinished:
        print(f"{len(unfinished)} unfinished job(s): run the same command again to resume one; "
              "one that will not be resumed is released by `ma spend settle RUN_DIR`")
    return 0


def settle_main(args: argparse.Namespace) -> int:
    """Settle the spend record of a paid job that will not be resumed
    (:func:`market_agents.pipeline.settle.settle`) and print one line of what it did.

    Args:
        args: the parsed arguments of ``ma spend settle``.

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: no unsettled record for RUN_DIR, something may still run it, its cache
            is unknown or unreadable, or its calls in flight cannot be bounded (one line that
            says what to pass).
    """
    from market_agents.pipeline.settle import settle
    from market_agents.protocol.ledger import spend, usd

    root = _root(args)
    rec = settle(root, args.run_dir, args.cache, args.in_flight_usd)
    how = rec["settlement"]
    print(f"settled {rec['out']} at {usd(rec['spent_usd'])} USD (held {usd(how['held_usd'])} "
          f"USD): {how['recorded_answers']} paid answer(s) recorded in {how['cache']} "
          f"{usd(how['recorded_usd'])} USD + in flight {usd(how['in_flight_usd'])} USD "
          f"({how['in_flight_basis']}); the ledger now holds {usd(spend(root).total_usd)} USD")
    return 0


def _root(args: argparse.Namespace):
    """The results root of ``--results``, refused when given and not a folder."""
    from pathlib import Path

    from market_agents.errors import ConfigError

    given = args.results  # `ma spend`'s, or `ma spend settle`'s when given there
    root = Path(results_root(given, None))
    if not root.is_dir() and given is not None:
        raise ConfigError(f"--results {root}: no such folder, so no spend ledger to read "
                          "(a results root holds runs/ and manifests/spend/)")
    return root

"""``ma record``: declare a pilot or full run in .research/record.json (the run contract)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma record`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "record", help="declare a pilot or full run in .research/record.json",
        description="The record is append-only: `declare` appends one entry (run id, stage, "
        "claim, the hashes of config/run/<run_id>.yaml and of the design files it runs, HEAD, "
        "the date) and commits nothing; commit it before `make run RUN_ID=… MODE=pilot|full`. "
        "It refuses a run id declared already and a record edited by hand.")
    rsub = p.add_subparsers(dest="record_command", metavar="ACTION", required=True)
    d = rsub.add_parser("declare", help="append a declaration")
    d.add_argument("run_id", help="config/run/<run_id>.yaml")
    d.add_argument("--claim", required=True, help="the claim the run serves")
    d.add_argument("--stage", choices=["pilot", "full"], default="full",
                   help="the MODE it will run in (default %(default)s)")
    d.add_argument("--root", type=Path, default=Path("."), help="project directory")
    d.set_defaults(func=_declare)
    s = rsub.add_parser("show", help="list the declarations (and check the record)")
    s.add_argument("--root", type=Path, default=Path("."), help="project directory")
    s.set_defaults(func=_show)


def _declare(args: argparse.Namespace) -> int:
    from market_agents.pipeline.contract import config_hash, design_hash, load_run_spec
    from market_agents.pipeline.record import RECORD, declare

    spec = load_run_spec(args.run_id, args.root)
    entry = declare(args.run_id, args.stage, args.claim, f"config/run/{args.run_id}.yaml",
                    config_hash(args.run_id, args.root), design_hash(spec, args.root),
                    args.root)
    print(f"declared {entry['run_id']} ({entry['stage']}) at {entry['commit'][:12]} in "
          f"{args.root / RECORD}; commit the record, then `make run RUN_ID={args.run_id} "
          f"MODE={args.stage}`")
    return 0


def _show(args: argparse.Namespace) -> int:
    from market_agents.pipeline.record import load, load_committed

    committed = {e["run_id"] for e in load_committed(args.root)}
    for e in load(args.root):
        state = "committed" if e["run_id"] in committed else "NOT committed"
        print(f"{e['run_id']:<20} {e['stage']:<5} {e['date']} {e['commit'][:12]} {state}: "
              f"{e['claim']}")
    return 0

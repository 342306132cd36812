"""``ma gate``: the budget gate before live runs (approve), the per-job check (check) and the
reconciliation of spend after a tier (reconcile)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from market_agents import layout
from market_agents.commands import add_guard_flags, add_results_flag, build_guard, results_root
from market_agents.errors import BudgetExceeded, ConfigError
from market_agents.pipeline.workflow_config import DEFAULTS


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma gate`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "gate",
        help="budget gate: approve a design/tier's live runs, check one, reconcile spend",
        description="The workflow's budget gate (protocol §1, §5.3). `approve` plans a tier's "
        "live spend, adds what finished runs recorded, refuses over the tier budget, the pilot "
        "cap or the project cap (spend from the project's spend ledger, docs/guards.md), checks "
        "the freeze for the confirmatory design, applies the order of sacrifice after an "
        f"overrun and writes {layout.budget_manifest('<design>', '<tier>')}. `check` is run by "
        "every live job. "
        "`reconcile` records a tier's spend against its plan.",
    )
    gsub = p.add_subparsers(dest="gate_command", metavar="ACTION", required=True)

    a = gsub.add_parser("approve", help="approve the live runs of one design/tier")
    a.add_argument("design", help="design YAML")
    a.add_argument("--tier", required=True, help="tier name (T1…T6), or 'all' for a design "
                   "without tiers")
    a.add_argument("--out", type=Path, required=True, help="budget manifest to write")
    a.add_argument("--project-cap", type=float, default=DEFAULTS.project_cap_usd,
                   help="USD, all live spend (default %(default)s)")
    a.add_argument("--pilot-cap", type=float, default=None, help="USD; set for the pilot design")
    a.add_argument("--freeze", type=Path, default=None,
                   help="require this freeze file to exist and match (default for the "
                   "confirmatory design: RESULTS/manifests/freeze.json)")
    a.add_argument("--after-failed-pilot", type=Path, default=None, metavar="PILOT_JSON",
                   help="require this pilot manifest to record a failed pilot (the re-pilot of "
                   "the failure path, §4)")
    a.add_argument("--tolerance", type=float, default=DEFAULTS.reconcile_tolerance,
                   help="spend over plan that triggers the order of sacrifice "
                   "(default %(default)s)")
    a.add_argument("--t1-min-seeds", type=int, default=DEFAULTS.t1_min_seeds,
                   help="T1 cells keep at least this (default %(default)s)")
    add_results_flag(a, "DESIGN")
    add_guard_flags(a)
    a.set_defaults(func=_approve)

    c = gsub.add_parser("check", help="fail unless a run is approved")
    c.add_argument("manifest", type=Path, help="budget manifest written by `approve`")
    c.add_argument("--cell", required=True)
    c.add_argument("--seed", type=int, required=True)
    c.set_defaults(func=_check)

    r = gsub.add_parser("reconcile", help="record a tier's spend against its plan")
    r.add_argument("design", help="design YAML")
    r.add_argument("--tier", required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--results", type=Path, default=layout.ROOT, help="results root")
    r.set_defaults(func=_reconcile)


def _write(path: Path, data: dict) -> None:
    from market_agents.atomic import write_json_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)


def _approve(args: argparse.Namespace) -> int:
    from market_agents.protocol.gate import Caps, approve, check_keys, design_runs, project_spent
    from market_agents.protocol.planning import load_checked

    design = load_checked(args.design)
    args.results = Path(results_root(args.results, args.design))
    where = f"{design.name}/{args.tier}"
    runs = design_runs(design, args.results)
    mine = [r for r in runs if r.tier == args.tier]
    if not mine:
        tiers = sorted({r.tier for r in runs})
        raise ConfigError(f"{args.design}: no cells in tier {args.tier!r} (tiers: "
                          f"{', '.join(tiers)})")
    guard = build_guard(str(args.results), args.deviation,
                        str(args.freeze) if args.freeze else None, anchor=args.design)
    record = {}
    if args.freeze is not None or guard.is_confirmatory(design.name):
        record = guard.check_freeze(design)
    failed_pilot = None
    if args.after_failed_pilot is not None:
        from market_agents.protocol.pilot import require_failed

        failed_pilot = require_failed(args.after_failed_pilot)
    check_keys(design, sorted({r.cell for r in mine if r.decisions > 0 and not r.done}), where)
    pilot_cap = args.pilot_cap
    if pilot_cap is not None and design.budget.cap_usd is not None:
        pilot_cap = min(pilot_cap, design.budget.cap_usd)
    caps = Caps(
        tier_budget_usd=design.budget.tiers.get(args.tier),
        pilot_cap_usd=pilot_cap,
        project_cap_usd=args.project_cap,
        project_spent_usd=project_spent(args.results),
        tolerance=args.tolerance,
        t1_min_seeds=args.t1_min_seeds,
    )
    manifest = approve(design.name, args.tier, runs, caps)
    manifest["design_file"] = str(args.design)
    manifest["freeze"] = record["freeze"]["file"] if record else None
    manifest.update({k: v for k, v in record.items() if k != "freeze"})
    if failed_pilot is not None:
        manifest["after_failed_pilot"] = failed_pilot
    _write(args.out, manifest)
    plan = manifest["plan"]
    print(f"budget gate {where}: approved {plan['live_runs']} live runs, "
          f"{plan['decisions']:,} decisions, {plan['usd']:.2f} USD planned; "
          f"spent so far {manifest['spent_usd']['project']:.2f} USD of the "
          f"{args.project_cap:.2f} USD project cap; cut {len(manifest['cut'])} runs -> {args.out}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from market_agents.protocol.gate import is_approved

    if not args.manifest.exists():
        raise ConfigError(f"{args.manifest} does not exist: run the budget gate first "
                          "(snakemake runs it before any live job)")
    manifest = json.loads(args.manifest.read_text())
    if not is_approved(manifest, args.cell, args.seed):
        raise BudgetExceeded(
            f"{args.manifest}: {args.cell} seed {args.seed} is not approved (cut by the order "
            "of sacrifice, or added after the gate ran). Re-run snakemake: the target then "
            "requests only approved runs and the gate re-approves a changed design"
        )
    print(f"approved: {manifest['design']}/{args.cell} seed {args.seed}")
    return 0


def _reconcile(args: argparse.Namespace) -> int:
    from market_agents.protocol.gate import reconcile_tier
    from market_agents.protocol.planning import load_checked

    record = reconcile_tier(load_checked(args.design), args.tier, args.results)
    _write(args.out, record)
    print(f"{record['design']}/{record['tier']}: spent {record['spent_usd']:.4f} USD against "
          f"{record['planned_usd']:.4f} USD planned for {record['runs_done']} runs -> {args.out}")
    return 0

"""``ma freeze``: write the freeze before the first confirmatory call, or verify it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from market_agents import layout
from market_agents.atomic import write_json_atomic
from market_agents.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma freeze`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "freeze",
        help=f"write or verify {layout.freeze_path()}",
        description="The freeze is the pre-registration: written once, before the first "
        "confirmatory call, it pins the code, the design and the analysis, and every "
        "confirmatory live call is checked against it. `create` records the git revision, "
        "SHA-256 of llm/prompting.py, its persona sets llm/prompt_sets.yaml, "
        "llm/schema.py and outcomes.py, the confirmatory design as a whole (cells, seeds, "
        "overrides, caps, tiers, budgets, model ids and prices), thresholds and the sensitivity "
        "grid, the pilot's sigma_d table, each tier's Holm family (its contrasts x the design's "
        "primary_outcomes) and the MDE per cell (paired t test, noncentral t, at the family's "
        "adjusted level). It names the cells that cannot detect the design's smallest effect "
        "of interest, and refuses while a pre-registered estimand cannot be estimated (a cell "
        "without control runs on its seeds, a primary outcome that never varies in the pilot "
        "or the rehearsal, a mechanism that never acts in the rehearsal) unless --deviation "
        "records it. It never overwrites a freeze. "
        "`verify` fails, naming each difference, when a frozen file or any part of the design "
        "changed, HEAD is not the frozen commit or the work tree has uncommitted changes; every "
        "confirmatory live call runs the same check (docs/guards.md).",
    )
    fsub = p.add_subparsers(dest="freeze_command", metavar="ACTION", required=True)
    c = fsub.add_parser("create", help="write the freeze")
    c.add_argument("design", help="confirmatory design YAML")
    c.add_argument("--sigma", default=None,
                   help="sigma design YAML whose runs confirm the fundamentals (default: "
                   "sigma.yaml beside the design)")
    c.add_argument("--pilot", type=Path, default=None,
                   help=f"pilot manifest (default {layout.pilot_path()}, or the "
                   "rehearsal's with --mock)")
    c.add_argument("--out", type=Path, default=None,
                   help=f"the freeze (default {layout.freeze_path()}, or the "
                   "rehearsal's with --mock)")
    c.add_argument("--mock", action="store_true",
                   help="freeze the rehearsal: from the rehearsed pilot, into "
                   f"{layout.manifests_dir(mock=True)}/")
    c.add_argument("--results", type=Path, default=layout.ROOT, help="results root")
    c.add_argument("--accept-failed-pilot", action="store_true",
                   help="freeze although a pilot criterion failed (record it as a deviation)")
    c.add_argument("--accept-unconfirmed-fundamentals", action="store_true",
                   help="freeze although SD(V^pub/V - 1) on the sigma seeds misses its target "
                   "(record it as a deviation)")
    c.add_argument("--deviation", default=None, metavar="REASON",
                   help="freeze although some pre-registered estimands cannot be estimated "
                   "(each is named when refused): logged in the deviations log with them, and "
                   "recorded in the freeze")
    c.set_defaults(func=_create)
    v = fsub.add_parser("verify", help="check the freeze against the code, design and commit "
                        "now")
    v.add_argument("design", help="confirmatory design YAML")
    v.add_argument("--freeze", type=Path, default=layout.freeze_path())
    v.set_defaults(func=_verify)


def _create(args: argparse.Namespace) -> int:
    import yaml

    from market_agents.protocol import deviations
    from market_agents.protocol.facts import default_thresholds, design_facts
    from market_agents.protocol.freeze import FreezeError, build
    from market_agents.protocol.measured import pilot_and_sigma_records
    from market_agents.protocol.pilot import after_failed_pilot, prompt_versions
    from market_agents.protocol.planning import load_checked

    out = args.out or layout.freeze_path(args.mock, args.results)
    pilot_file = args.pilot or layout.pilot_path(args.mock, args.results)
    if out.exists():
        raise FreezeError(f"{out} exists: a freeze is written once. To re-freeze, record "
                          "the deviation, then delete the file deliberately")
    if not pilot_file.exists():
        raise ConfigError(f"{pilot_file} does not exist: run `.venv/bin/snakemake "
                          f"{'rehearse_pilot' if args.mock else 'pilot'}` first")
    design = load_checked(args.design, args.results)
    pilot = json.loads(pilot_file.read_text())
    failed = [k for k, c in (pilot.get("criteria") or {}).items() if not c.get("pass")]
    repilot = None
    if failed and not args.accept_failed_pilot:
        path = layout.repilot_path(args.mock, args.results)
        try:
            repilot = after_failed_pilot(
                pilot, json.loads(path.read_text()) if path.exists() else None,
                prompt_versions(design), str(path))
        except ConfigError as exc:
            raise FreezeError(f"{pilot_file}: {exc}") from None
    prices = yaml.safe_load(design.prices_path.read_text()) or {}
    facts = design_facts(design)
    freeze = build(facts, pilot, prices, default_thresholds())
    if freeze["git"]["dirty"] and not args.mock:
        raise FreezeError("the work tree has uncommitted changes to tracked files: commit "
                          "them first (the freeze pins a commit, and every confirmatory live "
                          "call checks that HEAD is that commit and the tree is clean)")
    freeze["not_estimable"] = _estimability(args, design, facts, pilot)
    for line in freeze["underpowered"]:
        print(f"underpowered: {line}")
    moved = freeze["not_estimable"]["movement"] or {}
    for line in moved.get("never_moved", []):
        print(f"never moved in the rehearsal: {line}")
    for cell, ms in moved.get("mechanism_activity", {}).items():
        print(f"mechanism activity in the rehearsal: {cell}: "
              + "; ".join(m["phrase"] for m in ms.values()))
    freeze["pilot_failed_criteria_accepted"] = [] if repilot else failed
    freeze["repilot"] = repilot
    sigma = load_checked(args.sigma or design.path.parent / "sigma.yaml", args.results)
    freeze.update(pilot_and_sigma_records(
        facts, design, sigma, pilot, args.accept_unconfirmed_fundamentals, args.mock,
        layout.outcomes_path(sigma.name, args.mock, args.results)))
    if freeze["not_estimable"]["problems"]:
        entry = deviations.record(args.results, args.deviation,
                                  freeze["not_estimable"]["problems"], design.name)
        freeze["not_estimable"]["deviation"] = entry["id"]
    write_json_atomic(out, freeze)
    print(f"froze {design.name} at {freeze['git']['commit']} -> {out}")
    return 0


def _estimability(args: argparse.Namespace, design, facts: dict, pilot: dict) -> dict:
    """The estimands that cannot be estimated (``estimability.not_estimable``, with the
    confirmatory rehearsal's outcomes once it has run): FreezeError naming each, unless
    ``--deviation`` is given; returns what the freeze records (the deviation is logged just
    before the freeze is written)."""
    import polars as pl

    from market_agents.protocol.estimability import movement, not_estimable
    from market_agents.protocol.freeze import FreezeError

    rehearsed = layout.outcomes_path(design.name, True, args.results)
    gathered = pl.read_parquet(rehearsed) if rehearsed.exists() else None
    # the rehearsal's own freeze is written before its confirmatory runs: only a live freeze
    # refuses on what they show; either records it when they have run
    rehearsal = None if args.mock else gathered
    problems = not_estimable(facts["cells"], facts["families"], pilot, rehearsal,
                             facts["interactions"])
    record = {"problems": problems, "rehearsal": str(rehearsed) if rehearsal is not None
              else None, "deviation": None,
              "movement": None if gathered is None or not gathered.height else {
                  "outcomes": str(rehearsed),
                  **movement(facts["cells"], facts["families"], gathered,
                             facts["interactions"])}}
    if problems and not args.deviation:
        raise FreezeError(
            f"{len(problems)} pre-registered estimand(s) cannot be estimated: "
            + "; ".join(problems) + f". Resolve each in {design.path} (a control on the "
            "cell's seeds, other primary_outcomes, a cell marked unavailable), or freeze "
            "anyway with --deviation \"reason\" (logged with them)")
    return record


def _verify(args: argparse.Namespace) -> int:
    from market_agents.protocol.facts import design_facts
    from market_agents.protocol.freeze import git_revision, load, verify
    from market_agents.protocol.planning import load_checked

    frozen = load(args.freeze)
    verify(frozen, design_facts(load_checked(args.design)), git_revision(),
           where=str(args.freeze))
    print(f"{args.freeze}: matches the code, {args.design} and HEAD "
          f"{(frozen.get('git') or {}).get('commit') or '(no git repository)'}")
    return 0

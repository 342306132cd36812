"""``ma budget``: planned live decisions and USD of a design, before anything runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from market_agents.pipeline.workflow_config import DEFAULTS


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma budget`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "budget", help="planned live decisions and USD per cell and tier",
        description="Live LLM decisions and USD per cell, per tier and in total for DESIGN: "
        "LLM slots x decisions per agent x seeds, priced at the design's planning rate (the "
        "rate caps and tier budgets are checked at) and at config/prices.yaml for the given "
        "tokens per decision; then each tier's Holm family (its contrasts x the design's "
        "primary_outcomes) and every contrast's minimum detectable effect in units of sigma_d "
        "(paired t test, n - 1 df, power 0.8, at the family's level). Validates the whole "
        "design first.")
    p.add_argument("design", help="design YAML, e.g. config/designs/confirmatory.yaml")
    p.add_argument("--tokens-in", type=int, default=DEFAULTS.tokens_in,
                   help="input tokens per decision (default %(default)s)")
    p.add_argument("--tokens-out", type=int, default=DEFAULTS.tokens_out,
                   help="output tokens per decision (default %(default)s)")
    p.add_argument("--tier", action="append", default=None, help="only this tier (repeatable)")
    p.add_argument("--measured", action="append", default=[], metavar="PATH",
                   help="a response cache or run directory: show the tokens per decision its "
                   "answers used beside the planning profile (repeatable; planning figures "
                   "stay the protocol's)")
    p.add_argument("--pilot", type=Path, default=None, metavar="PILOT_JSON",
                   help="a pilot manifest (pilot.json, its sigma_d table): print each live "
                   "cell's MDE in the outcome's units as the freeze computes it, at the upper "
                   "confidence bound of sigma_d and at sigma_hat, and which cells are "
                   "underpowered")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print (or with ``--json`` write) the planned live decisions and USD of a design, per cell,
    per tier and in total.

    Args:
        args: the parsed arguments of ``ma budget`` (``ma budget --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: a bad design, negative token counts, or an unknown ``--tier``.

    Protocol:
        Run protocol §4 (the pilot table) and §5.2 (cells and budget by tier; planning rate 0.0005
        USD per nano decision, 0.0016 per mini).
    """
    from market_agents.analysis.stats import PILOT_SEEDS
    from market_agents.errors import ConfigError
    from market_agents.protocol.budget_report import measured_profile, render, render_measured
    from market_agents.protocol.estimability import (
        mde_table,
        power_in_sigma,
        render_mde,
        render_power,
        underpowered,
    )
    from market_agents.protocol.facts import design_facts
    from market_agents.protocol.planning import load_checked, plan_design, tier_totals

    if args.tokens_in < 0 or args.tokens_out < 0:
        raise ConfigError("--tokens-in and --tokens-out must be >= 0")
    design = load_checked(args.design)
    cells = None
    if args.tier:
        unknown = [t for t in args.tier if t not in design.tiers]
        if unknown:
            raise ConfigError(f"--tier {unknown[0]}: not a tier of {args.design} "
                              f"({', '.join(design.tiers)})")
        cells = [c for t in args.tier for c in design.tiers[t]]
    plans = plan_design(design, args.tokens_in, args.tokens_out, cells)
    measured = measured_profile(args.measured)
    facts = design_facts(design)
    # the paper excludes the pilot seeds from the confirmatory design's estimates only: so do
    # its MDEs here (paper/data.py, PaperData.exclude_seeds)
    exclude = PILOT_SEEDS if design.name == DEFAULTS.confirmatory else ()
    power = power_in_sigma(facts["cells"], facts["families"], facts["interactions"], exclude)
    pilot = _pilot(args)
    mdes = (mde_table(facts["cells"], pilot["sigma_d"], facts["families"], facts["power"],
                      facts["interactions"], exclude) if pilot else None)
    if cells is not None:
        power = {k: v for k, v in power.items() if v["tier"] in args.tier}
        mdes = None if mdes is None else {k: v for k, v in mdes.items() if k in cells}
    if args.json:
        print(json.dumps({
            "design": design.name, "tokens_in": args.tokens_in, "tokens_out": args.tokens_out,
            "planning_usd_per_decision": design.planning.usd_per_decision,
            "caps_use": "planning rate",
            "cells": [p.to_dict() for p in plans], "tiers": tier_totals(plans),
            "total": {"decisions": sum(p.decisions for p in plans),
                      "usd": sum(p.usd for p in plans),
                      "table_usd": sum(p.table_usd for p in plans)},
            "budget": design.budget.model_dump(), "measured_profile": measured,
            "families": facts["families"], "power": power,
            "mde": mdes, "underpowered": underpowered(mdes, design.smallest_effect)
            if mdes else None}, indent=1))
    else:
        print(render(design, plans, args.tokens_in, args.tokens_out))
        print(render_power(power, {t: f for t, f in facts["families"].items()
                                   if cells is None or t in args.tier}))
        if mdes is not None:
            print(render_mde(mdes, design.smallest_effect, str(args.pilot)))
        if args.measured:
            print(render_measured(measured, args.tokens_in, args.tokens_out))
    return 0


def _pilot(args: argparse.Namespace) -> dict | None:
    """The pilot manifest ``--pilot`` names (None without one); ConfigError naming the file
    when it is unreadable or has no sigma_d table."""
    from market_agents.errors import ConfigError

    if args.pilot is None:
        return None
    try:
        pilot = json.loads(args.pilot.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--pilot {args.pilot}: not a readable JSON file "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(pilot, dict) or not pilot.get("sigma_d"):
        raise ConfigError(f"--pilot {args.pilot}: no sigma_d table (run the pilot first)")
    return pilot

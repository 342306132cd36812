"""``ma paper``: the paper of a design (tables, figures, model cards, deviations) from its
saved files."""

from __future__ import annotations

import argparse
from pathlib import Path

from market_agents.pipeline.workflow_config import DEFAULTS


def register(sub: argparse._SubParsersAction) -> None:
    from market_agents.analysis.catalog import help_text

    p = sub.add_parser(
        "paper",
        help="write paper/ for a design: estimates, tables, figures, model cards, deviations",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Build the paper of DESIGN from its saved files only: the gathered "
        "outcomes.parquet, each run's ticks/trades/llm_decisions parquet and manifest.json, "
        "the budget manifests, the pilot, the freeze (minimum detectable effects), the sigma "
        "design (control SDs) and the deviations log. DESIGN is a design name (confirmatory, "
        "exploratory, ...) or rehearse_<design> for its mock rehearsal "
        "(results/rehearsal/<design>/): every table and figure of a rehearsal or of a design "
        "without live cells is marked mock-based. Tables and figures the design does not "
        "support are skipped, and paper.json and index.html say why. Pilot seeds 1-3 never "
        "enter a confirmatory estimate.\n\n" + help_text(),
    )
    p.add_argument("--design", default=DEFAULTS.confirmatory,
                   help="design name or rehearse_<design> (default %(default)s)")
    p.add_argument("--out", type=Path, default=Path("paper"), help="output folder (default "
                   "%(default)s; other files there, such as its Makefile, are kept)")
    p.add_argument("--designs-dir", type=Path, default=Path(DEFAULTS.designs_dir),
                   help="folder of the design files (default %(default)s)")
    p.add_argument("--confirmatory", default=DEFAULTS.confirmatory,
                   help="the confirmatory design: pilot seeds are excluded from its estimates "
                   "(default %(default)s)")
    p.add_argument("--sigma", default=DEFAULTS.sigma,
                   help="design of the control SDs (default %(default)s)")
    p.add_argument("--pilot", default=DEFAULTS.pilot,
                   help="pilot design of the diagnostics (default %(default)s)")
    p.add_argument("--results", type=Path, default=Path("results"),
                   help="results root to read (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from market_agents.protocol.paper import Roles, make_paper

    roles = Roles(confirmatory=args.confirmatory, sigma=args.sigma, pilot=args.pilot,
                  control=DEFAULTS.control, usd_per_decision=DEFAULTS.planning_usd_per_decision)
    summary = make_paper(args.design, args.out, args.designs_dir, roles, args.results,
                         progress=False if args.quiet else None)
    print(f"paper {args.design} -> {args.out}/: {len(summary['tables'])} tables, "
          f"{len(summary['figures'])} figures, model_cards.md, deviations.md, index.html")
    for what, why in summary["skipped"].items():
        print(f"skipped {what}: {why}")
    return 0

"""``ma pilot``: the pilot manifest from the pilot design's gathered outcomes."""

from __future__ import annotations

import argparse
from pathlib import Path

from market_agents import layout
from market_agents.atomic import write_json_atomic
from market_agents.errors import ConfigError
from market_agents.pipeline.workflow_config import DEFAULTS


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma pilot`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "pilot",
        help=f"write {layout.pilot_path()} (cost, validity, sigma_d, pass/fail)",
        description="Summarize the live pilot (protocol §4): total USD, tokens per decision, "
        "latency, validity and failure rates, cache-hit share, realized LLM order and volume "
        "shares, the SD of paired differences vs the control cell for every primary outcome, "
        "and pass/fail per criterion (validity >= 80 %, failures <= 10 %, cost per decision "
        "within ±30 % of the planned USD per decision, no budget halts).",
    )
    p.add_argument("design", help="pilot design YAML")
    p.add_argument("--outcomes", type=Path, default=None,
                   help="gathered outcomes.parquet (default: the design's)")
    p.add_argument("--out", type=Path, default=layout.pilot_path())
    p.add_argument("--mock", action="store_true",
                   help="summarize the mock rehearsal of the pilot "
                   f"({layout.runs_dir(mock=True)}/...)")
    p.add_argument("--control", default=DEFAULTS.control,
                   help="control cell of the paired differences (default %(default)s)")
    p.add_argument("--usd-per-decision", type=float, default=DEFAULTS.planning_usd_per_decision,
                   help="planned USD per decision the cost criterion checks (default "
                   "%(default)s)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import polars as pl

    from market_agents.layout import outcomes_path, run_dir
    from market_agents.protocol.pilot import prompt_versions, summarize
    from market_agents.protocol.planning import load_checked, run_config

    design = load_checked(args.design)
    path = args.outcomes or outcomes_path(design.name, args.mock)
    if not path.exists():
        raise ConfigError(f"{path} does not exist: run `.venv/bin/snakemake pilot` (or `ma "
                          "gather`) first")
    outcomes = pl.read_parquet(path)
    dirs = [run_dir(design.name, c, s, args.mock) for c, s in design.runs()]
    models = {c: [m for r in llm.paid_routes() for m in llm.model_ids(r)]
              for c in design.cells if not design.cells[c].unavailable
              for llm in [run_config(design, c).population.llm]}
    summary = {"design": design.name, "rehearsal": args.mock,
               "prompt_versions": prompt_versions(design),
               **summarize(outcomes, dirs, control=args.control,
                           usd_per_decision=args.usd_per_decision, models=models)}
    write_json_atomic(args.out, summary)
    failed = [k for k, c in summary["criteria"].items() if not c["pass"]]
    print(f"pilot {design.name}: {summary['total_usd']:.4f} USD, {summary['decisions']:,} "
          f"decisions, {'PASS' if summary['pass'] else 'FAIL: ' + ', '.join(failed)} -> {args.out}")
    return 0

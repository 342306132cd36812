"""``ma design``: run, score and gather every cell x seed of a design (resumable)."""

from __future__ import annotations

import argparse
import os

from market_agents import layout
from market_agents.commands import (
    add_guard_flags,
    add_results_flag,
    add_serving_flags,
    build_guard,
    results_root,
)
from market_agents.outputs import check_dir


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma design`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "design", help="run a whole design (resumable), then gather its outcomes",
        description="Validate DESIGN, then run and score each cell x seed: cells served by "
        "the mock in parallel processes (--workers), live cells one at a time through the "
        "shared cache. A run whose outcomes.json exists is reused, so an interrupted design "
        "resumes without re-calling anything. Live runs pass the freeze check (confirmatory "
        "design) and the project/pilot caps against the spend ledger before the first call "
        "(docs/guards.md). Ends with `ma gather`.")
    p.add_argument("design", help="design YAML, e.g. config/designs/exploratory.yaml")
    p.add_argument("--cells", nargs="+", default=None, help="only these cells")
    p.add_argument("--max-seeds", type=int, default=None, help="only the first N seeds per cell")
    p.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                   help="processes for mock cells (ignored for live cells)")
    p.add_argument("--cache", default=None,
                   help="LLM response cache (default for live cells: "
                   f"{layout.cache_path('<design>')})")
    p.add_argument("--mock", action="store_true",
                   help="rehearse on the mock with the same model ids; results under "
                   f"{layout.runs_dir(mock=True)}/")
    add_results_flag(p, "DESIGN")
    add_serving_flags(p, "every run")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_guard_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run a whole design (resumable: finished runs are kept), then gather its outcomes.

    Args:
        args: the parsed arguments of ``ma design`` (``ma design --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: a bad design, ``--workers`` or ``--max-seeds`` below 1.
        FreezeError, BudgetExceeded: the guards of a paying design (docs/guards.md).
        RunFailed: a run's LLM calls failed too often.

    Protocol:
        Run protocol §2 (``ma design``), §3 (Phase 5a) and §5 (the confirmatory tiers).
    """
    import time

    from market_agents.errors import ConfigError
    from market_agents.protocol.planning import load_checked
    from market_agents.protocol.steps import run_design, write_gather

    if args.workers < 1 or (args.max_seeds is not None and args.max_seeds < 1):
        raise ConfigError("--workers and --max-seeds must be >= 1")
    args.results = str(check_dir(results_root(args.results, args.design), "--results",
                                 output=False))
    design = load_checked(args.design, args.results)
    started = time.perf_counter()
    counts = run_design(design, args.cells, args.max_seeds, args.workers, args.cache, args.mock,
                        args.results, progress=False if args.quiet else None,
                        replay=args.replay, new_cache=args.new_cache,
                        guard=build_guard(args.results, args.deviation, anchor=args.design))
    out = write_gather(design, args.mock, args.results, allow_missing=bool(
        args.cells or args.max_seeds))
    print(f"{design.name}: {counts['ran']} ran ({counts['llm']}), {counts['scored']} scored, "
          f"{counts['reused']} reused in {time.perf_counter() - started:.1f} s; wrote {out}")
    return 0

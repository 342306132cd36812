"""``ma run``: one simulation from a config file into a run directory."""

from __future__ import annotations

import argparse

from market_agents.commands import (
    add_guard_flags,
    add_results_flag,
    add_serving_flags,
    build_guard,
    results_root,
)
from market_agents.config import load_config


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma run`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "run",
        help="run one simulation",
        description="Run one simulation of CONFIG with SEED and write config.yaml, "
        "manifest.json and the ticks/trades/orders/agents/llm_decisions parquet files to OUT "
        "(written to a temporary directory, then renamed: OUT is complete or absent). A config "
        "that calls a paid provider is checked against the spend ledger of --results first, "
        "and, when it is a confirmatory cell's config, against the freeze (docs/guards.md).",
    )
    p.add_argument("config", help="simulation config YAML, e.g. config/baseline.yaml")
    p.add_argument("--seed", type=int, required=True, help="run seed (0..2**32-1)")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--cache", default=None,
                   help="LLM response cache (a directory): the record of every answer; "
                   "replaying it makes no paid calls")
    add_serving_flags(p)
    p.add_argument("--expect", default=None, metavar="RUN_DIR",
                   help="a finished run this one must reproduce: a stored answer that differs "
                   "from the one it used stops the run (default: OUT when it exists)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key; VALUE is YAML, e.g. "
                   "--set exchange.halt_threshold=0.05 (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary line")
    add_results_flag(p, "CONFIG", "results root whose spend ledger and freeze apply")
    add_guard_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run one simulation of a config with a seed into a run directory (docs/market.md).

    Args:
        args: the parsed arguments of ``ma run`` (``ma run --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: a bad config, ``--set`` or seed, an unwritable ``--out``.
        BudgetExceeded: a paid run's worst case (its ``usd_cap``) plus the spend ledger
            would pass the project or pilot cap.
        FreezeError: a confirmatory cell's config without a matching freeze.
        RunFailed: too many LLM calls failed (see :func:`market_agents.sim.runner.run_to_dir`).

    Protocol:
        Run protocol §1 (keys, hard limits, the run directory) and §2 (``ma run``).
    """
    from market_agents.config import check_seed
    from market_agents.sim.rundir import llm_did, read_manifest
    from market_agents.sim.runner import prepare_out, run_to_dir

    sets = args.sets + (["population.llm.replay=true"] if args.replay else [])
    config = load_config(args.config, sets)
    check_seed(args.seed)
    prepare_out(args.out, config, args.seed)
    record: dict = {}
    paying = None
    # without LLM traders no call is paid, so no guard has anything to check (the guards
    # load the protocol's modules: a fifth of a short classical run's CPU)
    if config.population.n_llm > 0:
        guard = build_guard(results_root(args.results, args.config), args.deviation,
                            anchor=args.config)
        record, planned, worst = guard.config_run(config,
                                                  f"ma run {args.config} --out {args.out}")
        paying = guard.paying(args.out, planned, worst_usd=worst, cache=args.cache,
                              in_flight=config.population.llm.paid_in_flight()
                              ) if planned > 0 else None
    progress = False if args.quiet else None
    serving = {"new_cache": args.new_cache, "expect": args.expect}
    out = run_to_dir(config, args.seed, args.out, args.cache, progress, record=record,
                     paying=paying, **serving)
    if not args.quiet:
        manifest = read_manifest(out)
        files = sum(1 for p in out.iterdir() if p.is_file())
        print(f"wrote {out}: {files} files, {llm_did([manifest['llm_usage']])} (conservation "
              f"{'ok' if manifest['final_conservation_ok'] else 'FAILED'}, "
              f"{manifest['wall_time_s']:.2f} s)")
    return 0

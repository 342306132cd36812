"""``ma cell``: cell x seed runs of a design into their run directories (the simulate step); with
``--score`` also their outcomes.json, in the same process (the workflow's run rules: one process
per live run, one per batch of free or rehearsed runs, cells x seeds)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from market_agents import layout
from market_agents.commands import (
    add_guard_flags,
    add_results_flag,
    add_serving_flags,
    build_guard,
    results_root,
)
from market_agents.commands.outcomes import add_threshold_args, thresholds
from market_agents.outputs import check_dir


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma cell`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "cell", help="run cell x seed of a design into its run directory",
        description="Build the config of each CELL from DESIGN and run it with each SEED, one "
        f"after the other in this process, into {layout.design_dir('<design>')}/<cell>/seed<NNNN>/ "
        f"({layout.runs_dir(mock=True)}/... with --mock). Live cells always use a response "
        f"cache (default {layout.cache_path('<design>')}). Before a "
        "live run's first call: the freeze check for the confirmatory design and the "
        "project/pilot caps against the spend ledger (docs/guards.md). Scores only with "
        "--score (otherwise `ma outcomes RUN_DIR` does).")
    p.add_argument("design", help="design YAML")
    p.add_argument("cell", nargs="+", help="one or more cell names, run in the order given")
    p.add_argument("--seed", type=int, nargs="+", required=True, metavar="SEED",
                   help="one or more of each cell's seeds, run in the order given")
    p.add_argument("--mock", action="store_true",
                   help="rehearse: serve every live route by the mock with the same model ids")
    p.add_argument("--cache", default=None, help="LLM response cache path")
    add_serving_flags(p, "the run")
    add_results_flag(p, "DESIGN")
    p.add_argument("--any-seed", action="store_true", help="allow a seed not in the cell's list")
    p.add_argument("--score", action="store_true",
                   help="also score each run into its outcomes.json in this process, as "
                   "`ma design` does (a finished run is not run again: one with outcomes.json is "
                   "kept, one without is scored)")
    p.add_argument("--replace-stale", action="store_true",
                   help="with --score: run again a finished run made from another config than "
                   "the cell's now, if it paid for nothing (the workflow's free cells); a stale "
                   "run that paid still stops")
    p.add_argument("--runs-file", default=None, metavar="PATH",
                   help="with --score: when every run is scored, write PATH, a JSON record of "
                   "each cell's config_hash and each run's outcomes.json sha256 (the workflow's "
                   "target for a batch of free or rehearsed runs: "
                   f"{layout.design_dir('<design>')}/runs_<first>-<last>_<key>.json)")
    add_threshold_args(p)
    add_guard_flags(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run cell × seed of a design into its run directories, cell by cell and seed after seed
    (the Snakemake ``simulate``, ``simulate_live`` and ``rehearse`` steps).

    Args:
        args: the parsed arguments of ``ma cell`` (``ma cell --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: a seed that is not a cell's, a cell or seed given twice, a bad design.
        StaleRun: a finished run made from another config (unless ``--replace-stale`` and it
            paid for nothing).
        FreezeError: a confirmatory live cell without a matching freeze.
        BudgetExceeded: the spend ledger's project or pilot cap would be passed.
        RunFailed: too many LLM calls failed (see :func:`market_agents.sim.runner.run_to_dir`).

    Protocol:
        Run protocol §1 (results layout) and §5.1 (a confirmatory live cell runs only under the
        freeze).
    """
    from market_agents.errors import ConfigError
    from market_agents.layout import run_dir
    from market_agents.protocol.batches import write_batch_record
    from market_agents.protocol.planning import load_checked, run_config
    from market_agents.protocol.steps import PaidRuns, run_and_score, simulate
    from market_agents.sim.rundir import llm_did, read_manifest

    args.results = str(check_dir(results_root(args.results, args.design), "--results",
                                 output=False))
    design = load_checked(args.design, args.results)
    for name in args.cell:
        cell = design.cell(name)
        run_config(design, name)  # an unavailable cell fails here, naming why
        for seed in args.seed:
            if seed not in cell.seeds and not args.any_seed:
                raise ConfigError(f"--seed {seed}: not a seed of cell {name!r} in "
                                  f"{args.design} ({cell.seeds[0]}..{cell.seeds[-1]}); "
                                  "--any-seed allows it")
    for given, what in ((args.cell, "cell"), (args.seed, "--seed")):
        if len(set(given)) != len(given):
            raise ConfigError(f"{what} {' '.join(map(str, given))}: a {what.strip('-')} is "
                              "given twice")
    for flag, given in (("--replace-stale", args.replace_stale), ("--runs-file", args.runs_file)):
        if given and not args.score:
            raise ConfigError(f"{flag} goes with --score")
    if args.runs_file:  # checked before any run: a record that cannot be written wastes them
        record = Path(args.runs_file)
        try:  # the record is written through a temporary file beside it: try one
            record.parent.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=record.parent).close()
            writable = not record.is_dir()
        except OSError:
            writable = False
        if not writable:
            raise ConfigError(f"--runs-file {args.runs_file}: not a file that can be written "
                              "(a directory, or its folder cannot be made or written)")
    # only a live cell's runs are guarded (steps.simulate): a free cell's job need not load the
    # guards' caps, ledger and workflow config (a tenth of a workflow job's start-up)
    live = not args.mock and any(design.is_live(name) for name in args.cell)
    guard = build_guard(args.results, args.deviation, anchor=args.design) if live else None
    paid = PaidRuns(design, args.mock, args.results)  # read once, for every run
    for name in args.cell:
        for seed in args.seed:
            path = run_dir(design.name, name, seed, args.mock, args.results)
            if args.score:
                did = run_and_score(design, name, seed, args.mock, args.cache, args.results,
                                    thresholds(args), replay=args.replay,
                                    new_cache=args.new_cache, guard=guard,
                                    replace_stale=args.replace_stale, paid=paid)
            else:
                simulate(design, name, seed, args.mock, args.cache, args.results,
                         replay=args.replay, new_cache=args.new_cache, guard=guard, paid=paid)
                did = "wrote"
            usage = read_manifest(path)["llm_usage"] if did != "reused" else None
            print(f"{did} {path}" + (f": {llm_did([usage])}" if usage else ""), flush=True)
    if args.runs_file:
        out = write_batch_record(design, args.cell, args.seed, args.mock, args.runs_file,
                                 args.results)
        print(f"wrote {out}")
    return 0

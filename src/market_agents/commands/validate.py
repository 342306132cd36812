"""``ma validate``: the stylized-facts table of a config over many seeds."""

from __future__ import annotations

import argparse
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from market_agents.config import MAX_SEED, MAX_SEEDS, load_config
from market_agents.inputs import int_in


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma validate`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "validate",
        help="is the market realistic? stylized facts over seeds",
        description="Simulate CONFIG for SEEDS seeds and print the median stylized facts of "
        "mid-price log returns (excess kurtosis, |acf lag 1|, volatility clustering, Hill tail "
        "index) and the share of seeds without a 5 %%/10-tick bubble, each against its target. "
        "Exit code 1 if a target is missed.",
    )
    p.add_argument("config", nargs="?", default="config/baseline.yaml")
    p.add_argument("--seeds", type=int_in(1, MAX_SEEDS), default=20,
                   help=f"number of seeds (default 20, at most {MAX_SEEDS:,})")
    p.add_argument("--first-seed", type=int_in(0, MAX_SEED), default=1)
    p.add_argument("--workers", type=int_in(1, 256), default=2, help="parallel processes")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=main)


def _facts(args: tuple[str, list[str], int]) -> dict[str, float]:
    from market_agents.analysis.stylized import facts
    from market_agents.sim.simulation import simulate

    path, sets, seed = args
    config = load_config(path, sets)
    ticks = simulate(config, seed, progress=False)["ticks"]
    ticks = ticks.filter(ticks["asset"] == 0)
    return facts(ticks["mid_price"].to_numpy(), ticks["fundamental"].to_numpy(),
                 config.simulation.burn_in)


def main(args: argparse.Namespace) -> int:
    """Simulate a config over seeds and print the median stylized facts of its mid-price returns
    against their targets.

    Args:
        args: the parsed arguments of ``ma validate`` (``ma validate --help`` lists them).

    Returns:
        The exit code: 0 when every fact meets its target, else 1.

    Raises:
        ConfigError: seeds out of range.

    Protocol:
        None (calibration of the baseline, docs/market.md).
    """
    from market_agents.analysis.stylized import TARGETS, verdict
    from market_agents.errors import ConfigError

    if args.first_seed + args.seeds - 1 > MAX_SEED:
        raise ConfigError(f"--first-seed {args.first_seed} --seeds {args.seeds}: the last seed "
                          f"is past {MAX_SEED}")
    load_config(args.config, args.sets)  # fail fast on a bad config
    jobs = [(args.config, args.sets, s) for s in range(args.first_seed,
                                                       args.first_seed + args.seeds)]
    # spawn, not fork: a forked child can inherit polars' thread pool locked and hang.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=ctx) as pool:
        rows = list(pool.map(_facts, jobs))
    result = verdict(rows)
    if args.json:
        print(json.dumps({k: {"median": m, "ok": ok} for k, (m, ok) in result.items()}, indent=2))
    else:
        print(f"stylized facts of mid-price log returns, median over {args.seeds} seeds "
              f"({args.first_seed}..{args.first_seed + args.seeds - 1}) of {args.config}")
        print(f"{'fact':<24}{'value':>9}  {'target':<14}ok")
        for key, (med, ok) in result.items():
            lo, hi = TARGETS.get(key, (0.9, None))
            target = (f"> {lo}" if hi is None else f"< {hi}" if lo is None
                      else f"{lo} .. {hi}")
            if key == "seeds_without_bubble":
                target = ">= 0.9"
            print(f"{key:<24}{med:>9.3f}  {target:<14}{'yes' if ok else 'NO'}")
    return 0 if all(ok for _, ok in result.values()) else 1

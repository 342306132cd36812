"""``ma outcomes``: score one saved run into its outcomes.json."""

from __future__ import annotations

import argparse
import json

from market_agents.errors import ConfigError

# Beyond these no spillover is estimable or worth the time (the FEVD loops over the horizon);
# an order the run is too short for gives a null spillover with a note instead.
MAX_VAR_ORDER, MAX_HORIZON = 100, 1000


def parse_episode(value: str, flag: str) -> tuple[float, int]:
    """``0.05:10`` -> (0.05, 10): a relative threshold and a tick count."""
    level, sep, ticks = value.partition(":")
    try:
        out = float(level), int(ticks)
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected LEVEL:TICKS, e.g. 0.05:10") from None
    if not sep or not 0 < out[0] < 1 or out[1] < 1:
        raise ConfigError(f"{flag} {value!r}: LEVEL must be in (0, 1) and TICKS >= 1")
    return out


def episode_defaults() -> tuple[str, str]:
    """The protocol's bubble and crash thresholds (``outcomes.Thresholds``) as GAP:TICKS."""
    from market_agents.analysis.outcomes import Thresholds

    th = Thresholds()
    return f"{th.bubble_gap:g}:{th.bubble_ticks}", f"{th.crash_drop:g}:{th.crash_ticks}"


def add_threshold_args(p: argparse.ArgumentParser) -> None:
    """Add the outcome thresholds (``--bubble``, ``--crash``, ``--var-order``,
    ``--horizon``) to a command, with the workflow config's defaults."""
    from market_agents.analysis.outcomes import Thresholds

    bubble, crash = episode_defaults()
    p.add_argument("--bubble", default=bubble, metavar="GAP:TICKS",
                   help="bubble: price >= GAP above V for >= TICKS ticks (default %(default)s)")
    p.add_argument("--crash", default=crash, metavar="DROP:TICKS",
                   help="crash: price >= DROP below its max of the last TICKS ticks "
                   "(default %(default)s)")
    p.add_argument("--var-order", type=int, default=Thresholds().var_order,
                   help=f"VAR order p of the DY spillover, 1..{MAX_VAR_ORDER} (null, with a "
                   "note, when the run is too short for it; default %(default)s)")
    p.add_argument("--horizon", type=int, default=Thresholds().horizon,
                   help=f"FEVD horizon H of the DY spillover, 1..{MAX_HORIZON} "
                   "(default %(default)s)")


def thresholds(args: argparse.Namespace):
    """The :class:`~market_agents.analysis.outcomes.Thresholds` the threshold arguments give.

    Raises:
        ConfigError: a malformed ``GAP:TICKS``/``DROP:TICKS``, or an order or horizon out
            of range.
    """
    from market_agents.analysis.outcomes import Thresholds

    gap, bticks = parse_episode(args.bubble, "--bubble")
    drop, cticks = parse_episode(args.crash, "--crash")
    if not 1 <= args.var_order <= MAX_VAR_ORDER:
        raise ConfigError(f"--var-order {args.var_order}: must be in 1..{MAX_VAR_ORDER}")
    if not 1 <= args.horizon <= MAX_HORIZON:
        raise ConfigError(f"--horizon {args.horizon}: must be in 1..{MAX_HORIZON}")
    return Thresholds(gap, bticks, drop, cticks, args.var_order, args.horizon)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma outcomes`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "outcomes", help="score a saved run into outcomes.json",
        description="Read only RUN_DIR's parquet files, manifest and config, compute every "
        "outcome (definitions: market_agents.analysis.outcomes) and write them atomically, with "
        "the thresholds used: at the protocol's thresholds to RUN_DIR/outcomes.json (what "
        "`ma gather` and the paper read); at any other thresholds to a file beside it named by "
        "them (e.g. outcomes_bubble0.03x10_crash0.1x20_var1_h10.json), so re-scoring never "
        "overwrites the run's outcomes.")
    p.add_argument("run_dir",
                   help="a run directory, e.g. results/runs/exploratory/share_25/seed0001")
    add_threshold_args(p)
    p.add_argument("--print", dest="show", action="store_true", help="also print the outcomes")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Score a saved run directory at the given thresholds (``outcomes.json`` at the protocol's;
    a file beside it at any others).

    Args:
        args: the parsed arguments of ``ma outcomes`` (``ma outcomes --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        RunDirError: a missing or incomplete run directory.

    Protocol:
        Run protocol §5.1 (thresholds: bubble 5 %/10 ticks, crash 10 %/20 ticks) and §6 (analysis
        reads only the saved files).
    """
    from market_agents.analysis.scoring import write_outcomes

    target, out = write_outcomes(args.run_dir, thresholds(args))
    if args.show:
        print(json.dumps(out, indent=1, sort_keys=True))
    else:
        print(f"wrote {target} ({len(out) - 1} values)")
    return 0

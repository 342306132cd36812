"""``ma sensitivity``: re-score saved runs over the threshold grid, without re-simulating."""

from __future__ import annotations

import argparse

from market_agents import layout
from market_agents.commands.outcomes import episode_defaults, parse_episode
from market_agents.errors import ConfigError


def _levels(value: str, flag: str) -> tuple[float, ...]:
    try:
        levels = tuple(float(v) for v in value.split(","))
    except ValueError:
        raise ConfigError(f"{flag} {value!r}: expected comma-separated levels") from None
    if not levels or any(not 0 < v < 1 for v in levels):
        raise ConfigError(f"{flag} {value!r}: levels must be in (0, 1)")
    return levels


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma sensitivity`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "sensitivity", help="episode outcomes over the threshold grid, from saved ticks",
        description="For every saved run of DESIGN, re-score bubble and crash episodes at "
        "every combination of the grid (protocol: bubble 3/5/8 %%, crash 7/10/15 %%) from its "
        f"ticks.parquet, into {layout.sensitivity_path('<design>')}.")
    p.add_argument("design", help="design YAML")
    from market_agents.analysis.outcomes import SENSITIVITY_BUBBLE_GAPS, SENSITIVITY_CRASH_DROPS

    bubble, crash = episode_defaults()
    p.add_argument("--bubbles", default=",".join(f"{g:g}" for g in SENSITIVITY_BUBBLE_GAPS),
                   help="bubble gaps (default %(default)s)")
    p.add_argument("--crashes", default=",".join(f"{d:g}" for d in SENSITIVITY_CRASH_DROPS),
                   help="crash drops (default %(default)s)")
    p.add_argument("--bubble", default=bubble, metavar="GAP:TICKS",
                   help="base bubble threshold; only TICKS is used (default %(default)s)")
    p.add_argument("--crash", default=crash, metavar="DROP:TICKS",
                   help="base crash threshold; only TICKS is used (default %(default)s)")
    p.add_argument("--mock", action="store_true", help="the mock rehearsal's runs")
    p.add_argument("--allow-missing", action="store_true", help="skip runs not simulated")
    p.add_argument("--results", default=str(layout.ROOT),
                   help="results root (default %(default)s)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Re-score bubble and crash episodes of every saved run of a design over the threshold grid,
    from saved ticks.

    Args:
        args: the parsed arguments of ``ma sensitivity`` (``ma sensitivity --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        MissingRuns: a run of the design is missing.

    Protocol:
        Run protocol §5.1 and §6 (sensitivity grid bubble 3/5/8 %, crash 7/10/15 %, from saved
        ticks, not by re-simulating).
    """
    from market_agents.analysis.outcomes import Thresholds
    from market_agents.protocol.planning import load_checked
    from market_agents.protocol.steps import sensitivity_grid, write_sensitivity

    _, bticks = parse_episode(args.bubble, "--bubble")
    _, cticks = parse_episode(args.crash, "--crash")
    grid = sensitivity_grid(_levels(args.bubbles, "--bubbles"), _levels(args.crashes, "--crashes"),
                            Thresholds(bubble_ticks=bticks, crash_ticks=cticks))
    out = write_sensitivity(load_checked(args.design), grid, args.mock, args.results,
                            args.allow_missing)
    print(f"wrote {out} ({len(grid)} threshold pairs per run)")
    return 0

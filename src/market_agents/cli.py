"""``ma``: the command line. Each subcommand lives in ``market_agents.commands.<name>`` and
exposes ``register(subparsers)``; this file only dispatches and turns named errors into one
clear line on stderr with exit code 2."""

from __future__ import annotations

import argparse
import importlib
import sys

from market_agents.errors import MarketAgentsError

# Subcommand modules, in the order `ma --help` lists them.
COMMANDS = ["run", "validate", "plot", "outcomes", "gather", "summary", "sensitivity", "budget",
            "cell", "design", "gate", "pilot", "freeze", "paper", "schema", "dag", "cache",
            "library", "bazaar"]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All subcommands, or just ``only``: importing one command's module keeps start-up fast."""
    parser = argparse.ArgumentParser(
        prog="ma",
        description="market_agents: an artificial stock market with LLM traders. "
        "Every run is reproducible from a config, a seed and a response cache.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"market_agents.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except MarketAgentsError as exc:
        print(f"ma {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ma {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

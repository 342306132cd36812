"""``ma library``: build the frozen decision library (protocol §5.4) from a response cache."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from market_agents import layout
from market_agents.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma library`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "library",
        help="build a frozen decision library from an LLM response cache",
        description="Collect every answered single-asset market decision of MODEL in CACHE "
        "(no memory or channel prompts) with the features of the snapshot it answered, and "
        "save them as a .npz that `population.llm.frozen_library` replays by nearest "
        "neighbour (provider_mix: {library: 1.0}).",
    )
    p.add_argument("cache", help="response cache, e.g. results/cache/confirmatory.sqlite")
    p.add_argument("--model", required=True, help="model id to keep, e.g. gpt-5.4-nano")
    p.add_argument("--prompt-id", default=None,
                   help="keep one prompt id only, e.g. market-v1-single-default")
    p.add_argument("--out", required=True, help="library file, e.g. results/library/nano_v1.npz")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Build a frozen decision library (.npz) from the answered single-asset decisions of one model
    in a cache.

    Args:
        args: the parsed arguments of ``ma library`` (``ma library --help`` lists them).

    Returns:
        The exit code: 0.

    Raises:
        ConfigError: not a cache, or no answered decision of the model in it.
        CacheError: a damaged cache.

    Protocol:
        Run protocol §5.4 (the frozen-library replay, T6).
    """
    from market_agents.llm.library import DecisionLibrary

    if not (Path(args.cache) / layout.CACHE_DB).exists():
        raise ConfigError(f"{args.cache}: not an LLM response cache (no cache.db inside)")
    lib = DecisionLibrary.from_cache(args.cache, args.model, args.prompt_id)
    out = lib.save(args.out)
    valid = int(sum(1 for e in lib.error if not e))
    print(json.dumps({"out": str(out), "entries": len(lib), "valid": valid,
                      "loo_nn_p90": round(lib.meta["loo_nn_p90"], 6),
                      "prompt_versions": lib.meta["prompt_versions"]}))
    return 0

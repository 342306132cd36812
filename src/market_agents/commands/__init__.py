"""The ``ma`` subcommands, one module each with ``register(subparsers)``: argument parsing and
one call into the package (``cli.py`` dispatches). Shared here: the serving switches."""

from __future__ import annotations

import argparse
import os

# Serving switches that a whole invocation can set through the environment: the workflow sets
# them from its config (`snakemake --config replay=true`), so they reach every `ma` job
# without becoming rule parameters (which would re-run finished jobs when toggled).
REPLAY_ENV = "MARKET_AGENTS_REPLAY"
NEW_CACHE_ENV = "MARKET_AGENTS_NEW_CACHE"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def add_serving_flags(p: argparse.ArgumentParser, what: str = "the run") -> None:
    """``--replay`` and ``--new-cache``, shared by `ma run`, `ma cell` and `ma design`."""
    p.add_argument("--replay", action="store_true", default=env_flag(REPLAY_ENV),
                   help=f"serve every answer of {what} from the cache: a missing answer stops "
                   "it, no key is needed and no provider client is built (also "
                   f"population.llm.replay, or {REPLAY_ENV}=1)")
    p.add_argument("--new-cache", action="store_true", default=env_flag(NEW_CACHE_ENV),
                   help="allow starting over with an empty or missing cache although records "
                   "(its paid.json, or finished runs) show it held paid answers; those answers "
                   f"are bought again (or {NEW_CACHE_ENV}=1)")

"""The ``ma`` subcommands, one module each with ``register(subparsers)``: argument parsing and
one call into the package (``cli.py`` dispatches). Shared here: the serving switches."""

from __future__ import annotations

import argparse

from market_agents.llm.cache import NEW_CACHE_ENV, REPLAY_ENV, env_flag


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

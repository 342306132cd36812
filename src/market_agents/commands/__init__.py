"""The ``ma`` subcommands, one module each with ``register(subparsers)``: argument parsing and
one call into the package (``cli.py`` dispatches)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from market_agents.protocol.guard import Guard


def add_guard_flags(p: argparse.ArgumentParser) -> None:
    """``--deviation`` for every command that can make a confirmatory live call."""
    p.add_argument("--deviation", default=None, metavar="REASON",
                   help="run although the freeze no longer matches (design, code, commit or "
                   "work tree changed): the reason is appended to "
                   "results/manifests/deviations.jsonl (`ma deviations`) and recorded in every "
                   "run manifest this command writes")


def build_guard(results: str, deviation: str | None = None,
                freeze_path: str | None = None) -> Guard:
    """The guards of a paying command, with the protocol's caps and design names (the
    workflow config's defaults, or the invoking workflow's config in a workflow job)."""
    from pathlib import Path

    from market_agents.pipeline.workflow_config import guard_settings
    from market_agents.protocol.guard import Guard
    from market_agents.protocol.ledger import Caps

    s = guard_settings()
    return Guard(
        root=Path(results),
        caps=Caps(s.project_cap_usd, s.pilot_cap_usd, s.pilot),
        confirmatory=s.confirmatory,
        confirmatory_file=s.design_path(s.confirmatory),
        deviation=deviation if deviation is not None else s.deviation,
        freeze_path=Path(freeze_path) if freeze_path else None,
    )

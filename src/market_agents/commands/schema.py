"""``ma schema``: write the JSON schemas of the workflow config and the simulation config."""

from __future__ import annotations

import argparse
from pathlib import Path

from market_agents.pipeline.workflow_config import SCHEMA_DIR, write_schemas


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ma schema`` and its arguments to the ``ma`` subcommands."""
    p = sub.add_parser(
        "schema",
        help="write workflow/schemas/*.schema.json from the pydantic config models",
        description="Regenerate the JSON schemas (workflow config and simulation config) from "
        "the pydantic models. Run it after changing a config model; a test fails on drift.",
    )
    p.add_argument("--out", type=Path, default=SCHEMA_DIR, help="directory (default: %(default)s)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    for path in write_schemas(args.out):
        print(path)
    return 0

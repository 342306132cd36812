"""Test support shared by every test folder: hand-made run directories (``fake_run``), LLM
snapshots and requests (``llm``), the Snakefile runner (``workflow``), the Snakemake and live
``ma`` processes forked from a fork server (``procs``) and the Bazaar rule the fake provider
plays (``bazaar``). ``ROOT`` is the repository root; ``strict_loads`` reads JSON
as a strict parser does (NaN and Infinity refused)."""

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def strict_loads(text: str) -> Any:
    """``json.loads`` refusing NaN and Infinity, which Python writes and reads by default."""
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)

"""Test support shared by every test folder: hand-made run directories (``fake_run``), LLM
snapshots and requests (``llm``), the Snakefile runner (``workflow``) and the Bazaar rule the
fake provider plays (``bazaar``). ``ROOT`` is the repository root."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

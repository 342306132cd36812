"""Fixtures of the workflow tests (helpers in wfhelp.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from wfhelp import ROOT


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A scratch project directory: the config tree only (results go here, not in the repo)."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path

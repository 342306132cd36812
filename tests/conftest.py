"""Shared fixtures. Live-provider tests are marked `api` and run only with --runapi."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import ROOT

# CI explores the same examples on every run (a red CI is then reproducible, never luck);
# locally, hypothesis keeps searching new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


BASELINE = ROOT / "config" / "baseline.yaml"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runapi", action="store_true", help="run tests that call paid APIs")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runapi"):
        return
    skip = pytest.mark.skip(reason="calls a paid API: run with --runapi")
    for item in items:
        if "api" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def baseline_path() -> Path:
    return BASELINE


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A scratch project directory for workflow and gate tests: the config tree only (results
    go here, not in the repository)."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path

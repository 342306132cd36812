"""Issue 37: opt-in tests are skipped by their marker, never by a keyword. ``item.keywords``
holds the names of the parent folders, the checkout's own included, so on e83eada a clone in
a folder named ``docs`` (or ``api``, ``slurm``, ``rehearsal``) skipped every test, green."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import OPT_IN
from tests.support import ROOT

TESTS = '''
import pytest


def test_plain():
    assert True


@pytest.mark.{marker}
def test_opt_in():
    assert True
'''


@pytest.mark.parametrize("folder", sorted(OPT_IN), ids=lambda f: f"named_{f}")
def test_a_checkout_named_after_a_marker_runs_the_default_tests(tmp_path: Path, folder: str):
    """A copy of the suite's conftest and pytest settings in a checkout folder named after an
    opt-in marker: the plain test runs, the opt-in test is skipped."""
    checkout = tmp_path / folder
    (checkout / "tests" / "support").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    shutil.copy(ROOT / "tests" / "conftest.py", checkout / "tests" / "conftest.py")
    (checkout / "tests" / "__init__.py").write_text("")
    shutil.copy(ROOT / "tests" / "support" / "__init__.py",
                checkout / "tests" / "support" / "__init__.py")
    marker = folder
    (checkout / "tests" / "test_here.py").write_text(TESTS.format(marker=marker))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "-p", "no:xdist", "tests/test_here.py"],
                          cwd=checkout, capture_output=True, text=True, timeout=300)
    assert "1 passed, 1 skipped" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]

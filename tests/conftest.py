"""Shared fixtures. Opt-in tests: `api` (live providers) runs only with --runapi, `slurm` (a
SLURM cluster) only with --runslurm, `rehearsal` (the confirmatory design rehearsed into a
paper, minutes) only with --runrehearsal."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import market_agents  # noqa: F401  first: one BLAS thread in each worker and what it starts
from tests.support import ROOT

# CI explores the same examples on every run (a red CI is then reproducible, never luck);
# locally, hypothesis keeps searching new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


BASELINE = ROOT / "config" / "baseline.yaml"
RESULTS_KEY = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runapi", action="store_true", help="run tests that call paid APIs")
    parser.addoption("--runslurm", action="store_true",
                     help="run tests on a one-node SLURM cluster (root; `make test-slurm`)")
    parser.addoption("--runrehearsal", action="store_true",
                     help="rehearse the confirmatory design into a paper (`make test-rehearsal`)")
    parser.addoption("--rundocs", action="store_true",
                     help="run every documented command in a scratch clone (`make test-docs`)")


# marker -> (option that runs it, why it is skipped otherwise)
OPT_IN = {
    "api": ("--runapi", "calls a paid API: run with --runapi"),
    "slurm": ("--runslurm", "starts a SLURM cluster: run `make test-slurm`"),
    "rehearsal": ("--runrehearsal", "rehearses the confirmatory design: run "
                  "`make test-rehearsal`"),
    "docs": ("--rundocs", "runs every documented command: run `make test-docs`"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The longest tests first (`slow`, by the seconds each was measured at): xdist hands out
    # the tests in this order, so the longest start while every worker has work, instead of
    # one worker running them alone at the end. The rest keep their order.
    # A test that shares what its module builds once (a finished project) is as slow as that
    # build, which the quick subset (`-m "not slow"`) leaves out with it.
    for item in items:
        if item.get_closest_marker("slow") is None and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: -_seconds(item))
    for marker, (option, reason) in OPT_IN.items():
        if config.getoption(option):
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            # a marker, not a keyword: item.keywords also holds the names of the parent
            # folders, so a checkout in a folder named `docs` skipped the whole suite, green
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)


# Optional: a run without xdist (`-p no:xdist`, the opt-in marker tests' own pytest) has no
# such hook, and pluggy refuses an unknown one.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`pytest -n N` (xdist's default ``--dist load``), with one change: the tests of a module
    that builds something once for all its tests (a module- or session-scoped fixture: a
    finished project, a sanity run of every step) go to one worker, which builds it once;
    split over two, each built it. Every other test is scheduled on its own, in collection
    order (the longest first), as ``load`` does."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduler(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            return path if _builds_once(path) else nodeid

    config.option.loadscopereorder = False  # keep the collection's order: the longest first
    return Scheduler(config, log)


@functools.cache
def _builds_once(path: str) -> bool:
    """Whether the test module at ``path`` (from the root) has a module or session fixture."""
    text = (ROOT / path).read_text() if (ROOT / path).is_file() else ""
    return 'scope="module"' in text or 'scope="session"' in text


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module- or session-scoped fixture of its own module."""
    where = item.nodeid.split("::")[0]
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        d.scope in ("module", "session") and d.baseid == where
        for defs in info.name2fixturedefs.values() for d in defs)


def _seconds(item: pytest.Item) -> float:
    """What ``@pytest.mark.slow(seconds)`` says a test takes (1 for a bare ``slow``, 0 for
    the others): CPU seconds on an idle 2-core machine, for ordering only."""
    mark = item.get_closest_marker("slow")
    return 0.0 if mark is None else float(mark.args[0]) if mark.args else 1.0


def _results_tree() -> dict[str, tuple[int, int]]:
    root = ROOT / "results"
    return {str(p.relative_to(ROOT)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()} if root.exists() else {}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[RESULTS_KEY] = _results_tree()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Tests write under their own temporary roots, never the checkout's results/ (where a
    user's live results live): fail the session if a file there appeared or changed."""
    if hasattr(session.config, "workerinput") or RESULTS_KEY not in session.config.stash:
        return  # an xdist worker: the controller checks once
    before, after = session.config.stash[RESULTS_KEY], _results_tree()
    touched = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if touched:
        print(f"\ntests wrote the checkout's results/: {', '.join(touched[:5])}"
              + (f" and {len(touched) - 5} more" if len(touched) > 5 else ""))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _no_inherited_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workflow holds its project by a token its jobs inherit (``pipeline/holder.py`` sets
    ``MARKET_AGENTS_HOLDER`` in the holding process); a test that held a project in-process
    leaves it in the worker's environment, and every later test's processes would look like
    that workflow's jobs (``ma spend settle`` then refused to settle, in the full suite only)."""
    from market_agents.inputs import HOLDER_ENV

    monkeypatch.delenv(HOLDER_ENV, raising=False)


@pytest.fixture
def baseline_path() -> Path:
    return BASELINE


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A scratch project directory for workflow and gate tests: the config tree only (results
    go here, not in the repository)."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    return tmp_path

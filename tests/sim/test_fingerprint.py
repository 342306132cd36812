"""The code fingerprint (sim/fingerprint.py): it moves when a file of the engine changes, stays
when any other file does, costs little, and every run's manifest records it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from market_agents import plugins
from market_agents.config import load_config
from market_agents.sim import fingerprint as fp
from market_agents.sim.runner import run_to_dir


@pytest.fixture
def package(tmp_path):
    """A copy of the package tree (no bytecode) to edit."""
    root = tmp_path / "market_agents"
    shutil.copytree(fp.PACKAGE_ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def fresh(root):
    """The fingerprint of ``root`` as it is now (the cached function remembers each root)."""
    return fp.fingerprint.__wrapped__(root)


def test_a_copy_of_the_package_has_the_same_fingerprint(package):
    assert fresh(package) == fp.fingerprint() == fp.fingerprint(fp.PACKAGE_ROOT)
    assert len(fp.fingerprint()) == 64 and fp.short(fp.fingerprint()) == fp.fingerprint()[:16]


@pytest.mark.parametrize("name", ["market/exchange.py", "agents/traders/noise.py",
                                  "sim/simulation.py", "llm/prompting.py",
                                  "llm/providers/mock.py", "config.py", "rng.py", "core.py",
                                  "prices.py"])
def test_changing_an_engine_file_changes_the_fingerprint(package, name):
    before = fresh(package)
    with (package / name).open("a") as fh:
        fh.write("# a comment is a change too\n")
    assert fresh(package) != before


@pytest.mark.parametrize("name", ["analysis/outcomes.py", "paper/files.py", "commands/run.py",
                                  "protocol/design.py", "layout.py", "atomic.py",
                                  "market/__pycache__/book.cpython-311.pyc", "llm/notes.txt~"])
def test_changing_a_file_outside_the_engine_leaves_it(package, name):
    before = fresh(package)
    (package / name).parent.mkdir(parents=True, exist_ok=True)
    with (package / name).open("a") as fh:
        fh.write("# not the engine\n")
    assert fresh(package) == before


def test_adding_removing_or_renaming_an_engine_file_changes_it(package):
    before = fresh(package)
    (package / "market" / "tax.py").write_text("RATE = 0.001\n")
    added = fresh(package)
    (package / "market" / "tax.py").rename(package / "market" / "levy.py")
    renamed = fresh(package)
    (package / "market" / "levy.py").unlink()
    assert len({before, added, renamed}) == 3 and fresh(package) == before


def test_a_missing_engine_file_is_named(package):
    (package / "rng.py").unlink()
    with pytest.raises(FileNotFoundError, match="rng.py"):
        fresh(package)


def test_the_fingerprint_imports_nothing_heavy_and_is_cheap():
    code = ("import sys, time; t = time.perf_counter(); "
            "from market_agents.sim.fingerprint import fingerprint; fingerprint(); "
            "print(time.perf_counter() - t); "
            "print(sorted(m for m in sys.modules if m.startswith('market_agents')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert float(out[0]) < 1.0  # a few milliseconds; generous for a loaded machine
    assert out[1] == ("['market_agents', 'market_agents.errors', 'market_agents.plugins', "
                      "'market_agents.sim', 'market_agents.sim.fingerprint']")


def test_installed_plugins_are_scanned_once_for_the_registries_and_the_fingerprint(monkeypatch):
    """Reading a group's entry points scans every installed distribution's metadata (tens of
    ms in each `ma` process); the fingerprint reuses the registries' scan."""
    scans = []
    real = plugins.entry_points
    for registry in (plugins.TRADERS, plugins.MECHANISMS):
        registry.names()  # the built-ins, registered once per process
        for name in ("_members", "_origin"):  # the registry read afresh, restored after
            monkeypatch.setattr(registry, name, dict(getattr(registry, name)))
        monkeypatch.setattr(registry, "_loaded", False)
        monkeypatch.setattr(registry, "_declared", None)
    monkeypatch.setattr(plugins, "entry_points",
                        lambda group: scans.append(group) or real(group=group))
    for registry in (plugins.TRADERS, plugins.MECHANISMS):
        registry.names()
    assert fp.plugin_files() == fp.plugin_files()
    assert sorted(scans) == ["market_agents.mechanisms", "market_agents.traders"]


def test_every_run_records_the_fingerprint_of_the_code_that_made_it(tmp_path, baseline_path):
    cfg = load_config(baseline_path, ["simulation.ticks=60", "simulation.burn_in=10",
                                      "population.n_traders=20"])
    out = run_to_dir(cfg, 1, tmp_path / "run", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["code_fingerprint"] == fp.fingerprint()

"""Allowed import directions between the package's folders (docs: market_agents/__init__.py).

The engine (market, agents, sim) and the LLM layer never import the protocol, the workflow, the
commands, the analysis or the test server; the LLM layer never imports the market or the agents
(agents/llm_trader.py is the bridge); nothing in the product imports ``testing``; Bazaar's
engine stands alone; the bottom layer imports nothing from the package (run-time imports:
those under ``if TYPE_CHECKING:`` are annotations only). That no module imports itself back
through another, annotation and function-level imports included, is tests/test_import_graph.py.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import market_agents

PKG = Path(market_agents.__file__).parent
BOTTOM = ("core", "errors", "rng", "atomic", "layout")
ENGINE = ("market", "agents", "sim")
ABOVE_ENGINE = ("protocol", "paper", "pipeline", "commands", "analysis", "testing", "bazaar",
                "cli")
# folder -> folders (or top-level modules) it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    **{name: ("*",) for name in BOTTOM},
    **{folder: ABOVE_ENGINE for folder in ENGINE},
    "llm": (*ABOVE_ENGINE, *ENGINE, "config"),
    "analysis": ("protocol", "paper", "pipeline", "commands", "testing", "bazaar", "cli"),
    "protocol": ("paper", "pipeline", "commands", "testing", "bazaar", "cli"),
    # the paper reads the protocol's designs and results; the workflow and `ma paper` call it
    "paper": ("pipeline", "commands", "testing", "bazaar", "cli"),
    "pipeline": ("commands", "testing", "cli"),
    "bazaar": (*ENGINE, "protocol", "paper", "pipeline", "commands", "analysis", "testing",
               "cli", "config"),
    "commands": ("testing",),
    "config": ABOVE_ENGINE,
    # reading user input sits just above the bottom layer: it may name errors, and the provider
    # registry (its base-URL variables are checked when `ma` starts), nothing more
    "inputs": (*ENGINE, *ABOVE_ENGINE, "llm", "config", "bazaar", "atomic", "rng"),
    # the config's LLM block and the price table sit below both the config and the LLM layer
    # (which name them too), so a classical run's config loads no LLM module
    "config_llm": (*ENGINE, *ABOVE_ENGINE, "llm", "config", "bazaar", "inputs", "prices",
                   "atomic", "rng"),
    "prices": (*ENGINE, *ABOVE_ENGINE, "llm", "config", "bazaar", "atomic", "rng"),
    # the provider registry: below the config, the price table and the LLM layer
    "provider_kinds": ("*",),
}
# Bazaar's engine also stands apart from the LLM layer (llm_eval.py is its bridge).
BAZAAR_ENGINE = ("engine", "policies", "anchors", "exploits", "parser", "scenario", "tiers",
                 "flow", "play")


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path) -> set[str]:
    """Package modules ``path`` imports at run time, anywhere in the file."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:  # `from market_agents.llm import prompting` is a module
                sub = f"{node.module}.{a.name}"
                is_module = (PKG.parent / sub.replace(".", "/")).with_suffix(".py").exists() or (
                    PKG.parent / sub.replace(".", "/") / "__init__.py").exists()
                found.add(sub if is_module else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {m for m in found if m.split(".")[0] == "market_agents" and m != "market_agents"}


GRAPH = {module_name(p): imports(p) for p in sorted(PKG.rglob("*.py"))}


def folder(module: str) -> str:
    """``market_agents.protocol.gate`` -> ``protocol``; ``market_agents.config`` -> ``config``;
    the package's own ``__init__`` (the map and its lazy entry points) -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_sees_the_package():
    assert len(GRAPH) > 80
    assert "market_agents.protocol.design" in GRAPH["market_agents.protocol.planning"]
    # an import under TYPE_CHECKING is not a run-time edge
    assert "market_agents.protocol.guard" not in GRAPH["market_agents.protocol.steps"]


def test_folders_import_only_downwards():
    bad = []
    for module, deps in GRAPH.items():
        rules = FORBIDDEN.get(folder(module), ())
        for dep in deps:
            if folder(dep) == folder(module):
                continue
            if "*" in rules or folder(dep) in rules:
                bad.append(f"{module} imports {dep}")
    assert bad == []


def test_nothing_in_the_product_imports_the_test_server():
    bad = [m for m, deps in GRAPH.items() if folder(m) != "testing"
           and any(folder(d) == "testing" for d in deps)]
    assert bad == []


def test_bazaar_engine_imports_no_llm_layer():
    engine = [f"market_agents.bazaar.{name}" for name in BAZAAR_ENGINE]
    bad = [(m, d) for m in engine for d in GRAPH[m] if folder(d) == "llm"]
    assert bad == []


def _loaded_after(code: str, prefixes: tuple[str, ...]) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; {code}; "
         f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"],
        capture_output=True, text=True, check=True)
    return eval(out.stdout)  # a list of module names printed by the child


def test_importing_the_llm_layer_loads_no_market_module():
    modules = [p.stem for p in (PKG / "llm").glob("*.py")]
    code = "import importlib; " + "; ".join(
        f"importlib.import_module('market_agents.llm.{m}')" for m in modules)
    assert _loaded_after(code + "; import market_agents.llm.providers.mock", (
        "market_agents.market", "market_agents.agents", "market_agents.sim",
        "market_agents.protocol", "market_agents.pipeline")) == []


def test_bazaar_engine_loads_neither_verifiers_nor_the_market():
    code = ("import market_agents.bazaar.engine, market_agents.bazaar.policies, "
            "market_agents.bazaar.anchors, market_agents.bazaar.exploits")
    assert _loaded_after(code, ("verifiers", "datasets", "market_agents.market",
                                "market_agents.agents", "market_agents.llm")) == []


@pytest.mark.parametrize("given,expect", [(None, "1"), ("3", "3")], ids=["default", "user"])
def test_the_package_runs_numpy_with_one_blas_thread_unless_told(given, expect):
    """One simulation per process, parallel work across processes: importing the package sets
    OPENBLAS_NUM_THREADS=1 before numpy loads (inherited by the processes it starts), unless
    the user set it."""
    code = ("import os, subprocess, sys, market_agents, numpy; "
            "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')), "
            "subprocess.run([sys.executable, '-c', 'import os; "
            "print(os.environ[\"OPENBLAS_NUM_THREADS\"])'], capture_output=True, text=True)"
            ".stdout.strip())")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == expect and out[2] == expect
    if given is None and os.path.isdir("/proc/self/task"):
        assert out[1] == "1"  # numpy started no BLAS thread


def test_the_gate_check_of_every_live_job_loads_no_table_library(tmp_path):
    """`ma gate check` starts before every live job and reads one JSON manifest: it loads
    neither polars nor the spend ledger, planning or run directories (half its start-up)."""
    manifest = tmp_path / "gate.json"
    manifest.write_text('{"design": "d", "approved": {"share_25": [1]}}')
    code = ("import contextlib, io; from market_agents.cli import main; "
            "out = io.StringIO(); cm = contextlib.redirect_stdout(out); cm.__enter__(); "
            f"code = main(['gate', 'check', {str(manifest)!r}, '--cell', 'share_25', "
            "'--seed', '1']); cm.__exit__(None, None, None); "
            "assert code == 0 and out.getvalue().startswith('approved: d/share_25 seed 1')")
    assert _loaded_after(code, ("polars", "market_agents.protocol.ledger",
                                "market_agents.protocol.planning",
                                "market_agents.sim.rundir")) == []


def _snakefile_imports() -> list[str]:
    """The imports of the Snakefile and rules/*.smk, as written there."""
    root = PKG.parents[1]
    return [line for path in [root / "Snakefile", *sorted((root / "rules").glob("*.smk"))]
            for line in path.read_text().splitlines()
            if line.startswith(("from ", "import "))]


def test_every_snakemake_start_the_budget_gate_and_the_run_contract_load_no_table_library():
    """Snakemake's process imports what the Snakefile imports at every start (a dry run, each
    target, each resume) and reads no table; nor do the budget gate's jobs (`ma gate approve`,
    `reconcile`: planning, the guard of every paying job, the ledger) and the run contract's
    ``src.main`` (it checks and copies files). None of them loads polars (0.12 CPU s of each
    process; bench/README.md): it loads where a table is read or built."""
    imports = _snakefile_imports()
    assert any("pipeline.workflow import Workflow" in line for line in imports)
    code = "; ".join([*imports, "import market_agents.pipeline.contract",
                      "import market_agents.protocol.gate, market_agents.protocol.guard",
                      "import market_agents.protocol.planning, market_agents.protocol.ledger"])
    assert _loaded_after(code, ("polars",)) == []


def test_the_run_tables_keep_their_polars_types():
    """``rundir.SCHEMAS`` (built on first use from the type names) gives each table's columns,
    in order, with the polars types the runs write."""
    import polars as pl

    from market_agents.sim import rundir

    assert tuple(rundir.SCHEMAS) == rundir.TABLES
    assert rundir.SCHEMAS["ticks"]["tick"] == pl.Int32
    assert rundir.SCHEMAS["llm_decisions"]["answer_sha256"] == pl.Utf8
    assert all(isinstance(t, type) and issubclass(t, pl.DataType)
               for cols in rundir.SCHEMAS.values() for t in cols.values())
    with pytest.raises(AttributeError, match="no attribute 'SCHEMA'"):
        rundir.SCHEMA  # noqa: B018

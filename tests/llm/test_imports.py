"""The LLM layer never imports the market or the agents: agents/llm_trader.py is the bridge."""

import ast
import subprocess
import sys
from pathlib import Path

import market_agents.llm as llm_pkg

FORBIDDEN = ("market_agents.market", "market_agents.agents", "market_agents.sim.simulation",
             "market_agents.sim.runner")


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_no_llm_module_imports_market_or_agents():
    root = Path(llm_pkg.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) > 10
    bad = [(f.name, m) for f in files for m in _imports(f) if m.startswith(FORBIDDEN)]
    assert bad == []


def test_importing_the_llm_layer_loads_no_market_module():
    modules = [p.stem for p in Path(llm_pkg.__file__).parent.glob("*.py")]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module('market_agents.llm.' + m)\n"
        "import market_agents.llm.providers.mock\n"
        f"print([m for m in sys.modules if m.startswith({FORBIDDEN!r})])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

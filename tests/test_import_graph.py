"""No import cycle between the package's modules, counting every import of a ``market_agents``
module: at the top of a file, inside a function and under ``if TYPE_CHECKING:`` (issue 26).

An import under ``TYPE_CHECKING`` or inside a function keeps Python from failing at import
time, but the arrow is still there: two modules that name each other share a type or a
function that belongs a layer below both. ``tests/test_imports.py`` checks the folders' order
(run-time imports); this test checks the modules, all imports included, and names the cycle.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import market_agents

PKG = Path(market_agents.__file__).parent


def module_name(path: Path) -> str:
    """``src/market_agents/protocol/design.py`` -> ``market_agents.protocol.design``."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = PKG.parent / name.replace(".", "/")
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports(path: Path) -> set[str]:
    """The package modules ``path`` imports, anywhere in the file (relative imports resolved;
    ``from pkg import name`` names the module ``pkg.name`` when it is one)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if _is_module(sub) else base)
    return {m for m in found if m.startswith("market_agents.") and m != here}


@functools.cache
def graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports; parsed when a test first asks, not at
    collection (every xdist worker collects every test module)."""
    return {module_name(p): imports(p) for p in sorted(PKG.rglob("*.py"))}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """The first cycle found (``[a, b, ..., a]``), or None. Depth first, in sorted order, so
    the same graph always reports the same cycle."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def walk(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := walk(dep, [*path, dep])):
                return cycle
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node, [node])):
            return cycle
    return None


def test_the_graph_counts_every_kind_of_import():
    assert len(graph()) > 100
    steps = graph()["market_agents.protocol.steps"]
    assert "market_agents.protocol.guard" in steps  # under `if TYPE_CHECKING:`
    assert "market_agents.sim.runner" in steps  # inside a function
    assert "market_agents.protocol.design" in steps  # at the top
    assert "market_agents.protocol.freeze" in graph()["market_agents.protocol.planning"]


def test_the_finder_names_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_module_imports_itself_back_through_another():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_design_is_data():
    """Loading a design imports neither the planning step nor the freeze (issue 26)."""
    design = graph()["market_agents.protocol.design"]
    assert not design & {"market_agents.protocol.planning", "market_agents.protocol.freeze",
                         "market_agents.protocol.facts", "market_agents.protocol.measured"}
    assert "market_agents.protocol.planning" not in graph()["market_agents.protocol.freeze"]

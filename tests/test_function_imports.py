"""The imports at the top of a file show what it uses (issue 26): outside ``commands/`` (and
``cli.py``, which loads a command's module only when it runs), an import inside a function is
for an optional or heavy dependency (an SDK, matplotlib, scipy, the LLM layer in a classical
run, the engine at DAG time) and says so in a one-line comment (``# why: ...``) on its line or
just above it (one comment covers the imports that follow it)."""

from __future__ import annotations

import ast
from pathlib import Path

import market_agents

PKG = Path(market_agents.__file__).parent
EXEMPT = ("commands/", "cli.py")
# Function-level imports still to get their reason, by file and function (none now): a new one
# fails, and one given its reason must leave the list.
PENDING: set[tuple[str, str]] = set()


def _commented(lines: list[str], stmt: ast.stmt) -> bool:
    """A comment on one of the statement's lines, or right above it (this project writes
    ``# why: ...``; older ones say the reason without the prefix)."""
    if any("#" in lines[i - 1] for i in range(stmt.lineno, stmt.end_lineno + 1)):
        return True
    return stmt.lineno >= 2 and lines[stmt.lineno - 2].strip().startswith("#")


def uncommented(path: Path) -> list[tuple[str, int]]:
    """(function, line) of each function-level import in ``path`` without its reason."""
    text = path.read_text()
    lines = text.split("\n")
    out = []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for block in ast.walk(fn):
            body = getattr(block, "body", None)
            if not isinstance(body, list):
                continue
            covered = False  # a reason above the first of consecutive imports covers them all
            for stmt in body:
                if isinstance(stmt, ast.Import | ast.ImportFrom):
                    covered = covered or _commented(lines, stmt)
                    if not covered:
                        out.append((fn.name, stmt.lineno))
                else:
                    covered = False
    return sorted(set(out), key=lambda x: x[1])


def test_every_function_level_import_says_why():
    bad, seen = [], set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith(EXEMPT):
            continue
        for fn, line in uncommented(path):
            seen.add((rel, fn))
            if (rel, fn) not in PENDING:
                bad.append(f"{rel}:{line} in {fn}(): move it to the top, or say `# why:`")
    assert bad == []
    assert PENDING <= seen, f"no longer pending, drop from PENDING: {sorted(PENDING - seen)}"


def test_the_check_sees_an_import_without_a_reason(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def a():\n    import json\n\n\n"
                 "def b():\n    # why: heavy\n    import scipy\n    import numpy\n\n\n"
                 "def c():\n    import scipy  # why: heavy\n    x = 1\n    import json\n")
    assert uncommented(f) == [("a", 2), ("c", 14)]

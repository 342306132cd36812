"""What the package tells a user to type runs as written from the repository root: a
Snakemake command is spelled `.venv/bin/snakemake ...`, as the docs write it (a bare
`snakemake` is "command not found" outside an activated environment; issue 27)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import market_agents

SRC = Path(market_agents.__file__).parent
# a command quoted for the user: a backtick (or two) right before the word
BARE = re.compile(r"`+snakemake\b")


def strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of the module (messages, help texts, docstrings) with its line;
    f-strings' literal parts included."""
    tree = ast.parse(path.read_text(), str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_message_tells_the_user_to_run_bare_snakemake():
    found = [f"{p.relative_to(SRC)}:{line}: {text.strip()[:80]}"
             for p in sorted(SRC.rglob("*.py")) for line, text in strings(p) if BARE.search(text)]
    assert not found, "\n".join(found)


def test_the_check_finds_a_bare_command(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('raise SystemExit(f"{x} does not exist: run `snakemake pilot` first")\n')
    assert [t for _, t in strings(bad) if BARE.search(t)]
    good = tmp_path / "good.py"
    good.write_text('raise SystemExit("run `.venv/bin/snakemake pilot` first")\n')
    assert not [t for _, t in strings(good) if BARE.search(t)]

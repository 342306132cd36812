"""One results layout (issue 26): every path under ``results/`` is named by
``market_agents.layout``; no other module of ``src/`` and no rule spells one.

A module spells a results path when one of its string constants (messages, help texts,
defaults; f-strings' literal parts included) holds ``results/...``, is the root ``"results"``
itself, starts with a folder of the root (``"manifests/freeze.json"``), or when it joins a path
with such a folder (``root / "manifests"``). Not counted, and why:

- documentation: docstrings and other bare string statements, and comments, describe where
  things live for a reader; the code that finds the files asks the layout.
- an example argument in a help text, a path right after ``e.g.`` (``ma library``'s "library
  file, e.g. results/library/nano_v1.npz"): it shows the user what to type, it is not where
  the command reads or writes.
- ``.research/results/``: the run contract's committed results, not under the results root.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import market_agents
from market_agents import layout

PKG = Path(market_agents.__file__).parent
SRC = PKG.parent  # src/: the package, main.py and evaluate.py
ROOT = SRC.parent
LAYOUT = PKG / "layout.py"
FOLDERS = ("runs", "rehearsal", "sanity", "cache", "manifests", "budget", "spend", "library",
           "bazaar", "logs", "dag")
PATH = re.compile(r"(?<![\w./-])results(/|$)")
FRAGMENT = re.compile(rf"^({'|'.join(FOLDERS)})/")
EXAMPLE = re.compile(r"e\.g\. results/\S*")


def _documentation(tree: ast.AST) -> set[int]:
    """ids of the string constants that are documentation: a bare string statement (module,
    class and function docstrings, attribute docstrings)."""
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def spelled(source: str, name: str = "<snippet>") -> list[str]:
    """``line: text`` of every results path the module's code spells (the rules in the module
    docstring)."""
    tree = ast.parse(source, name)
    docs = _documentation(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = EXAMPLE.sub("", node.value)
            if PATH.search(text) or FRAGMENT.search(text) or text == layout.ROOT.name:
                found.append(f"{node.lineno}: {node.value.strip()[:90]!r}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                found += [f"{c.lineno}: {c.value!r} joined to a path" for c in ast.walk(side)
                          if isinstance(c, ast.Constant) and c.value in FOLDERS]
    return found


def rule_lines(text: str) -> list[str]:
    """The lines of a Snakefile or rule file, outside comments, that spell a results path."""
    code = (line.split("#", 1)[0] for line in text.splitlines())
    return [line.strip() for line in code if re.search(r"""(?<![\w./-])results(/|["'])""", line)]


def test_no_module_outside_the_layout_spells_a_results_path():
    found = [f"{p.relative_to(SRC)}:{hit}" for p in sorted(SRC.rglob("*.py")) if p != LAYOUT
             for hit in spelled(p.read_text(), str(p))]
    assert not found, "ask market_agents.layout instead:\n" + "\n".join(found)


def test_the_rules_take_their_paths_from_the_layout():
    files = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk"))]
    assert len(files) > 5
    found = [f"{f.relative_to(ROOT)}: {line}" for f in files for line in rule_lines(f.read_text())]
    assert not found, "name the path through W (pipeline/workflow.py):\n" + "\n".join(found)


def test_the_check_finds_a_spelled_path():
    bad = {
        'FREEZE = "results/manifests/freeze.json"': "a literal path",
        'raise SystemExit(f"{x}: see results/runs/{d}/outcomes.parquet")': "in a message",
        'p.add_argument("--results", default="results")': "the root as a default",
        'LOG = "manifests/deviations.jsonl"': "a path under a root",
        'path = Path(root) / "manifests" / "budget"': "a join with a results folder",
        'd = root / ("rehearsal" if mock else "runs") / name': "a join through a choice",
    }
    for snippet, why in bad.items():
        assert spelled(snippet), why
    good = [
        '"""Writes results/manifests/pilot.json."""',  # a docstring
        'def f():\n    """The freeze, results/manifests/freeze.json."""\n',
        'p.add_argument("--out", help="library file, e.g. results/library/nano_v1.npz")',
        'RESULTS_ROOTS = {"full": Path(".research/results")}',
        'p.add_argument("--results", help="results root (default %(default)s)")',
        'out = layout.freeze_path(root=args.results)',
        'out = root / "config" / "run"',
    ]
    for snippet in good:
        assert not spelled(snippet), snippet
    assert rule_lines('    log:\n        "results/logs/x.log",\n')
    assert rule_lines('        outcomes="results/runs/{design}/outcomes.parquet",\n')
    assert not rule_lines("# under results/rehearsal/\n        W.log(\"x.log\"),\n")


def test_the_layout_keeps_every_file_where_it_was():
    L = layout
    expected = [
        (L.run_dir("exploratory", "share_25", 1), "results/runs/exploratory/share_25/seed0001"),
        (L.run_dir("pilot_openai", "nano", 12, mock=True),
         "results/rehearsal/pilot_openai/nano/seed0012"),
        (L.batch_record_path("sigma", [1, 2, 3, 4], "ab" * 32),
         "results/runs/sigma/runs_0001-0004_abababababab.json"),
        (L.batch_record_path("pilot_openai", [1], "cd" * 32, mock=True),
         "results/rehearsal/pilot_openai/runs_0001-0001_cdcdcdcdcdcd.json"),
        (L.outcomes_path("confirmatory", tier="T2"),
         "results/runs/confirmatory/outcomes_T2.parquet"),
        (L.outcomes_path("{design}", kind="{kind}"), "results/{kind}/{design}/outcomes.parquet"),
        (L.control_sd_path("sigma"), "results/runs/sigma/control_sd.parquet"),
        (L.sensitivity_path("confirmatory"), "results/runs/confirmatory/sensitivity.parquet"),
        (L.cache_path("confirmatory"), "results/cache/confirmatory.sqlite"),
        (L.cache_path("pilot_openai", mock=True), "results/rehearsal/cache/pilot_openai.sqlite"),
        (L.bazaar_cache("openai"), "results/cache/bazaar_openai.sqlite"),
        (L.library_path("nano_v1"), "results/library/nano_v1.npz"),
        (L.library_path("nano_v1", mock=True), "results/rehearsal/library/nano_v1.npz"),
        (L.pilot_path(), "results/manifests/pilot.json"),
        (L.repilot_path(mock=True), "results/rehearsal/manifests/repilot.json"),
        (L.freeze_path(), "results/manifests/freeze.json"),
        (L.freeze_path(mock=True), "results/rehearsal/manifests/freeze.json"),
        (L.freeze_path(root="elsewhere"), "elsewhere/manifests/freeze.json"),
        (L.deviations_log(), "results/manifests/deviations.jsonl"),
        (L.budget_manifest("confirmatory", "T1"), "results/manifests/budget/confirmatory_T1.json"),
        (L.budget_spent("pilot_openai", "all"),
         "results/manifests/budget/pilot_openai_all_spent.json"),
        (L.spend_dir(), "results/manifests/spend"),
        (L.bazaar_eval_dir("mock", "mock-trader", "micro"),
         "results/bazaar/eval/mock/mock-trader/micro"),
        (L.log_path("gate", "{design}_{tier}.log"), "results/logs/gate/{design}_{tier}.log"),
        (L.dag_dir(), "results/dag"),
        (L.sanity_dir(), "results/sanity"),
        (L.run_pattern("runs"), "results/runs/{design}/{cell}/seed{seed}"),
        (L.batch_record_pattern(), "results/{kind}/{design}/runs_{first}-{last}_{chash}.json"),
        (L.rehearsal_library("results/library/nano_v1.npz"),
         "results/rehearsal/library/nano_v1.npz"),
        (L.rehearsal_library("/tmp/lib.npz"), "/tmp/rehearsal_lib.npz"),
    ]
    assert [str(path) for path, _ in expected] == [want for _, want in expected]

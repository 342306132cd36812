"""Rules are declarations: the Snakefile and rules/*.smk name inputs, outputs, logs, resources,
params and the `ma` command, and call into the package for everything else (logic lives in
market_agents.pipeline.workflow and protocol.registry, unit-tested without Snakemake)."""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.support import ROOT

SMK_FILES = sorted([ROOT / "Snakefile", *(ROOT / "rules").glob("*.smk")])
# Python that would be logic in a rule file: definitions, branches, loops, handlers,
# comprehensions and conditional expressions (both use `for`/`if`).
LOGIC = {"def", "class", "if", "elif", "else", "for", "while", "lambda", "try", "except",
         "with", "return", "yield", "global", "nonlocal"}
# (file name, keyword) -> why it is allowed. Keep it short; move logic into the package.
ALLOWED: dict[tuple[str, str], str] = {}
# A loop that only declares one rule per tier (Snakemake's `rule:` with `name=`; issue 26) is a
# declaration, not logic: the one loop header allowed, spelled exactly.
DECLARATION_LOOPS = ("for tier in TIERS:",)


def logic_tokens(text: str) -> list[tuple[int, str]]:
    """(line, keyword) of every Python logic keyword outside strings and comments."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [(t.start[0], t.string) for t in tokens
            if t.type == tokenize.NAME and t.string in LOGIC]


def logic_outside_declarations(text: str) -> list[tuple[int, str]]:
    """:func:`logic_tokens` less the headers of :data:`DECLARATION_LOOPS`."""
    lines = text.splitlines()
    return [(n, kw) for n, kw in logic_tokens(text)
            if not (kw == "for" and lines[n - 1].strip() in DECLARATION_LOOPS)]


def test_only_the_declaration_loop_is_allowed():
    text = "for tier in TIERS:\n    rule:\n        name: tier\nfor x in y:\n    pass\n"
    assert logic_outside_declarations(text) == [(4, "for")]


def test_the_checker_finds_logic():
    assert logic_tokens("def f(x):\n    return [y for y in x if y]\n") == [
        (1, "def"), (2, "return"), (2, "for"), (2, "if")]
    assert logic_tokens('rule a:\n    shell: "if true; then ma x; fi"  # for\n') == []


@pytest.mark.parametrize("path", SMK_FILES, ids=lambda p: p.name)
def test_rule_files_hold_no_logic(path: Path):
    found = [(line, kw) for line, kw in logic_outside_declarations(path.read_text())
             if (path.name, kw) not in ALLOWED]
    assert found == [], f"{path.name}: move this into market_agents.pipeline.workflow"


def test_rules_call_ma_through_the_workflow_and_never_rewrite_path():
    for path in SMK_FILES:
        text = path.read_text()
        assert "PATH" not in text, path.name
        # The environment only carries the workflow config's settings to the jobs.
        uses = re.findall(r"os\.environ\S*", text)
        assert all(re.fullmatch(r"os\.environ\.update\(WF\.\w+_env\(\)\)", u) for u in uses), uses
        shells = re.findall(r'shell:\s*\n((?:\s+".*"\n)+)', text)
        for shell in shells:
            assert not re.search(r'(^|[\s&"])ma ', shell), (path.name, shell)


def test_every_rule_file_is_included():
    snakefile = (ROOT / "Snakefile").read_text()
    included = set(re.findall(r'^include: "rules/(\w+\.smk)"', snakefile, re.M))
    assert included == {p.name for p in (ROOT / "rules").glob("*.smk")}


# The text of a live rule's shell command is part of every finished live run's Snakemake
# record: Snakemake re-runs a job whose command text changed ("code" trigger), deleting the
# run's files first, so a new text re-makes every finished live run of a project at the next
# invocation (from the response cache, or paid again without it). Changing it needs a
# migration for existing projects (`snakemake --touch` on the live outputs); found in a review
# of issue 38, which had folded `ma gate check` into `ma cell`.
LIVE_SHELL = ("{MA} gate check {input.gate} --cell {wildcards.cell} --seed {wildcards.seed}"
              " > {log} 2>&1 && {MA} cell {params.design} {wildcards.cell} --seed "
              "{wildcards.seed} --cache {params.cache} --score >> {log} 2>&1")


def _shell_of(rule: str, text: str) -> str:
    """The shell command of ``rule`` in a rule file's ``text``: its string literals joined."""
    body = text.split(f"rule {rule}:\n", 1)[1].split("\nrule ", 1)[0]
    shell = body.split("shell:\n", 1)[1]
    parts = []
    for line in shell.splitlines():
        if not line.strip().startswith('"'):
            break
        parts.append(ast.literal_eval(line.strip()))
    return "".join(parts)


def test_the_live_rules_command_text_is_unchanged():
    assert _shell_of("simulate_live", (ROOT / "rules/simulate.smk").read_text()) == LIVE_SHELL

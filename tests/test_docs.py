"""The docs stay true to the code: the README is a short user's guide whose links resolve,
docs/architecture.md names every package folder (and only folders and files that exist), and
every relative link in the docs points at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

from market_agents.protocol.freeze import FROZEN_FILES
from tests.test_imports import PKG

ROOT = PKG.parent.parent
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
FOLDERS = sorted(p.parent.name for p in PKG.glob("*/__init__.py"))
# a Markdown link target: [text](target) or [text](target#anchor)
LINK = re.compile(r"\]\(([^)#\s]*)(#[^)\s]*)?\)")


def relative_links(path: Path) -> list[str]:
    targets = [m.group(1) for m in LINK.finditer(path.read_text(encoding="utf-8"))]
    return [t for t in targets if t and not re.match(r"[a-z]+:", t)]


def test_readme_is_a_short_guide_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "make run " in text and "make test " in text
    assert "make help" in text


def test_every_relative_link_in_the_readme_and_docs_resolves():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    broken = [f"{page.relative_to(ROOT)} -> {target}" for page in pages
              for target in relative_links(page) if not (page.parent / target).exists()]
    assert not broken, broken
    # every docs page is reachable from the README
    linked = {(README.parent / t).resolve() for t in relative_links(README)}
    assert set((ROOT / "docs").glob("*.md")) <= linked, "link each docs page"


def folder_map() -> dict[str, str]:
    """The folder-map table of docs/architecture.md: folder -> its 'what it holds' cell."""
    rows = re.findall(r"^\| `(\w+)/` \| (.*) \|$", ARCHITECTURE.read_text(encoding="utf-8"), re.M)
    return dict(rows)


def test_the_architecture_map_names_exactly_the_package_folders():
    assert sorted(folder_map()) == FOLDERS


def test_every_file_the_architecture_map_names_exists():
    for folder, cell in folder_map().items():
        for name in re.findall(r"`(\w+\.py|\w+/)`", cell):
            if name == "llm/":  # bazaar's bridge names the folder it bridges to
                continue
            assert (PKG / folder / name).exists() or (PKG / name).exists(), f"{folder}/{name}"
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for name in ("config.py", "inputs.py", "core.py", "errors.py", "rng.py", "atomic.py"):
        assert f"`{name}`" in text and (PKG / name).exists(), name
    for name in FROZEN_FILES:
        assert f"`{name}`" in text, f"docs/architecture.md: name the frozen file {name}"


def test_the_data_flow_runs_from_config_to_paper():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    flow = text.split("## Data flow", 1)[1].split("## Folder map", 1)[0]
    steps = ["config", "simulation", "run files", "outcomes", "workflow", "paper"]
    positions = [flow.find(step) for step in steps]
    where = dict(zip(steps, positions, strict=True))
    assert -1 not in positions and positions == sorted(positions), where


def test_make_help_lists_every_phony_target():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    phony = {name for line in re.findall(r"^\.PHONY:(.*)$", makefile, re.M)
             for name in line.split()}
    helped = set(re.findall(r"^([a-zA-Z][\w-]*):[^\n]*## ", makefile, re.M))
    assert phony and phony <= helped, f"add a `## what it does` comment to {phony - helped}"
    assert re.search(r"^\.DEFAULT_GOAL := help$", makefile, re.M)


def test_docstring_rules_are_on_for_the_package_and_every_exemption_names_a_file():
    import tomllib

    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]
    lint = lint["lint"]
    assert "D" in lint["select"] and lint["pydocstyle"]["convention"] == "google"
    for pattern, codes in lint["per-file-ignores"].items():
        if pattern.startswith("src/"):
            assert (ROOT / pattern).is_file(), f"a docstring exemption for a missing {pattern}"
            assert codes == ["D1"], f"{pattern}: exempt from missing docstrings (D1) only"


def test_every_repository_path_the_docs_name_exists():
    # Paths in backticks under the committed folders (generated outputs such as results/ and
    # paper/ are not checked); a path may be given from the package root (``sim/rundir.py``).
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    path = re.compile(r"`((?:tests|src|bench|config|rules|workflow)/[\w./-]+)`")
    missing = [f"{page.name}: {p}" for page in pages
               for p in (m.rstrip(".") for m in path.findall(page.read_text(encoding="utf-8")))
               if not (ROOT / p).exists() and not (PKG / p).exists()]
    assert not missing, missing


def test_docs_show_commands_that_run_from_the_checkout():
    # `snakemake` is not on PATH (it lives in .venv/bin), and `uv sync --extra NAME` uninstalls
    # every other extra, pytest among them (issue 27): the docs show neither.
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    bare = re.compile(r"(?:^|`)snakemake (?=[-A-Za-z])", re.M)
    drop = re.compile(r"(?:^|`)uv sync --extra (?!NAME)", re.M)
    found = [f"{page.name}: {m.group(0)!r}" for page in pages
             for m in (*bare.finditer(page.read_text(encoding="utf-8")),
                       *drop.finditer(page.read_text(encoding="utf-8")))]
    assert not found, found

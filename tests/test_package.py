"""The map at the door: the package docstring names every folder, each folder says what it
holds, and ``__all__`` lists entry points that resolve."""

import ast

import pytest

import market_agents
from tests.test_imports import PKG

FOLDERS = sorted(p.parent.name for p in PKG.glob("*/__init__.py"))


def test_every_entry_point_resolves():
    for name in market_agents.__all__:
        assert getattr(market_agents, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        market_agents.nope  # noqa: B018


def test_the_map_names_every_folder_and_each_folder_says_what_it_holds():
    assert FOLDERS == ["agents", "analysis", "bazaar", "commands", "llm", "market", "paper",
                       "pipeline", "protocol", "sim", "testing"]
    for name in FOLDERS:
        assert f"{name}/" in market_agents.__doc__, name
        doc = ast.get_docstring(ast.parse((PKG / name / "__init__.py").read_text()))
        assert doc and len(doc) > 40, f"{name}/__init__.py: say what the folder holds"

"""A prompt is identified by what it says, not by its label (issue 24): every LLM run's manifest
records the SHA-256 of its rendered prompt and answer schema, the freeze pins them per cell,
and a confirmatory run whose prompt text changed under the same label is refused."""

from __future__ import annotations

import json

import pytest

from market_agents.agents.llm_trader import prompt_identity
from market_agents.cli import main as ma
from market_agents.config import load_config
from market_agents.llm import prompting
from market_agents.protocol.design import load_design
from market_agents.protocol.facts import design_facts, fingerprint
from market_agents.protocol.freeze import FreezeError, mismatches
from tests.support import ROOT

EDITED = prompting.REVISIONS["v1"].replace("simulated stock market", "simulated equity market")


@pytest.fixture
def edited_prompt(monkeypatch):
    """The v1 prompt with one word changed, its label still v1."""
    def apply():
        monkeypatch.setitem(prompting.REVISIONS, "v1", EDITED)
    return apply


def test_two_runs_with_other_prompt_text_under_one_label_carry_other_hashes(
        tmp_path, edited_prompt):
    args = ["run", str(ROOT / "config/baseline.yaml"), "--seed", "1", "--set",
            "population.llm_share=0.05", "--set", "simulation.ticks=80"]
    assert ma([*args, "--out", str(tmp_path / "a")]) == 0
    edited_prompt()
    assert ma([*args, "--out", str(tmp_path / "b")]) == 0
    a, b = (json.loads((tmp_path / r / "manifest.json").read_text()) for r in ("a", "b"))
    assert a["prompt_version"] == b["prompt_version"] == "v1"
    assert a["prompt_sha256"] != b["prompt_sha256"]
    assert a["schema_sha256"] == b["schema_sha256"]


def test_the_identity_follows_what_the_traders_are_told():
    base = load_config(ROOT / "config/baseline.yaml")
    ident = prompt_identity(base)
    for change in ({"memory": 5}, {"channel": True}, {"prompt_set": "diverse"},
                   {"prompt_version": "v2"}):
        llm = base.population.llm.model_copy(update=change)
        other = base.model_copy(update={"population": base.population.model_copy(
            update={"llm": llm})})
        assert prompt_identity(other)["prompt_sha256"] != ident["prompt_sha256"], change
    assert prompt_identity(base) == ident  # deterministic


def test_a_confirmatory_run_is_refused_when_the_prompt_changed_under_its_label(
        edited_prompt, tmp_path):
    design = load_design(ROOT / "config/test/designs/confirmatory.yaml", tmp_path / "results")
    frozen = {"config_hash": (facts := design_facts(design))["config_hash"],
              "fingerprint": fingerprint(design), "frozen_files": {}, "git": {}}
    assert mismatches(frozen, facts, {}) == []
    edited_prompt()
    now = design_facts(load_design(ROOT / "config/test/designs/confirmatory.yaml",
                                   tmp_path / "results"))
    changed = mismatches(frozen, now, {})
    assert changed and all("prompt_sha256 changed" in c for c in changed)
    assert any(c.startswith("cell share_25: prompt_sha256") for c in changed)
    # the guard refuses on these mismatches, as on any changed design
    from market_agents.protocol.freeze import verify

    with pytest.raises(FreezeError, match="share_25: prompt_sha256 changed"):
        verify(frozen, now, {})


def test_a_runs_answer_dates_come_from_its_cache_entries_not_the_clock(tmp_path):
    """The model cards' "dates used" are the dates the answers were recorded: the manifest
    says them (from the cache entries), a replay writes the same, and touching a file changes
    nothing (the card once read 2020-01-01 after a touch)."""
    import os
    import time

    cache = tmp_path / "cache"
    args = ["run", str(ROOT / "config/baseline.yaml"), "--seed", "1", "--set",
            "population.llm_share=0.05", "--set", "simulation.ticks=80", "--cache", str(cache)]
    assert ma([*args, "--out", str(tmp_path / "a")]) == 0
    assert ma([*args, "--out", str(tmp_path / "b"), "--replay"]) == 0
    a, b = (json.loads((tmp_path / r / "manifest.json").read_text()) for r in ("a", "b"))
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert a["answers_recorded"] == b["answers_recorded"]
    assert a["answers_recorded"]["last"] in (today, a["answers_recorded"]["first"])
    os.utime(tmp_path / "a" / "manifest.json", (1577836800, 1577836800))  # 2020-01-01
    from market_agents.paper.inputs import _dates

    assert _dates(json.loads((tmp_path / "a" / "manifest.json").read_text()))[1] != "2020-01-01"


def test_every_cache_entry_records_the_prompt_and_schema_hashes(tmp_path):
    from market_agents.llm.cache import ResponseCache

    cache = tmp_path / "cache"
    assert ma(["run", str(ROOT / "config/baseline.yaml"), "--seed", "1", "--set",
               "population.llm_share=0.05", "--set", "simulation.ticks=80", "--cache",
               str(cache), "--out", str(tmp_path / "a")]) == 0
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    store = ResponseCache(cache, readonly=True)
    try:
        entries = [store.get(k) for k in store.keys()]
    finally:
        store.close()
    assert entries and all(e["request"]["prompt_version"] == "v1" for e in entries)
    assert {e["request"]["prompt_sha256"] for e in entries} == {manifest["prompt_sha256"]}
    assert {e["request"]["schema_sha256"] for e in entries} == {manifest["schema_sha256"]}

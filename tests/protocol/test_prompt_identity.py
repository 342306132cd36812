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


# The prompt identity of the package's persona sets on the baseline config, as main rendered
# them before the sets became data (llm/prompt_sets.yaml): byte for byte the same prompts, so
# the response caches recorded before still hit.
BEFORE_DATA = {
    ("single", "v1"): "9960794691bea3631b52d89b06a8f561383871a5a12497d5cead0d20b2b7e392",
    ("single", "v2"): "eacd9ea9b8d6df8ae6e42ea7c9cdc113e0fb7e80e131005a4d73d5a3595f0b66",
    ("diverse", "v1"): "3e94698e97bd72ae6c1315a883ce7bbe5b19b965d2a35d4964c9ad886aa16eaa",
    ("diverse", "v2"): "a9a47fd361580b5eae8303f1ab77be722f90cc4aac227ae65c1bf098d0a5c27e"}


@pytest.mark.parametrize(("prompt_set", "version"), list(BEFORE_DATA))
def test_the_package_sets_prompts_are_byte_identical_to_before_they_were_data(prompt_set,
                                                                              version):
    base = load_config(ROOT / "config/baseline.yaml")
    llm = base.population.llm.model_copy(update={"prompt_set": prompt_set,
                                                 "prompt_version": version})
    config = base.model_copy(update={"population": base.population.model_copy(
        update={"llm": llm})})
    assert prompt_identity(config)["prompt_sha256"] == BEFORE_DATA[(prompt_set, version)]

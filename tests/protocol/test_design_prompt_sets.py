"""A design's own persona sets (its ``prompt_sets``: a file beside it, or inline): a set added
from a data file alone runs a mock cell; the cell's config carries the set it names, so its
run is self-contained (its config.yaml alone makes the same run) and its prompts reach the
model; the other cells' configs do not move; bad input is named in one line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import polars as pl
import pytest
import yaml

from market_agents.cli import main as ma
from market_agents.config import config_hash
from market_agents.errors import ConfigError
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import run_design
from tests.support import ROOT

HERD = {"herd": {"follower": "You follow what most traders around you do.",
                 "leader": "You act first and expect others to follow."}}
TINY = {"simulation.ticks": 120, "simulation.burn_in": 20, "population.n_traders": 20,
        "population.n_market_makers": 2, "population.llm.provider_mix": {"mock": 1.0},
        "population.llm.models": {"mock": "gpt-5.4-nano"}}


def design_file(folder: Path, prompt_sets=None, herd_overrides=None) -> Path:
    data = {"name": "herding", "base": str(ROOT / "config/baseline.yaml"),
            "prices": str(ROOT / "config/prices.yaml"), "seeds": "1", "overrides": TINY,
            "cells": [{"name": "share_0", "overrides": {"population.llm_share": 0.0}},
                      {"name": "share_25", "overrides": {"population.llm_share": 0.25}},
                      {"name": "herd_25", "overrides": {
                          "population.llm_share": 0.25, "population.llm.prompt_set": "herd",
                          **(herd_overrides or {})}}]}
    if prompt_sets is not None:
        data["prompt_sets"] = prompt_sets
    path = folder / "herding.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_set_from_a_data_file_alone_runs_a_mock_cell_self_contained(tmp_path):
    (tmp_path / "herd.yaml").write_text(yaml.safe_dump(HERD, width=200))
    design = load_design(design_file(tmp_path, "herd.yaml"), tmp_path / "results")
    assert design.prompt_sets == HERD and tmp_path / "herd.yaml" in design.sources
    llm = design.cell_config("herd_25").population.llm
    assert (llm.prompt_set, llm.prompt_sets) == ("herd", HERD)
    assert design.cell_config("herd_25", mock=True).population.llm.prompt_sets == HERD
    run_design(design, cells=["herd_25"], root=tmp_path / "results", progress=False)
    run = design.run_dir("herd_25", 1)
    ids = pl.read_parquet(run / "llm_decisions.parquet")["prompt_id"].value_counts()
    assert set(ids["prompt_id"]) == {"market-v1-herd-follower", "market-v1-herd-leader"}
    saved = yaml.safe_load((run / "config.yaml").read_text())["population"]["llm"]
    assert saved["prompt_sets"] == HERD  # what decides its prompts travels with the run
    # the run's config.yaml alone, without the design or its file, makes the same run, and
    # its requests carry the set's lines
    (tmp_path / "herd.yaml").unlink()
    again = tmp_path / "again"
    assert ma(["run", str(run / "config.yaml"), "--seed", "1", "--out", str(again),
               "--cache", str(tmp_path / "cache"), "--quiet"]) == 0
    for table in ("ticks", "trades", "orders", "llm_decisions"):
        assert (again / f"{table}.parquet").read_bytes() == (
            run / f"{table}.parquet").read_bytes(), table
    with sqlite3.connect(tmp_path / "cache/cache.db") as db:
        sent = [json.loads(v)["body"]["request"]["messages"][0][1]  # (role, content)
                for (v,) in db.execute("select value from Cache")]
    assert sent and all(s.endswith(tuple(HERD["herd"].values())) for s in sent)


def test_the_other_cells_configs_do_not_move(tmp_path):
    inline = load_design(design_file(tmp_path, HERD), tmp_path)
    bare = load_design(design_file(tmp_path, None, {"population.llm.prompt_set": "single"}),
                       tmp_path)
    for cell in ("share_0", "share_25"):
        assert config_hash(inline.cell_config(cell)) == config_hash(bare.cell_config(cell))
    assert inline.cell_config("herd_25").population.llm.prompt_sets == HERD


@pytest.mark.parametrize(("prompt_sets", "herd", "message"), [
    ("nowhere.yaml", None, r"herding.yaml: prompt_sets \(.*nowhere.yaml\): .*nowhere.yaml"),
    ({"single": {"a": "x"}}, None, r"herding.yaml: prompt_sets: 'single' is a set of "
     r"llm/prompt_sets.yaml \(single, diverse\): give yours another name"),
    ({"herd": {}}, None, r"herding.yaml: prompt_sets: 'herd' has no persona"),
    ({"herd": ["a"]}, None, r"herding.yaml: prompt_sets: herd: Input should be a valid "
     r"dictionary"),
    (None, None, r"herding.yaml: cell 'herd_25': population.llm.prompt_set: unknown prompt "
     r"set 'herd'; known: single, diverse \(got 'herd'\)"),
    (HERD, {"population.llm.prompt_sets": {"herd": {"x": "other"}}},
     r"cell 'herd_25': prompt set 'herd' is both the design's \(prompt_sets\) and the cell's"),
])
def test_bad_sets_are_named_in_one_line(tmp_path, prompt_sets, herd, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_design(design_file(tmp_path, prompt_sets, herd))
    assert "\n" not in str(err.value)

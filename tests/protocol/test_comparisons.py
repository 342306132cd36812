"""The paper's comparison tables declared in the design (``tables:``, a cell's ``table`` and
``compare_with``): the committed designs declare the tables the paper always had; the keys are
design metadata (no cell's config_hash, no Holm family, no freeze fingerprint moves); bad
declarations are named in one line."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml

from market_agents.analysis.estimands import tier_contrasts
from market_agents.config import config_hash
from market_agents.errors import ConfigError
from market_agents.protocol.design import load_design
from market_agents.protocol.facts import design_facts, fingerprint
from market_agents.protocol.planning import run_config
from market_agents.protocol.tiers import label
from tests.support import ROOT

DESIGNS = ROOT / "config" / "designs"
MECHANISMS = ("memory_25", "channel_25", "leverage_25", "breaker_25", "poslimit_25")


def pairs(design, name: str) -> list[tuple[str, str]]:
    return list(next(c for c in design.comparisons if c.name == name).pairs)


def test_the_committed_designs_declare_the_tables_the_paper_had():
    conf = load_design(DESIGNS / "confirmatory.yaml")
    assert [c.name for c in conf.comparisons] == ["mechanisms", "diversity", "fairness"]
    assert pairs(conf, "mechanisms") == [(c, "share_25") for c in MECHANISMS]
    assert pairs(conf, "diversity") == [(c, "share_25")
                                        for c in ("diverse_25", "mix_25", "mini_25")]
    fairness = conf.comparisons[2]
    assert fairness.kind == "equal_usd" and fairness.pairs == (("mini_25_equalusd", "mini_25"),)
    assert (fairness.tier, conf.comparisons[0].tier) == ("T5", "T4")
    expl = load_design(DESIGNS / "exploratory.yaml")
    assert pairs(expl, "mechanisms") == [(c, "share_25") for c in MECHANISMS]
    assert pairs(expl, "diversity") == [("diverse_25", "share_25"), ("mix_25", "share_25")]
    tiny = load_design(ROOT / "config/test/designs/confirmatory.yaml")
    assert [c.pairs for c in tiny.comparisons] == [(("memory_25", "share_25"),),
                                                   (("mix_25", "share_25"),)]


def test_the_ftt_design_compares_each_tax_cell_with_its_own_control():
    ftt = load_design(DESIGNS / "ftt.yaml")
    assert [c.name for c in ftt.comparisons] == ["ftt"]
    assert pairs(ftt, "ftt") == [("ftt_0", "share_0"), ("ftt_25", "share_25")]
    assert ftt.budget.cap_usd == 0.0 and ftt.cell("share_25").seeds == [1, 2, 3]
    assert not any(ftt.is_live(c) for c in ftt.cells)


def without_declarations(src: Path, tmp_path: Path) -> Path:
    """``src`` with its tables: and every cell's table and compare_with taken out."""
    data = yaml.safe_load(src.read_text())
    assert data.pop("tables", None) is not None
    for cell in data["cells"]:
        cell.pop("table", None)
        cell.pop("compare_with", None)
    for key in ("base", "prices"):
        data[key] = str((src.parent / data[key]).resolve())
    out = tmp_path / src.name
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


@pytest.mark.parametrize("path", ["config/designs/confirmatory.yaml",
                                  "config/designs/exploratory.yaml",
                                  "config/test/designs/confirmatory.yaml"])
def test_declarations_move_no_config_hash_no_holm_family_and_no_freeze_fingerprint(path,
                                                                                   tmp_path):
    declared = load_design(ROOT / path, tmp_path)
    bare = load_design(without_declarations(ROOT / path, tmp_path), tmp_path)
    assert declared.comparisons and not bare.comparisons
    for cell, c in declared.cells.items():
        if c.unavailable:
            continue
        for mock in (False, True):
            assert (config_hash(run_config(declared, cell, mock))
                    == config_hash(run_config(bare, cell, mock))), (cell, mock)
    assert design_facts(declared)["families"] == design_facts(bare)["families"]
    assert fingerprint(declared) == fingerprint(bare)


def write(tmp_path: Path, cells: list[dict], tables: dict | None = None) -> Path:
    data = {"base": str(ROOT / "config/baseline.yaml"),
            "prices": str(ROOT / "config/prices.yaml"), "seeds": "1-2",
            "overrides": {"population.llm.provider_mix": {"mock": 1.0},
                          "population.llm.models": {"mock": "gpt-5.4-nano"}},
            "cells": cells}
    if tables is not None:
        data["tables"] = tables
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


SHARES = [{"name": "share_0", "overrides": {"population.llm_share": 0.0}},
          {"name": "share_25", "overrides": {"population.llm_share": 0.25}}]


def test_a_contrast_against_another_cell_keeps_its_holm_family_against_share_0(tmp_path):
    """ftt_25 is compared with share_25 in its table; the pre-registered family still pairs
    it with share_0."""
    path = write(tmp_path, [*SHARES,
                            {"name": "ftt_0", "table": "ftt",
                             "overrides": {"population.llm_share": 0.0,
                                           "exchange.transaction_tax": 0.001}},
                            {"name": "ftt_25", "table": "ftt", "compare_with": "share_25",
                             "overrides": {"population.llm_share": 0.25,
                                           "exchange.transaction_tax": 0.001}}],
                 {"ftt": {"title": "Tax"}})
    design = load_design(path)
    assert design.comparisons[0].pairs == (("ftt_0", "share_0"), ("ftt_25", "share_25"))
    assert design.cell("ftt_0").compare_with is None  # as written: share_0 by default
    family = tier_contrasts(list(design.cells), lambda c: label(design.cell(c).tier))
    assert {c.label: dict(c.control) for c in family} == {
        "share_25": {"share_0": 1}, "ftt_0": {"share_0": 1}, "ftt_25": {"share_0": 1}}


@pytest.mark.parametrize(("cells", "tables", "message"), [
    ([{"name": "x", "table": "ftt"}], {}, r"cell 'x': table 'ftt' is not declared under "
     r"tables: \(none declared\)"),
    ([{"name": "x", "table": "ftt"}], {"tax": {"title": "T"}},
     r"cell 'x': table 'ftt' is not declared under tables: \(tax\)"),
    ([{"name": "x", "compare_with": "share_25"}], {},
     r"cell 'x': compare_with 'share_25' without a table"),
    ([{"name": "x", "table": "t", "compare_with": "share_99"}], {"t": {"title": "T"}},
     r"cell 'x': compare_with 'share_99' is not a cell of the design \(share_0, share_25, x\)"),
    ([{"name": "x", "table": "t", "compare_with": "x"}], {"t": {"title": "T"}},
     r"cell 'x': compare_with names the cell itself"),
    ([{"name": "x", "table": "t"}], {"t": {"title": "T", "kind": "forest"}},
     r"tables.t.kind: Input should be 'paired' or 'equal_usd'"),
    ([{"name": "x", "table": "t"}], {"t": {"caption": "no title"}}, r"tables.t.title: Field "
     r"required"),
    ([{"name": "x", "table": "a-b"}], {"a-b": {"title": "T"}}, r"cells.\[x\].table: String "
     r"should match pattern"),
    ([{"name": "x"}], {"a-b": {"title": "T"}}, r"tables.a-b: a table name is letters, digits "
     r"and underscores"),
])
def test_bad_declarations_are_named_in_one_line(tmp_path, cells, tables, message):
    with pytest.raises(ConfigError, match=message):
        load_design(write(tmp_path, [*SHARES, *cells], tables))


def test_the_default_reference_must_be_a_cell(tmp_path):
    path = write(tmp_path, [SHARES[1], {"name": "x", "table": "t"}], {"t": {"title": "T"}})
    with pytest.raises(ConfigError, match=r"cell 'x': compare_with 'share_0' \(the default\) "
                                          r"is not a cell"):
        load_design(path)


def test_a_table_no_cell_joins_loads_and_the_paper_skips_it(tmp_path):
    """A design cut down to fewer cells keeps its tables: (the freeze guard, the gate and the
    paper read it as it is); the paper says why it has no such table."""
    from market_agents.paper import estimates
    from market_agents.paper.catalog import comparison_artifact
    from market_agents.paper.data import PaperData, Skip

    design = load_design(write(tmp_path, SHARES, {"t": {"title": "T", "kind": "equal_usd"}}))
    (empty,) = design.comparisons
    assert empty.pairs == () and empty.kind == "equal_usd"
    data = PaperData(design="d", rehearsal=False, mock_note=None, confirmatory=False,
                     outcomes=pl.DataFrame({"cell": ["share_0"], "seed": [1]}),
                     plan=pl.DataFrame({"cell": ["share_0"], "tier": [None]}))
    assert estimates.comparison(data, empty) == Skip(
        "no cell of the design joins it (a cell joins with table: t)")
    assert comparison_artifact(empty).caption.startswith("No cell of the design joins this")


def test_the_ftt_cells_differ_from_their_controls_by_the_tax_alone():
    ftt = load_design(DESIGNS / "ftt.yaml")
    for cell, control in (("ftt_0", "share_0"), ("ftt_25", "share_25")):
        taxed, plain = ftt.cell_config(cell), ftt.cell_config(control)
        assert taxed.exchange.switch("transaction_tax") == 0.001
        assert plain.exchange.switch("transaction_tax") is None
        assert taxed.population == plain.population and taxed.fundamentals == plain.fundamentals

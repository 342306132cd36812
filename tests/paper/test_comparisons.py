"""A comparison table declared in a design reaches the paper: a transaction-tax design with ftt_0
against share_0 and ftt_25 against share_25 in its table ``ftt`` gives a paper with those two
contrasts in that table, captioned from the design, in the Snakemake report's captions too;
its tier family still pairs every cell with share_0."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from market_agents.cli import main
from market_agents.paper.make import make_paper
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import run_design, write_gather
from tests.paper.test_paper import ROLES
from tests.support import ROOT

TAX = {"exchange.transaction_tax": 0.001}
TITLE = "Transaction tax against its controls"


def ftt_design(cells_extra: list[dict] | None = None, tables: dict | None = None) -> dict:
    return {
        "name": "ftt_demo", "base": "../../baseline.yaml", "prices": "../../prices.yaml",
        "seeds": "1-3",
        "overrides": {"simulation.ticks": 120, "simulation.burn_in": 20,
                      "population.n_traders": 20, "population.n_market_makers": 2,
                      "population.llm.provider_mix": {"mock": 1.0},
                      "population.llm.models": {"mock": "gpt-5.4-nano"}},
        "budget": {"cap_usd": 0.0},
        "tables": tables or {"ftt": {"title": TITLE, "caption": "A tax on every trade:"}},
        "cells": [
            {"name": "share_0", "overrides": {"population.llm_share": 0.0}},
            {"name": "share_25", "overrides": {"population.llm_share": 0.25}},
            {"name": "ftt_0", "table": "ftt", "compare_with": "share_0",
             "overrides": {"population.llm_share": 0.0, **TAX}},
            {"name": "ftt_25", "table": "ftt", "compare_with": "share_25",
             "overrides": {"population.llm_share": 0.25, **TAX}},
            *(cells_extra or [])],
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ftt")
    shutil.copytree(ROOT / "config", root / "config")
    path = root / "config/test/designs/ftt_demo.yaml"
    path.write_text(yaml.safe_dump(ftt_design(), sort_keys=False))
    design = load_design(path, root / "results")
    run_design(design, root=root / "results", progress=False)
    write_gather(design, root=root / "results")
    make_paper("ftt_demo", root / "paper", root / "config/test/designs", ROLES,
               root / "results", progress=False)
    return root


def test_the_declared_contrasts_are_the_rows_of_the_declared_table(project):
    import json

    summary = json.loads((project / "paper/paper.json").read_text())
    assert summary["tables"][:4] == ["design_overview", "primary_estimates", "dose_response",
                                     "ftt"]
    table = pl.read_csv(project / "paper/tables/ftt.csv", comment_prefix="#")
    assert set(table.select("cell", "control").unique().iter_rows()) == {
        ("ftt_0", "share_0"), ("ftt_25", "share_25")}
    assert set(table["family"]) == {"ftt"}
    # a known answer: the mean over seeds of y(ftt_25, s) - y(share_25, s)
    o = pl.read_parquet(project / "results/runs/ftt_demo/outcomes.parquet")
    per = {c: dict(o.filter(pl.col("cell") == c).select("seed", "volatility").iter_rows())
           for c in ("ftt_25", "share_25")}
    expected = sum(per["ftt_25"][s] - per["share_25"][s] for s in (1, 2, 3)) / 3
    row = table.filter((pl.col("cell") == "ftt_25") & (pl.col("outcome") == "volatility"))
    assert row["diff"][0] == pytest.approx(expected, rel=1e-12)
    head = (project / "paper/tables/ftt.csv").read_text().splitlines()[:2]
    assert head[0] == f"# [Mock-based (no live cell in this design)] {TITLE}"
    assert ("A tax on every trade: ftt_0 against share_0; ftt_25 against share_25, seed by "
            "seed; one Holm family over the design's primary outcomes (volatility, "
            "mispricing).") in head[1]
    assert f"Table: [Mock-based (no live cell in this design)] {TITLE}" in (
        project / "paper/index.html").read_text()


def test_the_tier_family_still_pairs_every_cell_with_share_0(project):
    primary = pl.read_csv(project / "paper/tables/primary_estimates.csv", comment_prefix="#")
    assert dict(primary.select("cell", "control").unique().iter_rows()) == {
        "share_25": "share_0", "ftt_0": "share_0", "ftt_25": "share_0"}


def test_the_report_captions_the_declared_table(project, monkeypatch):
    from market_agents.pipeline.workflow import Workflow

    monkeypatch.chdir(project)
    flow = Workflow({"designs_dir": "config/test/designs", "paper": "ftt_demo"})
    captions = flow.paper_captions(None)  # reStructuredText: [ and _ escaped
    assert captions["table/ftt"].startswith(
        f"\\[Mock-based (no live cell in this design)] {TITLE}. MOCK-BASED")
    assert "ftt\\_0 against share\\_0; ftt\\_25 against share\\_25" in captions["table/ftt"]
    assert "table/primary_estimates" in captions


def test_a_comparison_named_as_a_catalogue_table_is_refused(project, capsys):
    designs = project / "config/test/designs"
    data = ftt_design(tables={"primary_estimates": {"title": "T"}})
    for cell in data["cells"]:
        if cell.get("table"):
            cell["table"] = "primary_estimates"
    (designs / "ftt_demo.yaml").rename(designs / "ftt_demo.keep")
    try:
        (designs / "ftt_demo.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        code = main(["paper", "--design", "ftt_demo", "--designs-dir", str(designs),
                     "--results", str(project / "results"), "--out",
                     str(project / "refused"), "--quiet"])
    finally:
        (designs / "ftt_demo.keep").replace(designs / "ftt_demo.yaml")
    err = capsys.readouterr().err
    assert code == 2 and "tables.primary_estimates: the paper has a table of that name" in err
    assert not (project / "refused").exists()


def test_the_tax_changes_the_market_and_conserves_cash(project):
    """Issue 34: ftt_0's trades differ from share_0's on every seed, its quoted spread is wider
    on average, and every run of the design conserves cash (the tax is kept in the pot)."""
    import json

    runs = project / "results/runs/ftt_demo"
    for seed in (1, 2, 3):
        taxed, plain = (runs / cell / f"seed{seed:04d}" for cell in ("ftt_0", "share_0"))
        assert (taxed / "trades.parquet").read_bytes() != (plain / "trades.parquet").read_bytes()
    o = pl.read_parquet(runs / "outcomes.parquet")
    spread = dict(o.group_by("cell").agg(pl.col("mean_spread").mean()).iter_rows())
    assert spread["ftt_0"] > spread["share_0"] and spread["ftt_25"] > spread["share_25"]
    assert set(o.filter(pl.col("cell").str.starts_with("ftt"))["mechanisms"]) == {
        "transaction_tax"}
    for manifest in runs.glob("*/seed*/manifest.json"):
        assert json.loads(manifest.read_text())["final_conservation_ok"], manifest

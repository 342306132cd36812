"""The paper of a researcher's own design (issue 36): five mock cells without tiers
(config/test/own/five_cells.yaml, the control listed second). No tier DAG or spend-by-tier
figure, cells in design order with the control first, the mock said once at the top and in the
titles, a forest plot of every declared contrast, no panel of an outcome that never moves, and
in headless Chromium every image loaded and nothing cut off at 1,280 px."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib
import polars as pl
import pytest

from market_agents.paper.make import make_paper
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import run_design, write_gather
from tests.paper.test_paper import ROLES
from tests.support import ROOT
from tests.support.browser import Page, chromium

ORDER = ["share_0", "share_25", "breaker_25", "memory_25", "share_50"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[dict, Path]:
    root = tmp_path_factory.mktemp("own")
    shutil.copytree(ROOT / "config", root / "config")
    design = load_design(root / "config/test/own/five_cells.yaml", root / "results")
    run_design(design, root=root / "results", progress=False)
    write_gather(design, root=root / "results")
    out = root / "paper"
    summary = make_paper("five_cells", out, root / "config/test/own", ROLES, root / "results",
                         progress=False)
    return summary, out


def test_no_tier_figures_for_a_design_without_tiers(built):
    summary, out = built
    for tiered in ("protocol_dag", "spend"):
        assert tiered not in summary["figures"]
        assert summary["skipped"][f"figures/{tiered}"] == "the design has no tiers"
    assert "forest" in summary["figures"] and (out / "figures/forest.png").exists()


def test_cells_in_design_order_with_the_control_first(built):
    _, out = built
    primary = pl.read_csv(out / "tables/primary_estimates.csv", comment_prefix="#")
    # breaker_25 and memory_25 against share_25, as the design declares (against:)
    assert primary["cell"].unique(maintain_order=True).to_list() == ORDER[1:]
    assert dict(primary.select("cell", "control").unique().iter_rows()) == {
        "share_25": "share_0", "breaker_25": "share_25", "memory_25": "share_25",
        "share_50": "share_0"}
    activity = pl.read_csv(out / "tables/mechanism_activity.csv", comment_prefix="#")
    assert activity["cell"].to_list() == ORDER


def test_the_mock_is_said_once_at_the_top_and_in_the_titles(built):
    summary, out = built
    index = (out / "index.html").read_text()
    note = summary["mock"]
    assert note == "Mock-based (no live cell in this design)"
    assert index.count(note.upper()) == 1  # the banner at the top
    assert index.count("MOCK-BASED") == 1  # and in no caption
    assert index.count(f"[{note}]") >= len(summary["tables"]) + len(summary["figures"])


def test_no_panel_of_an_outcome_that_never_moves(built, tmp_path):
    from market_agents.analysis.stats import PAPER_OUTCOMES
    from market_agents.paper.inputs import load

    data, texts, _ = load("five_cells", Path(built[1]).parent / "config/test/own", ROLES,
                          Path(built[1]).parent / "results")
    from market_agents.paper.contents import build

    paper = build(data, texts)
    o = data.outcomes
    flat = [y for y in PAPER_OUTCOMES if y in o.columns
            and o[y].cast(pl.Float64).drop_nulls().n_unique() <= 1]
    assert {"n_bubbles", "n_crashes"} <= set(flat)  # no bubble or crash on this mock market
    for name in ("outcome_distributions", "forest", "dose_response"):
        fig = paper.figures[name][1]
        panels = {ax.get_title() for ax in fig.axes if ax.get_visible()}
        assert panels and not panels & set(flat), name
        text = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        assert "not shown, never moved" in text.replace("\n", " "), name
    dist = paper.figures["outcome_distributions"][1]
    labels = [t.get_text() for t in dist.axes[0].get_xticklabels()]
    assert labels == ORDER


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_every_image_loads_and_nothing_is_cut_off_at_1280_px(built):
    summary, out = built
    with Page((out / "index.html").as_uri()) as page:
        images = page.images()
        assert images["broken"] == [] and images["n"] == len(summary["figures"])
        assert page.errors() == []
        assert page.cut_off(1280) == []
    assert json.loads((out / "paper.json").read_text())["design"] == "five_cells"

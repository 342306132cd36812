"""A finished little study for ``ma status`` tests: the tiny test designs (config/test/designs)
run into a scratch project, with a run's price figure and the design's volatility figure, as
`make run` leaves the exploratory design."""

from __future__ import annotations

import shutil
from pathlib import Path

from market_agents import layout
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import run_design, write_gather
from tests.support import ROOT

CONFIGFILE = "config/test/workflow.yaml"
DESIGN = "exploratory"  # config/test/designs/exploratory.yaml: share_0, share_25 x seeds 1-2
REHEARSED = "live"  # config/test/designs/live.yaml: a live cell, rehearsed on the mock


def build_study(project: Path) -> Path:
    """Copy the config tree into ``project`` and make the tiny exploratory design's 4 runs
    (gathered, with ``share_25/seed0001/price.png`` and the design's ``volatility.png``) and the
    mock rehearsal of the ``live`` test design, under ``project/results``. Returns ``project``.
    """
    from market_agents.analysis.figures import design_figure, run_figure

    shutil.copytree(ROOT / "config", project / "config")
    results = project / layout.ROOT
    designs = project / "config" / "test" / "designs"
    design = load_design(designs / f"{DESIGN}.yaml", results)
    run_design(design, workers=1, root=results, progress=False)
    outcomes = write_gather(design, root=results)
    run_figure(design.run_dir("share_25", 1), design.run_dir("share_25", 1) / "price.png", 0)
    design_figure(outcomes, "volatility", outcomes.with_name("volatility.png"))
    rehearsed = load_design(designs / f"{REHEARSED}.yaml", results)
    run_design(rehearsed, workers=1, mock=True, root=results, progress=False)
    write_gather(rehearsed, mock=True, root=results)
    return project


def copy_study(built: Path, project: Path) -> Path:
    """A copy of a built study to change (runs deleted, manifests edited)."""
    shutil.copytree(built, project, symlinks=True)
    return project

"""The whole paper on mock answers before any spend: `snakemake paper` of
rehearse_confirmatory on the real confirmatory design, the first two seeds of every cell
(opt-in: `make test-rehearsal`; the full-size time is in bench/README.md)."""

from __future__ import annotations

import json

import pytest

from market_agents.paper.catalog import ARTIFACTS
from market_agents.protocol.design import load_design
from tests.support.workflow import smk

pytestmark = [pytest.mark.slow, pytest.mark.rehearsal]


def test_rehearsal_of_the_confirmatory_design_writes_the_whole_paper(workdir):
    done = smk(workdir, "--cores", "2", "paper", "--config", "paper=rehearse_confirmatory",
               "max_seeds=2", test_config=False, timeout=3000)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    summary = json.loads((workdir / "paper/paper.json").read_text())
    assert summary["mock"] == "Mock-based rehearsal"
    assert not (workdir / "results/runs/confirmatory").exists()  # nothing live was touched
    declared = load_design(workdir / "config/designs/confirmatory.yaml").comparisons
    tables = {a.name for a in ARTIFACTS if a.kind == "table"} | {c.name for c in declared}
    assert {"mechanisms", "diversity", "fairness"} <= tables
    assert set(summary["tables"]) == tables, summary["skipped"]
    figures = {a.name for a in ARTIFACTS if a.kind == "figure"} - {"price"}
    assert figures <= set(summary["figures"]), summary["skipped"]
    assert not [k for k in summary["skipped"] if not k.startswith("figures/price_")]
    md = (workdir / "paper/tables/primary_estimates.md").read_text()
    assert md.startswith("## [Mock-based rehearsal]") and "MOCK-BASED REHEARSAL" not in md
    assert "E5 (leverage_25 - share_25) - (leverage_0 - share_0)" in md
    library = (workdir / "paper/tables/library.csv").read_text()
    assert "N = 1,000: the arm (every replayed decision)" in library  # per decision, §5.4
    assert "N = 100: the library" in library
    from tests.pipeline.test_paper_workflow import assert_readable
    from tests.support.browser import Page, chromium

    if chromium() is not None:
        with Page((workdir / "paper/index.html").as_uri()) as page:
            assert page.errors() == []
            assert_readable(page, summary)
            page.screenshot(workdir / "paper/index.png", width=1280, height=20000)

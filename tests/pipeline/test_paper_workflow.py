"""`snakemake paper` and its report on the tiny test designs, opened in real headless Chromium:
every image loads, nothing logs an error, and the report embeds every table and figure of the
paper with its caption."""

from __future__ import annotations

import json

import pytest

from tests.support.browser import Page, chromium
from tests.support.workflow import smk

IMAGES_LOAD = """Promise.all(Object.entries(results)
  .filter(([k, r]) => r.mime_type.startsWith('image/'))
  .map(([k, r]) => new Promise(done => { const i = new Image();
     i.onload = () => done([k, i.naturalWidth > 0]); i.onerror = () => done([k, false]);
     i.src = r.data_uri; })))"""


def assert_readable(page: Page, summary: dict) -> None:
    """What a referee reads: nothing cut off at a laptop's width, the appendices as HTML (not
    raw Markdown in a <pre>), the sensitivity grid as cells x thresholds, the estimates with
    their role and why a row has no interval."""
    assert page.cut_off(1280) == []
    assert page.evaluate("document.querySelectorAll('pre').length") == 0
    appendix = page.evaluate("[...document.querySelectorAll('.appendix h1')]"
                             ".map(h => h.textContent)")
    assert appendix == ["Model cards", "Deviations from the run protocol"]
    assert page.evaluate("document.querySelectorAll('#deviations li').length") >= 8
    headers = page.evaluate("[...document.querySelectorAll('table')].map(t => "
                            "[...t.rows[0].cells].map(c => c.textContent))")
    assert any("n_bubbles @ 3 %" in h and "crash_share @ 15 %" in h for h in headers)
    assert any("role" in h and "not_estimable" in h and "t interval" in h for h in headers)
    if "fairness" in summary["tables"]:
        assert any("made_per_agent" in h for h in headers)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    import shutil

    from tests.support import ROOT

    workdir = tmp_path_factory.mktemp("paper_workflow")
    shutil.copytree(ROOT / "config", workdir / "config")
    done = smk(workdir, "--cores", "2", "paper", "--config", "paper=exploratory")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    report = smk(workdir, "--report", "paper/report.html", "paper", "--config",
                 "paper=exploratory")
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    return workdir


@pytest.mark.slow(43)
def test_snakemake_paper_builds_the_free_designs_first_and_writes_the_paper(built):
    summary = json.loads((built / "paper/paper.json").read_text())
    assert summary["design"] == "exploratory" and summary["mock"]
    assert (built / "results/runs/exploratory/outcomes.parquet").exists()
    assert (built / "results/runs/sigma/outcomes.parquet").exists()
    assert "control_sd" in summary["tables"] and "forest" in summary["figures"]
    assert "protocol_dag" not in summary["figures"]  # the exploratory design has no tiers
    log = (built / "results/logs/paper.log").read_text()
    assert "paper exploratory" in log and "tables" in log  # the progress display


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_index_and_report_open_in_headless_chromium(built):
    summary = json.loads((built / "paper/paper.json").read_text())
    with Page((built / "paper/index.html").as_uri()) as page:
        images = page.images()
        assert images["broken"] == [] and images["n"] == len(summary["figures"])
        assert page.errors() == []
        titles = page.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)")
        assert sum(t.startswith("Table: [Mock-based") for t in titles) == len(summary["tables"])
        assert_readable(page, summary)
    with Page((built / "paper/report.html").as_uri()) as page:
        assert page.images()["broken"] == []
        results = page.evaluate("Object.fromEntries(Object.entries(results).map(([k, r]) => "
                                "[k, r.caption]))")
        expected = {f"paper/tables/{t}.html" for t in summary["tables"]} | {
            f"paper/figures/{f}.png" for f in summary["figures"]}
        assert expected == set(results)  # every table and figure, and no raw parquet
        assert all("MOCK-BASED" in c and len(c) > 200 for c in results.values())
        loaded = page.evaluate(IMAGES_LOAD)
        assert len(loaded) == len(summary["figures"]) and all(ok for _, ok in loaded)
        assert page.errors() == []

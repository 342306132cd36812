"""Bazaar's results page (docs/bazaar_results.md, issue 37) shows the anchors exactly as
`ma bazaar anchors --seeds 20` prints them, row for row and digit for digit, so the page
cannot go stale silently: a change of any figure fails here until the page is regenerated."""

from __future__ import annotations

import json

from market_agents.cli import main
from tests.support import ROOT

PAGE = ROOT / "docs/bazaar_results.md"


def _page_rows() -> list[list[str]]:
    text = PAGE.read_text(encoding="utf-8")
    block = text.split("<!-- anchors:begin", 1)[1].split("<!-- anchors:end -->", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in block.splitlines()[1:] if line.startswith("|")]
    return rows[2:]  # the header and its rule


def _printed_rows(stdout: str) -> list[list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line and set(line) == {"-"})
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("eval:"):
            break
        rows.append(line.split())
    return rows


def test_the_results_page_table_is_what_ma_bazaar_anchors_prints(tmp_path, capsys):
    assert main(["bazaar", "anchors", "--seeds", "20", "--out", str(tmp_path / "a")]) == 0
    printed = _printed_rows(capsys.readouterr().out)
    page = _page_rows()
    assert len(printed) == 30 and all(len(r) == 10 for r in printed)
    assert page == printed, "docs/bazaar_results.md is stale: paste what " \
        "`ma bazaar anchors --seeds 20` prints between its anchors markers"
    # and the file it writes holds the same evaluation-split scores
    written = json.loads((tmp_path / "a/anchors.json").read_text())["rows"]
    evals = {(r["tier"], r["policy"]): f"{r['score']:.4f}" for r in written
             if r["block"] == "eval"}
    assert {(r[0], r[1]): r[2] for r in page} == evals


def test_the_design_note_and_results_page_are_linked_from_bazaar_md():
    text = (ROOT / "docs/bazaar.md").read_text(encoding="utf-8")
    assert "(bazaar_design.md)" in text and "(bazaar_results.md)" in text
    assert (ROOT / "docs/bazaar_design.md").is_file()

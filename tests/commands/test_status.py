"""``ma status`` on a finished little study (the tiny test designs): a line per cell, the next
command, --json, --seeds; after a run is deleted and the engine changed (a scratch copy of the
package), the missing and stale runs named; the HTML page's every link and image loading (in
headless Chromium when it is installed); bad input refused in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from market_agents.cli import main
from market_agents.pipeline.workflow_config import DEFAULTS, WorkflowConfig
from market_agents.sim import fingerprint as fp
from tests.support import ROOT
from tests.support.browser import Page, chromium
from tests.support.study import CONFIGFILE, build_study, copy_study

TEST_DESIGNS = ["confirmatory", "exploratory", "live", "pilot_openai", "repilot_openai", "sigma"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("study") / "project")


@pytest.fixture
def study(built, tmp_path, monkeypatch):
    project = copy_study(built, tmp_path / "project")
    monkeypatch.chdir(project)
    return project


def status(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["status", "--configfile", CONFIGFILE, *args])
    out, err = capsys.readouterr()
    return code, out, err


def block(out: str, heading: str) -> list[str]:
    """The lines of one design's block of the text output (its heading starts with
    ``heading``)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")),
               len(lines))
    return lines[start:end]


def test_every_design_a_line_per_cell_and_the_next_command(study, capsys):
    code, out, err = status(capsys)
    assert code == 0 and err == ""
    assert out.splitlines()[0] == (f"results root results; code fingerprint "
                                   f"{fp.short(fp.fingerprint())} (sim/fingerprint.py)")
    exploratory = block(out, "exploratory ")
    assert exploratory[0] == ("exploratory (config/test/designs/exploratory.yaml): "
                              "results/runs/exploratory")
    assert exploratory[2].split() == ["share_0", "2", "2", "0", "0", "0", "free"]
    assert exploratory[-2].split() == ["total", "4", "4", "0", "0", "0", "free"]
    assert exploratory[-1] == ("  next: nothing to make: .venv/bin/ma summary "
                               "results/runs/exploratory/outcomes.parquet")
    assert block(out, "sigma ") == [
        "sigma (config/test/designs/sigma.yaml): results/runs/sigma: none of 3 runs made yet",
        "  next: .venv/bin/snakemake --cores 2 sigma --configfile config/test/workflow.yaml"]
    # a design the workflow gives no target: ma design; a live cell: it pays
    assert block(out, "live (")[1] == "  next: .venv/bin/ma design config/test/designs/live.yaml" \
        "  # makes paid calls"
    rehearsal = block(out, "live rehearsal")
    assert rehearsal[0].endswith("results/rehearsal/live")
    assert rehearsal[2].split() == ["share_25", "3", "3", "0", "0", "0", "free"]
    assert rehearsal[-1] == ("  next: nothing to make: .venv/bin/ma summary "
                             "results/rehearsal/live/outcomes.parquet")


def test_one_design_by_name_or_file_with_a_line_per_seed(study, capsys):
    _, by_name, _ = status(capsys, "exploratory")
    _, by_file, _ = status(capsys, "config/test/designs/exploratory.yaml")
    assert by_name == by_file and "sigma" not in by_name
    _, seeds, _ = status(capsys, "exploratory", "--seeds")
    runs = [line.split() for line in seeds.splitlines() if " seed0" in line]
    assert runs == [[c, f"seed000{s}", "present", "free"] for c in ("share_0", "share_25")
                    for s in (1, 2)]


def test_json_for_scripts(study, capsys):
    code, out, _ = status(capsys, "--json")
    data = json.loads(out)
    assert code == 0 and data["code_fingerprint"] == fp.fingerprint() and data["errors"] == []
    shown = [(d["design"], d["mock"]) for d in data["designs"]]
    assert shown == [(n, False) for n in TEST_DESIGNS[:3]] + [("live", True)] + [
        (n, False) for n in TEST_DESIGNS[3:]]
    exploratory = data["designs"][1]
    assert exploratory["counts"] == {"present": 4, "missing": 0, "stale": 0, "failed": 0,
                                     "runs": 4}
    run = exploratory["cells"][1]["runs"][0]
    assert run == {"cell": "share_25", "seed": 1,
                   "path": "results/runs/exploratory/share_25/seed0001", "state": "present",
                   "why": "", "usd": 0.0, "paid": False,
                   "figures": ["results/runs/exploratory/share_25/seed0001/price.png"]}


def test_after_a_run_is_deleted_and_the_engine_changed_they_are_named(study):
    """The engine of today is a scratch copy of the package with a comment appended to
    market/book.py, put first on PYTHONPATH: the checkout is never modified."""
    shutil.rmtree("results/runs/exploratory/share_25/seed0002")
    src = study.parent / "src"
    shutil.copytree(fp.PACKAGE_ROOT, src / "market_agents",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with (src / "market_agents" / "market" / "book.py").open("a") as fh:
        fh.write("# the engine changed\n")
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-m", "market_agents.cli", "status", "exploratory",
                           "--configfile", CONFIGFILE], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert fp.short(fp.fingerprint()) not in lines[0]  # the copy's code
    assert lines[-4].split() == ["total", "4", "0", "1", "3", "0", "free"]
    assert lines[-3:] == [
        "  missing: share_25 seed 2",
        f"  stale (made by code {fp.short(fp.fingerprint())}): all of share_0; share_25 seed 1",
        "  next: .venv/bin/snakemake --cores 2 exploratory --configfile config/test/workflow.yaml"]


class Links(HTMLParser):
    """Every ``href`` and ``src`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("href"):
            self.hrefs.append(a["href"])
        if tag == "img":
            self.srcs.append(a["src"])


def test_the_page_links_every_run_and_figure_relative_to_itself(study, capsys):
    Path("pages").mkdir()
    code, out, _ = status(capsys, "exploratory", "--html", "pages/status.html")
    assert code == 0 and out.splitlines()[-1] == "wrote pages/status.html"
    text = Path("pages/status.html").read_text()
    assert "<script" not in text and "http" not in text  # self-contained
    links = Links()
    links.feed(text)
    files = {(Path("pages") / unquote(h)).resolve() for h in links.hrefs}
    runs = {(study / "results/runs/exploratory" / c / f"seed000{s}").resolve()
            for c in ("share_0", "share_25") for s in (1, 2)}
    figures = {(study / "results/runs/exploratory" / f).resolve()
               for f in ("volatility.png", "share_25/seed0001/price.png")}
    assert runs | figures <= files and all(f.exists() for f in files)
    assert {(Path("pages") / unquote(s)).resolve() for s in links.srcs} == figures


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_the_page_in_headless_chromium_every_link_and_image_loads(study, capsys):
    shutil.rmtree("results/runs/exploratory/share_0/seed0002")  # a missing run: no link
    assert status(capsys, "--html", "status.html")[0] == 0
    with Page((study / "status.html").as_uri()) as page:
        images = page.images()
        assert images["broken"] == [] and images["n"] == 2
        assert page.errors() == []
        assert page.cut_off(1280) == []
        hrefs = page.evaluate("[...document.querySelectorAll('a')].map(a => a.href)")
        # every run folder present (3 + the rehearsal's 3), its design folders, the figures
        # twice (a link around each image)
        assert sum("/seed000" in h and h.endswith("/") for h in hrefs) == 6
        for href in hrefs:
            if href.startswith("file:") and "#" not in href:
                assert Path(unquote(urlparse(href).path)).exists(), href
                nav = page.call("Page.navigate", session=True, url=href)
                assert "errorText" not in nav, (href, nav)
        assert page.errors() == []


@pytest.mark.parametrize("args,names", [
    (["nope"], "nope: no such design file, nor config/test/designs/nope.yaml (designs: "
               "confirmatory, exploratory, live"),
    (["nope.yaml"], "nope.yaml: no such design file"),
    (["--configfile", "missing.yaml"], "--configfile missing.yaml: no such file"),
    (["--configfile", "bad.yaml"], "bad.yaml"),
    (["--html", "results"], "--html results: give a file ending in .html"),
    (["--html", "status.txt"], "--html status.txt"),
    (["--results", "a_file"], "--results a_file: not a folder"),
])
def test_bad_input_is_one_line_exit_2(study, capsys, args, names):
    Path("bad.yaml").write_text("designs_dir: config/test/designs\nexploratroy: x\n")
    Path("a_file").write_text("")
    code = main(["status", *(["--configfile", CONFIGFILE] if "--configfile" not in args else []),
                 *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith("ma status: error: ")
    assert names in err
    assert not Path("status.txt").exists()


def test_a_design_that_does_not_load_is_named_and_the_others_shown(study, capsys):
    Path("config/test/designs/broken.yaml").write_text("name: broken\ncells: []\n")
    code, out, err = status(capsys)
    assert code == 2 and "exploratory (config/test/designs/exploratory.yaml)" in out
    assert err.splitlines() == ["ma status: error: config/test/designs/broken.yaml: "
                                "config/test/designs/broken.yaml: cells: empty"]


def test_the_proposed_targets_are_rules_of_the_workflow():
    rules = set(re.findall(r"^rule (\w+):", (ROOT / "rules/targets.smk").read_text(), re.M))
    proposed = {DEFAULTS.target(n, mock) for n in TEST_DESIGNS for mock in (False, True)}
    assert proposed - {None} <= rules
    assert DEFAULTS.target("exploratory") == "exploratory"
    assert DEFAULTS.target("exploratory", mock=True) is None  # ma design --mock
    assert DEFAULTS.target("confirmatory", mock=True) == "rehearse_confirmatory"
    assert WorkflowConfig(pilot="my_pilot").target("my_pilot") == "pilot"
    assert DEFAULTS.target("leverage") is None

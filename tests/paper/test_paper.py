"""The paper of a design from its saved files (``ma paper``, protocol §6) on the tiny test
designs: every table and figure the design supports, the rest skipped with a reason; the same
bytes twice; built again from the four parquet files and the manifests alone; a rehearsal marked
mock-based everywhere; bad input named in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import matplotlib.text
import polars as pl
import pytest

from market_agents.cli import main
from market_agents.paper.catalog import ARTIFACTS
from market_agents.paper.inputs import Roles, load
from market_agents.paper.make import make_paper
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import run_design, write_gather
from market_agents.protocol.tiers import TIERS
from market_agents.sim.rundir import MANIFEST_FILE, table_file
from tests.support import ROOT

KEEP = {table_file(t) for t in ("ticks", "trades", "llm_decisions")} | {MANIFEST_FILE}
ROLES = Roles(confirmatory="confirmatory", sigma="sigma", pilot="pilot_openai",
              control="share_0", usd_per_decision=0.0005)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A scratch project with the tiny exploratory and sigma designs run, the tiny
    confirmatory design and its pilot rehearsed on the mock."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(ROOT / "config", root / "config")
    designs, results = root / "config/test/designs", root / "results"

    def run(name: str, mock: bool) -> Path:
        design = load_design(designs / f"{name}.yaml", results)
        run_design(design, mock=mock, root=results, progress=False)
        return write_gather(design, mock=mock, root=results)

    run("exploratory", False)
    run("sigma", False)
    run("sigma", True)  # what a rehearsal's freeze and paper read
    pilot = run("pilot_openai", True)
    # T5's cap is read from the (rehearsal) freeze: rehearse the pilot's manifest and the
    # freeze before the confirmatory design, as the workflow does.
    manifests = results / "rehearsal/manifests"
    assert main(["pilot", str(designs / "pilot_openai.yaml"), "--mock", "--outcomes", str(pilot),
                 "--out", str(manifests / "pilot.json")]) == 0
    assert main(["freeze", "create", str(designs / "confirmatory.yaml"), "--mock",
                 "--results", str(results), "--sigma", str(designs / "sigma.yaml")]) == 0
    run("confirmatory", True)
    return root


def paper(project: Path, target: str, out: str) -> tuple[dict, Path]:
    dest = project / out
    summary = make_paper(target, dest, project / "config/test/designs", ROLES,
                         project / "results", progress=False)
    return summary, dest


@pytest.fixture(scope="module")
def exploratory(project: Path) -> tuple[dict, Path]:
    """The exploratory design's paper, built once for the tests that read it (a build is
    ~8 CPU s, mostly its figures)."""
    return paper(project, "exploratory", "paper")


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_exploratory_paper_writes_what_the_design_supports_and_says_why_not_the_rest(
        exploratory):
    summary, out = exploratory
    assert {"design_overview", "primary_estimates", "dose_response", "control_sd",
            "sensitivity", "llm_behaviour", "model_mix",
            "mechanism_activity"} <= set(summary["tables"])
    assert {"dose_response", "price_share_0", "price_share_25", "outcome_distributions",
            "forest"} <= set(summary["figures"])
    for tiered in ("spend", "protocol_dag"):  # the exploratory design has no tiers
        assert summary["skipped"][f"figures/{tiered}"] == "the design has no tiers"
    names = {f"tables/{a.name}" for a in ARTIFACTS if a.kind == "table"} | {
        f"figures/{a.name}" for a in ARTIFACTS if a.kind == "figure" and a.name != "price"}
    written = {f"tables/{t}" for t in summary["tables"]} | {
        f"figures/{f}" for f in summary["figures"]}
    assert names - written == set(summary["skipped"]) - {"figures/price"}
    assert all(summary["skipped"].values())
    # a comparison table is the design's (tables:): the tiny design declares none, so the paper
    # neither writes nor skips one
    named = set(summary["tables"]) | {k.split("/")[1] for k in summary["skipped"]}
    assert not {"mechanisms", "diversity", "fairness"} & named
    for t in summary["tables"]:
        for ext in ("csv", "md", "tex", "html"):
            assert (out / "tables" / f"{t}.{ext}").stat().st_size > 0
    for f in summary["figures"]:
        assert (out / "figures" / f"{f}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / "figures" / f"{f}.pdf").read_bytes()[:5] == b"%PDF-"
    estimates = pl.read_csv(out / "tables/primary_estimates.csv", comment_prefix="#")
    assert set(estimates["cell"]) == {"share_25"} and estimates["n"].max() == 2
    undefined = estimates.filter(pl.col("n") < 2)  # e.g. shocks after the tiny run's end
    assert undefined["dropped"].str.contains("undefined in").all()
    for name in ("model_cards.md", "deviations.md", "index.html"):
        assert (out / name).stat().st_size > 0
    cards = (out / "model_cards.md").read_text()
    # the tiny design's free mock runs use no cache: no answer was recorded on any date
    assert "## gpt-5.4-nano (mock)" in cards and "dates used: not recorded" in cards
    assert "- prompt SHA-256: `" in cards and "answer schema SHA-256: `" in cards
    assert "2026-10-27" in cards and "effort low, max output tokens 1024" in cards
    deviations = (out / "deviations.md").read_text()
    assert "53,388 decisions and 32.58 USD" in deviations and "`config/`" in deviations
    assert ">= 3.11" in deviations and "No deviation has been logged" in deviations
    from market_agents.paper.cards import KNOWN_DEVIATIONS

    for known in KNOWN_DEVIATIONS:  # every known departure, dated, from the one list
        assert f"- {known['date']} ({known['section']}): {known['reason']}" in deviations
    for departure in ("manifest.json", "one process per batch", "`ma cell --score`",
                      "101-110", "noncentral t"):
        assert departure in deviations


def test_two_invocations_give_the_same_bytes(project, exploratory):
    _, first = exploratory
    _, second = paper(project, "exploratory", "paper_again")
    a, b = files(first), files(second)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


def test_the_paper_builds_from_the_four_parquet_files_and_the_manifests(project, exploratory,
                                                                        tmp_path):
    _, before = exploratory
    stripped = tmp_path / "project"
    shutil.copytree(project / "config", stripped / "config")
    shutil.copytree(project / "results", stripped / "results")
    removed = 0
    for f in sorted((stripped / "results").rglob("*")):
        if f.is_file() and "seed" in f.parent.name and f.name not in KEEP:
            f.unlink()
            removed += 1
        elif f.is_file() and f.name == "sensitivity.parquet":
            f.unlink()
    assert removed > 0
    run = stripped / "results/runs/exploratory/share_25/seed0001"
    assert {p.name for p in run.iterdir()} == KEEP
    summary = make_paper("exploratory", stripped / "paper", stripped / "config/test/designs",
                         ROLES, stripped / "results", progress=False)
    assert summary["tables"] == json_list(before, "tables")
    assert files(stripped / "paper/tables") == files(before / "tables")


def json_list(folder: Path, key: str) -> list[str]:
    import json

    return json.loads((folder / "paper.json").read_text())[key]


def test_a_rehearsal_is_marked_mock_based_in_every_title_and_caption(project):
    data, texts, _ = load("rehearse_confirmatory", project / "config/test/designs", ROLES,
                          project / "results")
    from market_agents.paper.contents import build

    built = build(data, texts)
    assert data.rehearsal and data.confirmatory and data.mock_note == "Mock-based rehearsal"
    for name, (a, _frame) in built.tables.items():
        assert built.title(a).startswith("[Mock-based rehearsal]"), name
        # said once at the top and in every title, not in every caption
        assert "MOCK-BASED" not in built.caption(a), name
        assert built.caption(a, alone=True).startswith("MOCK-BASED REHEARSAL"), name
    for name, (_, fig, _) in built.figures.items():
        text = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        assert "Mock-based rehearsal" in text, name
    assert "Mock-based rehearsal" in texts["model_cards.md"]
    assert "pilot_diagnostics" in built.figures  # the rehearsed pilot
    # the protocol DAG draws one row per tier of the one tier list, in order
    assert data.tiers == TIERS
    dag = built.figures["protocol_dag"][1]
    rows = [t.get_text() for t in dag.axes[0].texts if t.get_fontweight() == "bold"]
    assert rows == list(TIERS)
    assert "rehearsed pilot" in data.mde_source
    # outcomes that never moved (one value in every run, e.g. no bubble on the mock): no panel,
    # named in the caption; their estimates say so instead of printing a difference of 0
    from market_agents.analysis.stats import PAPER_OUTCOMES

    flat = [y for y in PAPER_OUTCOMES if y in data.outcomes.columns
            and data.outcomes[y].cast(pl.Float64).drop_nulls().n_unique() <= 1]
    assert flat, "the tiny rehearsal has outcomes that never move (no bubble, no crash)"
    fig = built.figures["outcome_distributions"][1]
    panels = {ax.get_title() for ax in fig.axes if ax.get_visible()}
    assert not panels & set(flat) and panels
    caption = fig._suptitle.get_text().replace("\n", " ")
    assert ("not shown, never moved (one value, or none, in every run): " + ", ".join(flat)
            in caption)
    primary = built.tables["primary_estimates"][1]
    marked = primary.filter(pl.col("outcome").is_in(flat) & (pl.col("n") > 1))
    assert marked.height and marked["not_estimable"].str.starts_with("never varied").all()
    assert marked["t_low"].null_count() == marked.height
    assert primary.filter(pl.col("cell") == "share_25")["mde"].drop_nulls().len() > 0
    # The rehearsal's paper names what the freeze would refuse (every cell has a control on
    # its seeds, its mechanism acted, its outcomes vary: none here)
    from market_agents.paper.inputs import not_estimable_note
    from market_agents.protocol.design import load_design
    from market_agents.protocol.facts import design_facts

    assert data.not_estimable == "none"
    facts = design_facts(load_design(project / "config/test/designs/confirmatory.yaml"))
    assert not_estimable_note(facts, data) == "none"
    broken = data.outcomes.with_columns(pl.lit(0.004).alias("mispricing"))
    data.outcomes = broken
    assert "share_25 × mispricing: never varied: 0.004 in every run" in not_estimable_note(
        facts, data)


def test_cli_names_what_is_missing_in_one_line(project, capsys, tmp_path):
    designs = str(project / "config/test/designs")
    code = main(["paper", "--design", "pilot_openai", "--designs-dir", designs,
                 "--results", str(tmp_path), "--out", str(tmp_path / "p"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "outcomes.parquet does not exist: run the design first" in err
    assert "make paper DESIGN=rehearse_pilot_openai" in err
    assert not (tmp_path / "p").exists()
    assert main(["paper", "--design", "nope", "--designs-dir", designs]) == 2
    assert "DESIGN=nope: no " in capsys.readouterr().err


def test_help_lists_every_file(capsys):
    with pytest.raises(SystemExit, match="0"):
        main(["paper", "--help"])
    out = capsys.readouterr().out
    for a in ARTIFACTS:
        assert a.title in out
    assert "model_cards.md" in out and "index.html" in out and "rehearse_<design>" in out


def test_the_paper_states_the_code_fingerprint_of_its_runs(project, exploratory, tmp_path):
    """Issue 34: a result names the code that made it. The index page, every table's caption
    (CSV, Markdown, LaTeX, HTML) and paper.json state the fingerprint the runs' manifests
    record; runs of two engines make no paper."""
    import json

    from market_agents.errors import ConfigError
    from market_agents.sim.fingerprint import fingerprint, short

    summary, out = exploratory
    code = fingerprint()  # the fixture's runs were made by this code
    run = project / "results/runs/exploratory/share_25/seed0001"
    assert json.loads((run / MANIFEST_FILE).read_text())["code_fingerprint"] == code
    assert summary["code_fingerprint"] == code
    assert (f"Built from runs made by code fingerprint <code>{short(code)}</code>"
            in (out / "index.html").read_text())
    stated = f"Runs made by code {short(code)}."
    for t in summary["tables"]:
        assert (out / "tables" / f"{t}.csv").read_text().splitlines()[1].endswith(stated), t
        for ext in ("md", "tex", "html"):
            assert stated in (out / "tables" / f"{t}.{ext}").read_text(), (t, ext)
    other = tmp_path / "project"
    shutil.copytree(project / "config", other / "config")
    shutil.copytree(project / "results", other / "results")
    manifest = other / "results/runs/exploratory/share_0/seed0002" / MANIFEST_FILE
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()),
                                    "code_fingerprint": "0" * 64}))
    with pytest.raises(ConfigError, match=r"made by 2 versions of the engine: .*"
                                          rf"{short(code)}.*0000000000000000 \(.*seed0002\)"):
        make_paper("exploratory", other / "paper", other / "config/test/designs", ROLES,
                   other / "results", progress=False)

"""The run contract end to end: declarations (refused when missing, uncommitted or edited by
hand), a declared run's results with a provenance `ma verify` accepts, a changed byte named by
`ma verify`, and `make run RUN_ID=<each step> MODE=sanity` on the mock, never touching the live
roots."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from market_agents.pipeline import evaluation
from market_agents.pipeline.contract import (
    LIVE_ROOTS,
    STEPS,
    check_order,
    check_staged,
    live_roots,
    load_run_spec,
    sanity_failure,
)
from market_agents.sim.rundir import CHECKLIST_FIELDS
from tests.support import ROOT
from tests.support.contract import commit, ma, make, project, py, run_git

# A full run cheap enough for a test: the tiny exploratory design (4 runs on the mock).
TINY = """run_id: tiny
step: exploratory
target: exploratory
designs: [exploratory]
tasks: [cell_means, effects_vs_control]
modes:
  full: {configfile: config/test/workflow.yaml}
"""


def _lines(done) -> list[str]:
    return done.stdout.strip().splitlines()


@pytest.mark.slow(38)
def test_a_declared_run_writes_results_that_verify_and_every_refusal(tmp_path):
    root = project(tmp_path / "p", git=True)
    (root / "config/run/tiny.yaml").write_text(TINY)
    (root / ".research/record.json").write_text('{"runs": []}\n')
    commit(root, "a tiny run config and an empty record")

    # Undeclared: refused before anything runs, naming the run, the file and what to do.
    refused = py(root, "src.main", "--run-id", "tiny", "--mode", "full")
    assert refused.returncode == 2
    assert ("run 'tiny' is not declared: run `ma record declare tiny --stage full --claim "
            "\"…\"`, commit the record in .research/record.json") in refused.stderr
    assert not (root / ".research/results").exists() and not (root / "results").exists()

    declared = ma(root, "record", "declare", "tiny", "--claim", "E0: the contract works")
    assert declared.returncode == 0, declared.stderr
    uncommitted = py(root, "src.main", "--run-id", "tiny", "--mode", "full")
    assert uncommitted.returncode == 2 and "is declared but not committed" in uncommitted.stderr
    commit(root, "declare tiny")
    twice = ma(root, "record", "declare", "tiny", "--claim", "again")
    assert twice.returncode == 2 and "run 'tiny' is declared already" in twice.stderr
    wrong_stage = py(root, "src.main", "--run-id", "tiny", "--mode", "pilot")
    assert wrong_stage.returncode == 2 and "declared in" in wrong_stage.stderr
    assert "for stage 'full', not 'pilot'" in wrong_stage.stderr

    done = make(root, "run", "RUN_ID=tiny", "MODE=full", EXECUTION_ID="ci-4711")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    out = root / ".research/results/tiny"
    assert sorted(p.name for p in out.iterdir()) == [
        "eval_inputs", "evaluation.md", "metrics.json", "run.json"]
    assert pl.read_parquet(out / "eval_inputs/exploratory.parquet").height == 4
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["tasks"] == ["cell_means", "effects_vs_control"]
    assert metrics["inputs"]["exploratory"]["cell_means"]["share_25"]["n_runs"] == 2
    report = (out / "evaluation.md").read_text()
    assert "# Evaluation of tiny (full)" in report and "effects_vs_control" in report
    prov = json.loads((root / ".research/results/.provenance.json").read_text())["tiny"]
    head = run_git(root, "rev-parse", "HEAD").strip()
    assert prov["execution_id"] == "ci-4711" and prov["commit_hash"] == head
    assert set(prov["files"]) == {"eval_inputs/exploratory.parquet", "evaluation.md",
                                  "metrics.json", "run.json"}

    ok = ma(root, "verify", "tiny")
    assert ok.returncode == 0, ok.stdout
    assert all(line.startswith("ok") for line in _lines(ok)[:-1])
    assert _lines(ok)[-1] == f"{len(_lines(ok)) - 1} of {len(_lines(ok)) - 1} checks passed"

    # A byte changed in eval_inputs/ or metrics.json: `ma verify` fails naming the file.
    for name in ("eval_inputs/exploratory.parquet", "metrics.json"):
        path = out / name
        original = path.read_bytes()
        i = original.index(b"share_25") if name.endswith(".parquet") else original.index(b"2")
        path.write_bytes(original[:i] + bytes([original[i] ^ 1]) + original[i + 1:])
        bad = ma(root, "verify", "tiny")
        assert bad.returncode == 1
        rel = out.relative_to(root)
        assert f"FAIL {rel / name}: sha256 differs from the provenance" in bad.stdout
        if name == "metrics.json":
            assert (f"FAIL {rel / name}: differs from the metrics re-derived from "
                    f"{rel / 'eval_inputs'}") in bad.stdout
        path.write_bytes(original)
    assert ma(root, "verify").returncode == 0

    # A hand-edited record: the next command refuses, and so does the next run and verify.
    record = root / ".research/record.json"
    text = record.read_text()
    record.write_text(text.replace("E0: the contract works", "E0: something else"))
    for done in (ma(root, "record", "declare", "sigma", "--claim", "x"),
                 py(root, "src.main", "--run-id", "tiny", "--mode", "full")):
        assert done.returncode == 2
        assert "entry 1 (run_id 'tiny') was edited by hand" in done.stderr
    edited = ma(root, "verify", "tiny")
    assert edited.returncode == 1 and "was edited by hand" in edited.stdout
    # Dropped, with a well-formed empty record: the committed record is not a prefix of it.
    record.write_text('{"runs": []}\n')
    dropped = ma(root, "record", "show")
    assert dropped.returncode == 2 and "rewritten or dropped" in dropped.stderr
    record.write_text(text)

    # The run config changed since its declaration: refused.
    spec = root / "config/run/tiny.yaml"
    spec.write_text(TINY.replace("tasks: [cell_means, effects_vs_control]", "tasks: [cell_means]"))
    commit(root, "change tiny")
    changed = py(root, "src.main", "--run-id", "tiny", "--mode", "full")
    assert changed.returncode == 2 and "its config_hash differ" in changed.stderr


def test_a_run_needs_the_files_it_names_from_earlier_runs(tmp_path):
    root = project(tmp_path / "p")
    spec = load_run_spec("tier_T2", root)
    with pytest.raises(Exception, match=r"run 'tier_T2' needs results/manifests/freeze\.json "
                                        r"from run 'freeze' and .* does not exist: run `make "
                                        r"run RUN_ID=freeze MODE=full` first"):
        check_staged(spec, root)
    for staged in spec.inputs_from_runs:
        for f in staged.files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).touch()
    check_staged(spec, root)
    bad = spec.model_copy(update={"step": "T1"})  # reads from tier_T1, which is not earlier
    with pytest.raises(Exception, match="names 'tier_T1' .* does not come before step T1"):
        check_order(bad, root)


def test_every_step_has_a_run_config_that_reads_only_earlier_runs():
    steps = {}
    for path in sorted((ROOT / "config/run").glob("*.yaml")):
        spec = load_run_spec(path.stem, ROOT)
        steps.setdefault(spec.step, spec.run_id)
        check_order(spec, ROOT)
        assert spec.mode("sanity").configfile == "config/test/workflow.yaml"
    assert sorted(steps, key=STEPS.index) == list(STEPS)


def test_the_task_types_listed_are_the_ones_implemented():
    assert list(evaluation.task_types(ROOT)) == list(evaluation.TASKS)
    for t in evaluation.task_types(ROOT).values():
        assert t["input"] == evaluation.TASKS[t["name"]][0] and t["description"]


def test_sanity_failure_names_a_file_written_under_the_live_roots(tmp_path):
    out = tmp_path / "results/sanity/x"
    out.mkdir(parents=True)
    (tmp_path / "results/cache").mkdir(parents=True)
    (out / "live_roots.json").write_text(json.dumps(live_roots(tmp_path)))
    assert sanity_failure(out, {"inputs": {"a": {"runs": 3}}}, tmp_path) is None
    assert sanity_failure(out, {"inputs": {"a": {"runs": 0}}}, tmp_path) == (
        "eval input a has no runs")
    (tmp_path / "results/cache/d.sqlite").write_bytes(b"x")
    assert sanity_failure(out, {"inputs": {}}, tmp_path) == (
        "wrote under the live roots: results/cache/d.sqlite")


def test_unknown_run_id_lists_the_runs(tmp_path):
    root = project(tmp_path / "p")
    done = py(root, "src.main", "--run-id", "nosuch")
    assert done.returncode == 2
    assert "RUN_ID='nosuch': no " in done.stderr
    assert "(runs: exploratory_mock, freeze," in done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("SANITY_VALIDATION: FAIL reason=RUN_ID")


# --- every step's sanity run, once, in one project whose live roots hold sentinels -----------

SANITY = ["exploratory_mock", "sigma", "pilot_openai", "repilot", "freeze", "tier_T1",
          "tier_T2", "tier_T3", "tier_T4", "tier_T5", "tier_T6"]


@pytest.fixture(scope="module")
def sanity(tmp_path_factory):
    root = project(tmp_path_factory.mktemp("sanity") / "p")
    for name in LIVE_ROOTS:  # a live result of each kind that sanity runs must leave alone
        (root / name / "sentinel").mkdir(parents=True, exist_ok=True)
        (root / name / "sentinel" / "keep.json").write_text("{}\n")
    before = live_roots(root)
    done = {run: make(root, "run", f"RUN_ID={run}", "MODE=sanity") for run in SANITY}
    return root, before, done


@pytest.mark.parametrize("run", SANITY)
@pytest.mark.slow(220)
def test_make_run_sanity_works_for_every_step(sanity, run):
    root, _, done = sanity
    result = done[run]
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert _lines(result)[-1] == "SANITY_VALIDATION: PASS"
    assert sum(line.startswith("SANITY_VALIDATION") for line in _lines(result)) == 1
    out = root / "results/sanity" / run
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["inputs"] and all(e.get("runs", 1) > 0 for e in metrics["inputs"].values())
    assert (out / "evaluation.md").exists() and list((out / "eval_inputs").iterdir())


def test_no_sanity_run_wrote_under_the_live_roots(sanity):
    root, before, _ = sanity
    assert live_roots(root) == before
    assert not (root / ".research/results").exists()


@pytest.mark.slow(80)
def test_paper_sanity_builds_the_rehearsed_paper(sanity):
    root, _, _ = sanity
    done = make(root, "run", "RUN_ID=paper", "MODE=sanity")
    assert _lines(done)[-1] == "SANITY_VALIDATION: PASS", (done.stdout + done.stderr)[-3000:]
    assert (root / "results/sanity/paper/eval_inputs/paper.json").exists()


def test_the_t5_cap_in_a_rehearsal_is_the_rehearsed_pilots_mean_share_25_spend(sanity):
    root, _, _ = sanity
    work = root / "results/sanity/tier_T5/work/results/rehearsal"
    pilot = pl.read_parquet(work / "pilot_openai/outcomes.parquet")
    measured = pilot.filter(pl.col("cell") == "share_25")["llm_usd"].mean()
    freeze = json.loads((work / "manifests/freeze.json").read_text())
    cap = freeze["equal_usd"]["share_25"]["usd_cap"]
    assert cap == measured and cap > 0
    assert freeze["fundamentals_check"]["confirmed"]
    import yaml

    config = yaml.safe_load((work / "confirmatory/mini_25_equalusd/seed0101/config.yaml")
                            .read_text())
    assert config["population"]["llm"]["usd_cap"] == cap
    manifest = json.loads((work / "confirmatory/mini_25_equalusd/seed0101/manifest.json")
                          .read_text())
    assert 0 < manifest["llm_usage"]["usd"] <= cap  # decisions stopped at equal USD


def test_every_manifest_of_the_rehearsed_confirmatory_design_has_the_seven_fields(sanity):
    root, _, _ = sanity
    manifests = sorted(root.glob("results/sanity/tier_T*/work/results/rehearsal/confirmatory/"
                                 "*/seed*/manifest.json"))
    cells = {m.parent.parent.name for m in manifests}
    assert {"share_0", "share_25", "share_50", "mix_25", "share_10", "memory_25",
            "mini_25_equalusd", "auction_25"} <= cells
    for path in manifests:
        m = json.loads(path.read_text())
        assert set(CHECKLIST_FIELDS) <= set(m), path
        if path.parent.parent.name == "share_0":
            assert m["prompt_version"] is None and m["llm_usage"]["usd"] == 0
            assert m["price_assumptions"]["price_table"]["date"]


def test_the_sigma_table_holds_the_control_sd_of_every_outcome(sanity):
    root, _, _ = sanity
    work = root / "results/sanity/sigma/work/results/runs/sigma"
    table = pl.read_parquet(work / "control_sd.parquet")
    outcomes = pl.read_parquet(work / "outcomes.parquet")
    vol = table.filter(pl.col("outcome") == "volatility").row(0, named=True)
    assert vol["n"] == 3 and vol["sd"] == pytest.approx(outcomes["volatility"].std())
    assert {"volatility", "mispricing", "turnover"} <= set(table["outcome"])


@pytest.mark.slow(18)
def test_a_fresh_sanity_run_starts_afresh(sanity, tmp_path):
    root, _, _ = sanity
    stale = root / "results/sanity/exploratory_mock/stale.txt"
    stale.write_text("x")
    again = make(root, "run", "RUN_ID=exploratory_mock", "MODE=sanity")
    assert _lines(again)[-1] == "SANITY_VALIDATION: PASS" and not stale.exists()
    shutil.rmtree(root / "results/sanity/exploratory_mock/work")


def _commit_step() -> list[str]:
    """The commit step of docs/contract.md, as the user types it."""
    text = (ROOT / "docs/contract.md").read_text()
    section = text.split("## Committing the results", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.slow(21)
def test_results_are_addable_and_the_documented_commit_step_commits_them(tmp_path):
    """Issue 27: `.gitignore`'s `results/` also matched `.research/results/`, so `git add
    .research` left the results out without a word; run.json named the checkout's path."""
    import subprocess

    root = project(tmp_path / "p", git=True)  # with the repository's .gitignore
    (root / "config/run/tiny.yaml").write_text(TINY)
    (root / ".research/record.json").write_text('{"runs": []}\n')
    commit(root, "a tiny run config and an empty record")
    assert ma(root, "record", "declare", "tiny", "--claim", "E0: results commit").returncode == 0
    ran_at = commit(root, "declare tiny")
    done = make(root, "run", "RUN_ID=tiny", "MODE=full")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]

    status = run_git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    results = sorted(line[3:] for line in status if ".research/results" in line)
    assert results == [".research/results/.provenance.json",
                       ".research/results/tiny/eval_inputs/exploratory.parquet",
                       ".research/results/tiny/evaluation.md",
                       ".research/results/tiny/metrics.json",
                       ".research/results/tiny/run.json"]
    assert all(line.startswith("?? ") for line in status if ".research/results" in line)
    for path in (root / ".research/results").rglob("*"):
        if path.suffix in (".json", ".md"):
            text = path.read_text()
            assert str(root) not in text and str(ROOT) not in text, path
    run = json.loads((root / ".research/results/tiny/run.json").read_text())
    assert run["command"][:2] == ["-s", "Snakefile"]

    for line in _commit_step():
        step = subprocess.run(["bash", "-c", line.replace("<run_id>", "tiny")], cwd=root,
                              capture_output=True, text=True, timeout=300,
                              env={**__import__("os").environ, "GIT_AUTHOR_NAME": "t",
                                   "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                   "GIT_COMMITTER_EMAIL": "t@t"})
        assert step.returncode == 0, (line, step.stdout[-2000:], step.stderr[-2000:])
    committed = run_git(root, "ls-files", ".research/results").split()
    assert sorted(committed) == results
    assert run_git(root, "status", "--porcelain").strip() == ""
    assert run_git(root, "rev-parse", "HEAD~1").strip() == ran_at


@pytest.mark.slow(37)
def test_every_execution_of_a_run_id_is_kept_and_the_reported_one_verifies(tmp_path):
    """Issue 37: a run id executed twice kept only the second (`make run` replaced the results
    directory and its provenance entry). Both are kept; the second says the first exists and
    which is reported; `ma verify` checks the reported one and the bytes of both."""
    root = project(tmp_path / "p", git=True)
    (root / "config/run/tiny.yaml").write_text(TINY)
    (root / ".research/record.json").write_text('{"runs": []}\n')
    commit(root, "a tiny run config and an empty record")
    assert ma(root, "record", "declare", "tiny", "--claim", "E0").returncode == 0
    commit(root, "declare tiny")
    out = root / ".research/results/tiny"

    first = make(root, "run", "RUN_ID=tiny", "MODE=full", EXECUTION_ID="ci-1")
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    assert "is the one reported" not in first.stdout  # executed once: nothing to say
    metrics = (out / "metrics.json").read_bytes()
    second = make(root, "run", "RUN_ID=tiny", "MODE=full", EXECUTION_ID="ci-2")
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]
    said = [ln for ln in second.stdout.splitlines() if "is the one reported" in ln]
    assert said and all("this execution, ci-2, is the one reported" in ln and
                        "1 other execution(s) of tiny are kept: ci-1 (commit" in ln and
                        "executions/ci-1/" in ln for ln in said), second.stdout

    kept = out / "executions/ci-1"
    assert sorted(p.name for p in kept.iterdir()) == [
        "eval_inputs", "evaluation.md", "metrics.json", "run.json"]
    assert (kept / "metrics.json").read_bytes() == metrics  # moved whole, not rewritten
    assert json.loads((kept / "run.json").read_text())["execution_id"] == "ci-1"
    assert json.loads((out / "run.json").read_text())["execution_id"] == "ci-2"
    prov = json.loads((root / ".research/results/.provenance.json").read_text())["tiny"]
    assert prov["execution_id"] == "ci-2"
    assert [e["execution_id"] for e in prov["other_executions"]] == ["ci-1"]
    assert "executions/ci-1/metrics.json" in prov["files"]

    ok = ma(root, "verify", "tiny")
    assert ok.returncode == 0, ok.stdout
    assert "ok   tiny: reports execution ci-2; 1 other execution(s) kept under executions/: " \
           "ci-1" in ok.stdout, ok.stdout
    # a byte changed in the execution kept aside is named too
    path = kept / "metrics.json"
    path.write_bytes(metrics.replace(b"2", b"3", 1))
    bad = ma(root, "verify", "tiny")
    assert bad.returncode == 1
    assert (f"FAIL {path.relative_to(root)}: sha256 differs from the provenance"
            in bad.stdout), bad.stdout

"""The Snakefile end to end on the tiny test designs: a free design runs and then has nothing to
do, dry runs count live jobs without calling anything, bad input gets a clear message."""

import importlib.util
import json
import re
import shutil
import subprocess

import polars as pl
import pytest

from market_agents.testing.fakeserver import FakeAPI
from tests.support.workflow import BIN, env, smk


@pytest.mark.slow(11)
def test_exploratory_runs_then_nothing_to_do(workdir, tmp_path):
    first = smk(workdir, "--cores", "2", "exploratory",
                "results/runs/exploratory/sensitivity.parquet")
    assert first.returncode == 0, first.stderr[-3000:]
    # one process per batch of free runs (`ma cell share_0 share_25 --seed 1 2 --score`: the
    # design's 4 runs, under runs_per_job), and no response cache
    assert re.search(r"^simulate\s+1$", first.stdout + first.stderr, re.M)
    assert not re.search(r"^outcomes\s+\d+$", first.stdout + first.stderr, re.M)
    assert not (workdir / "results/cache").exists()
    table = pl.read_parquet(workdir / "results/runs/exploratory/outcomes.parquet")
    assert sorted(zip(table["cell"], table["seed"], strict=True)) == [
        ("share_0", 1), ("share_0", 2), ("share_25", 1), ("share_25", 2)]
    assert (table.filter(pl.col("cell") == "share_25")["n_llm_decisions"] > 0).all()
    grid = pl.read_parquet(workdir / "results/runs/exploratory/sensitivity.parquet")
    assert grid.height > 0
    # every job's params checked against the stored ones, without importing pandas (0.4 CPU s
    # of each invocation; market_agents.pipeline.workflow.plain_params), unless the SLURM
    # executor plugin is installed (`make setup EXTRAS=--all-extras`): Snakemake imports it, and
    # it imports pandas
    second = smk(workdir, "--cores", "2", "exploratory", PYTHONPROFILEIMPORTTIME="1")
    assert second.returncode == 0
    assert "Nothing to be done" in second.stdout + second.stderr
    assert re.search(r"\| +snakemake\.dag$", second.stderr, re.M)  # the imports are listed
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        assert not re.search(r"\| +pandas$", second.stderr, re.M)
    # `ma design` on the same design: the same outcomes.parquet, byte for byte
    other = tmp_path / "design"
    shutil.copytree(workdir / "config", other / "config")
    done = subprocess.run([str(BIN / "ma"), "design", "config/test/designs/exploratory.yaml",
                           "--workers", "2", "--quiet"], cwd=other, env=env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    gathered = "results/runs/exploratory/outcomes.parquet"
    assert pl.read_parquet(other / gathered).equals(table)
    assert (other / gathered).read_bytes() == (workdir / gathered).read_bytes()


RUNS = "results/runs/exploratory"


def _records(workdir, cell=None):
    """The batch records of the test exploratory design, of one cell's runs when named."""
    records = sorted((workdir / RUNS).glob("runs_*.json"))
    return [p.name for p in records
            if cell is None or json.loads(p.read_text())["config_hash"].keys() == {cell}]


@pytest.mark.slow(21)
def test_free_runs_resume_and_no_record_outlives_its_runs(workdir):
    """A batch's record (runs_<first>-<last>_<key>.json) is the workflow's only mark that its
    free runs are made: a stopped batch resumes, a run deleted under its record is made again,
    and a changed cell is run again, also when .snakemake no longer remembers the old params
    and another batch size made its runs in between."""
    def run(*args, ok=True):
        done = smk(workdir, "--cores", "2", "exploratory", *args)
        assert (done.returncode == 0) == ok, done.stderr[-3000:]
        found = re.search(r"^simulate\s+(\d+)$", done.stdout + done.stderr, re.M)
        return int(found.group(1)) if found else 0  # batches run

    two = ("--config", "runs_per_job=2")  # one cell (2 seeds) a batch
    assert run(*two) == 2
    table = pl.read_parquet(workdir / RUNS / "outcomes.parquet")
    [record] = _records(workdir, "share_25")
    assert record.startswith("runs_0001-0002_") and len(_records(workdir)) == 2
    # share_25's batch stopped after its first run (no record, nothing gathered yet), and a
    # run of share_0 deleted by hand under its record: the batch resumes, keeping its first
    # run, and the deleted run's record is void, so its batch is made again too (issue 27:
    # before, the gather stopped naming it and only the next command made it)
    shutil.rmtree(workdir / RUNS / "share_25/seed0002")
    (workdir / RUNS / record).unlink()
    shutil.rmtree(workdir / RUNS / "share_0/seed0002")
    (workdir / RUNS / "outcomes.parquet").unlink()
    kept = (workdir / RUNS / "share_25/seed0001/manifest.json").stat().st_mtime_ns
    assert run(*two) == 2
    log = (workdir / "results/logs/simulate/runs/exploratory" / record.replace(
        ".json", ".log")).read_text().split()
    # a run made says what its LLM traders did after a colon (ma cell's line, issue 37)
    assert [w.rstrip(":") for w in log[:4]] == ["reused", f"{RUNS}/share_25/seed0001", "ran",
                                               f"{RUNS}/share_25/seed0002"]
    assert (workdir / RUNS / "share_25/seed0001/manifest.json").stat().st_mtime_ns == kept
    assert pl.read_parquet(workdir / RUNS / "outcomes.parquet").equals(table)
    # a changed cell asks for new records: its batches run again and replace its stale runs
    # (they paid nothing), here one run a batch; the other cell's runs are kept
    design = workdir / "config/test/designs/exploratory.yaml"
    text = design.read_text()
    design.write_text(text.replace("population.llm_share: 0.25", "population.llm_share: 0.3"))
    assert run("--config", "runs_per_job=1") == 4  # share_0's two reuse their runs
    changed = pl.read_parquet(workdir / RUNS / "outcomes.parquet")
    assert changed.filter(pl.col("cell") == "share_25")["llm_share"].to_list() == [0.3, 0.3]
    assert changed.filter(pl.col("cell") == "share_0").equals(
        table.filter(pl.col("cell") == "share_0"))
    assert record not in _records(workdir)  # it named the replaced runs
    # restored, with the first batch size and without .snakemake's records (as after `make
    # clean`): the first record is asked for again, and its batch runs again
    shutil.rmtree(workdir / ".snakemake")
    design.write_text(text)
    assert run(*two) == 1
    assert pl.read_parquet(workdir / RUNS / "outcomes.parquet").equals(table)
    assert record in _records(workdir, "share_25")
    # the default batch size: both cells in one job, which keeps every run
    assert run() == 1
    alone = {*_records(workdir, "share_0"), *_records(workdir, "share_25")}
    [both] = set(_records(workdir)) - alone
    log = (workdir / "results/logs/simulate/runs/exploratory" / both.replace(".json", ".log"))
    assert log.read_text().count("reused ") == 4
    assert pl.read_parquet(workdir / RUNS / "outcomes.parquet").equals(table)


@pytest.mark.slow(5)
def test_dry_run_tier_t1_counts_live_jobs_and_decisions_without_calls(workdir):
    with FakeAPI() as api:
        done = smk(workdir, "-n", "tier_T1", test_config=False,
                   OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        assert api.requests == []
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert re.search(r"^simulate_live\s+20$", out, re.M)
    assert re.search(r"^simulate\s+3$", out, re.M)  # share_0, seeds 101-130, 12 a process
    assert "budget gate confirmatory/T1: 20 live runs, 20,250 planned decisions" in out
    # issue 27: the dry run says what the real run hits first
    assert re.search(r"budget gate confirmatory/T1: .*; results/manifests/freeze\.json does not "
                     r"exist yet: the gate refuses these runs until the pilot is reviewed and "
                     r"the freeze made \(\.venv/bin/snakemake freeze\)$", out, re.M)
    assert not (workdir / "results").exists()
    nokey = smk(workdir, "-n", "tier_T1", test_config=False)
    assert nokey.returncode == 0
    assert "WARNING: population.llm.provider_mix.openai: OPENAI_API_KEY is not set" in (
        nokey.stdout + nokey.stderr)


@pytest.mark.slow(4)
def test_budget_gate_refuses_over_project_cap_before_any_request(workdir):
    with FakeAPI() as api:
        done = smk(workdir, "--cores", "2", "results/runs/live/outcomes.parquet",
                   "--config", "project_cap_usd=0.01",
                   OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        assert api.requests == []
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert ("refused: plan 0.0375 USD + spent 0.00 USD = 0.0375 USD exceeds the project cap "
            "0.0100 USD") in out
    assert not (workdir / "results/runs/live/share_25").exists()


@pytest.mark.slow(4)
def test_missing_key_for_a_live_design_says_what_to_do(workdir):
    with FakeAPI() as api:
        done = smk(workdir, "--cores", "1", "results/runs/live/outcomes.parquet",
                   OPENAI_BASE_URL=f"{api.url}/v1")
        assert api.requests == []
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "OPENAI_API_KEY is not set; put it in .env" in out
    assert "`.venv/bin/snakemake rehearse_<tier>`" in out


@pytest.mark.slow(4)
def test_confirmatory_gate_refuses_without_freeze(workdir):
    done = smk(workdir, "--cores", "1", "results/manifests/budget/confirmatory_T1.json",
               OPENAI_API_KEY="sk-test")
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "freeze.json does not exist: confirmatory live runs need a freeze" in out


@pytest.mark.slow(5)
def test_unknown_target_and_design_are_named(workdir):
    done = smk(workdir, "-n", "tier_T9")
    assert done.returncode != 0
    assert "unknown target 'tier_T9'" in done.stdout + done.stderr
    done = smk(workdir, "-n", "results/runs/nosuch/outcomes.parquet")
    assert done.returncode != 0
    assert "unknown design 'nosuch': no config/test/designs/nosuch.yaml" in (
        done.stdout + done.stderr)


def test_config_failing_the_schema_names_the_key(workdir):
    done = smk(workdir, "-n", "exploratory", "--config", "tokens_in=-5", "bogus=1")
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "tokens_in: Input should be greater than or equal to 1" in out
    assert "bogus: Extra inputs are not permitted" in out
    assert "workflow/schemas/config.schema.json" in out


@pytest.mark.slow(16)
def test_dag_renders_svg_and_mermaid(workdir):
    done = smk(workdir, "--cores", "1", "dag", test_config=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    svg = (workdir / "results/dag/protocol.svg").read_text()
    assert svg.lstrip().startswith(("<svg", "<?xml")) and "simulate_live" in svg
    assert "gate" in svg and "freeze" in svg
    mmd = (workdir / "results/dag/protocol.mmd").read_text()
    assert mmd.startswith("flowchart TB") and "-->" in mmd
    # issue 27: drawn in protocol order, the freeze above the confirmatory gate and runs
    # (before, one rule graph put it near the bottom, after the runs it must precede)
    from market_agents.pipeline.dagrender import _layers, parse_dot

    nodes, edges = parse_dot((workdir / "results/dag/protocol.dot").read_text())
    layer = {label: _layers(nodes, edges)[n] for n, label in nodes.items()}
    assert layer["pilot_manifest"] < layer["freeze"] < layer["gate (confirmatory)"] < layer[
        "simulate_live (confirmatory)"] < layer["gather (confirmatory)"]
    assert layer["gate"] < layer["simulate_live"] < layer["pilot_manifest"]


@pytest.mark.slow(40)
def test_bazaar_targets_run_on_the_mock(workdir):
    done = smk(workdir, "--cores", "2", "bazaar")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert (workdir / "results/bazaar/anchors/anchors.parquet").stat().st_size > 0
    summary = workdir / "results/bazaar/eval/mock/mock-trader/micro/summary.json"
    assert summary.exists() and (workdir / "results/bazaar/exploits/exploits_micro.json").exists()


@pytest.mark.slow(14)
def test_runs_made_by_ma_design_are_reused(workdir):
    done = subprocess.run([str(BIN / "ma"), "design", "config/test/designs/exploratory.yaml",
                           "--workers", "2", "--quiet"], cwd=workdir, env=env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    dry = smk(workdir, "-n", "exploratory")
    assert "Nothing to be done" in dry.stdout + dry.stderr


@pytest.mark.slow(18)
def test_rehearsal_runs_live_cells_on_the_mock_apart_from_live_results(workdir):
    with FakeAPI() as api:
        done = smk(workdir, "--cores", "2", "rehearse_pilot",
                   OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        assert api.requests == []
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    table = pl.read_parquet(workdir / "results/rehearsal/pilot_openai/outcomes.parquet")
    assert table.filter(pl.col("cell") == "share_25")["n_llm_decisions"].min() > 0
    assert (workdir / "results/rehearsal/cache/pilot_openai.sqlite").exists()
    assert not (workdir / "results/runs").exists() and not (workdir / "results/cache").exists()
    assert not (workdir / "results/manifests/budget").exists()  # no gate for the mock
    # its 6 runs, the live cell's among them, are one job (one process), as free runs are
    out = done.stdout + done.stderr
    assert re.search(r"^simulate\s+1$", out, re.M) and "rehearse " not in out, out[-3000:]
    rehearsal = workdir / "results/rehearsal/pilot_openai"
    assert len(list(rehearsal.glob("runs_0001-0003_*.json"))) == 1
    # a rehearsed run deleted under its record is made again, as a free run is
    shutil.rmtree(rehearsal / "share_25/seed0002")
    again = smk(workdir, "--cores", "2", "rehearse_pilot")
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert re.search(r"^market_agents: results/rehearsal/pilot_openai/share_25/seed0002 is "
                     r"gone or changed", out, re.M), out[-3000:]
    # the same run again, its answers now served from the rehearsal's cache
    remade = pl.read_parquet(rehearsal / "outcomes.parquet")
    assert remade.drop("llm_cached_hits").equals(table.drop("llm_cached_hits"))
    assert remade.filter((pl.col("cell") == "share_25") & (pl.col("seed") == 2))[
        "llm_cached_hits"].to_list() == [1.0]


@pytest.mark.slow(16)
def test_library_cell_waits_for_its_library_live_and_rehearsed(workdir):
    live = smk(workdir, "-n", "tier_T6", test_config=False)
    out = live.stdout + live.stderr
    assert live.returncode == 0, out[-3000:]
    assert re.search(r"^library\s+1$", out, re.M)  # built from T1's cache, before T6 runs
    rehearsed = smk(workdir, "-n", "rehearse_T6", test_config=False)
    out = rehearsed.stdout + rehearsed.stderr
    assert rehearsed.returncode == 0, out[-3000:]
    assert re.search(r"^rehearse_library\s+1$", out, re.M)
    assert not re.search(r"^library\s+\d+$", out, re.M)  # a rehearsal never starts live work
    assert "results/rehearsal/library/nano_v1.npz" in out


@pytest.mark.slow(45)
def test_a_deleted_free_run_is_made_again_though_its_gather_is_newer(workdir):
    """Issue 27: after `rm -r .../share_0/seed0002` the target said "Nothing to be done" and
    outcomes.parquet still reported seed 2, since the batch record was the only output
    Snakemake knew. The record is now checked against the runs it vouches for."""
    first = smk(workdir, "--cores", "2", "exploratory")
    assert first.returncode == 0, first.stderr[-3000:]
    table = pl.read_parquet(workdir / RUNS / "outcomes.parquet")
    shutil.rmtree(workdir / RUNS / "share_0/seed0002")
    again = smk(workdir, "--cores", "2", "exploratory")
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-3000:]
    assert "Nothing to be done" not in out
    assert re.search(r"^market_agents: results/runs/exploratory/share_0/seed0002 is gone or "
                     r"changed since results/runs/exploratory/runs_0001-0002_[0-9a-f]{12}"
                     r"\.json vouched for it: its batch is made again$", out, re.M)
    assert re.search(r"^simulate\s+1$", out, re.M) and re.search(r"^gather\s+1$", out, re.M)
    assert (workdir / RUNS / "share_0/seed0002/outcomes.json").exists()
    assert pl.read_parquet(workdir / RUNS / "outcomes.parquet").equals(table)
    # an outcomes.json changed by hand voids its record the same way
    (workdir / RUNS / "share_25/seed0001/outcomes.json").write_text("{}")
    third = smk(workdir, "--cores", "2", "exploratory")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "share_25/seed0001 is gone or changed" in third.stdout + third.stderr
    assert pl.read_parquet(workdir / RUNS / "outcomes.parquet").equals(table)
    fourth = smk(workdir, "--cores", "2", "exploratory")
    assert "Nothing to be done" in fourth.stdout + fourth.stderr

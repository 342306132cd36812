"""The workflow object the rules call: files, input functions and parameters, without
Snakemake (the Snakefile itself is run end to end in test_snakefile.py)."""

import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import pytest

from market_agents.config import config_hash
from market_agents.errors import ConfigError
from market_agents.pipeline.workflow import Workflow
from market_agents.protocol.batches import batch_key
from market_agents.sim.rundir import OUTCOMES_FILE, RUN_FILES


@pytest.fixture
def wf(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    return Workflow({})  # the protocol's designs, config/designs


def wc(**kw):
    return SimpleNamespace(**kw)


def test_bad_workflow_config_is_named():
    with pytest.raises(ConfigError, match=r"tokens_in: Input should be greater than or equal "
                                          r"to 1 \(got -5\).*config\.schema\.json"):
        Workflow({"tokens_in": -5})


def test_run_outputs_are_the_run_directory_format(wf):
    out = wf.run_outputs("runs")
    assert sorted(p.rsplit("/", 1)[1] for p in out.values()) == sorted(
        [*RUN_FILES, OUTCOMES_FILE])
    assert out["manifest"] == "results/runs/{design}/{cell}/seed{seed}/manifest.json"
    assert wf.run_outputs("{kind}")["ticks"] == (
        "results/{kind}/{design}/{cell}/seed{seed}/ticks.parquet")


def test_gate_paths_are_patterns_and_files(wf):
    assert wf.gate_manifest("{design}", "{tier}") == (
        "results/manifests/budget/{design}_{tier}.json")
    assert wf.spent("confirmatory", "T1") == "results/manifests/budget/confirmatory_T1_spent.json"


def test_a_tier_waits_for_the_earlier_tiers_and_the_library(wf):
    t3 = wf.earlier_spent(wc(design="confirmatory", tier="T3"))
    assert t3 == [wf.spent("confirmatory", "T1"), wf.spent("confirmatory", "T2"),
                  "results/library/nano_v1.npz"]
    assert wf.earlier_spent(wc(design="confirmatory", tier="T1")) == []
    assert wf.tier_target("confirmatory", "T2")[-1] == wf.spent("confirmatory", "T2")
    assert wf.all_spent("confirmatory") == [wf.spent("confirmatory", f"T{i}")
                                            for i in range(1, 7)]


def test_live_constraints_name_only_live_designs_and_cells(wf):
    live = set(wf.live_designs.split("|"))
    assert {"pilot_openai", "confirmatory"} <= live and not {"exploratory", "sigma"} & live
    assert "share_0" not in wf.live_cells.split("|") and "share_25" in wf.live_cells.split("|")


def test_flags_and_params(wf):
    assert wf.freeze_flag(wc(design="confirmatory")) == "--freeze results/manifests/freeze.json"
    assert wf.freeze_flag(wc(design="pilot_openai")) == ""
    assert wf.pilot_cap_flag(wc(design="pilot_openai")) == "--pilot-cap 5.0"
    assert wf.gather_flags(wc(kind="rehearsal")) == "--mock"
    assert Workflow({"max_seeds": 1}).partial_flag(wc()) == "--allow-missing"
    assert wf.cache_file(wc(design="d")) == "results/cache/d.sqlite"
    assert wf.batch_serving(wc(kind="rehearsal", design="d")) == (
        "--mock --cache results/rehearsal/cache/d.sqlite")
    assert wf.batch_serving(wc(kind="runs", design="d")) == ""
    assert wf.bazaar_usd_cap(wc(provider="mock")) == ""
    assert wf.bazaar_api(wc(provider="openai")) == 1


def batch(design, cells, first, last):
    """The record of a batch of free runs, named with its cells' config hashes now."""
    spec = Workflow({}).designs.get(design)
    key = batch_key({c: config_hash(spec.cell_config(c)) for c in cells.split()})[:12]
    return f"results/runs/{design}/runs_{first:04d}-{last:04d}_{key}.json"


def test_max_seeds_shortens_every_target(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    full, small = Workflow({}), Workflow({"max_seeds": 1})
    assert len(full.outcome_files("sigma")) == 3  # free runs: 30 seeds, 12 a job
    assert small.outcome_files("sigma") == [batch("sigma", "share_0", 1, 1)]
    live, fewer = (set(w.outcome_files("pilot_openai")) for w in (full, small))
    assert fewer - live == {batch("pilot_openai", "share_0", 1, 1)}
    assert 0 < len(fewer & live) < len(live) - 1


def test_free_runs_are_one_job_per_batch_and_a_live_run_one_job_each(wf):
    batches = [batch("confirmatory", "share_0", s, s + 9) for s in (101, 111, 121)]
    t1 = wf.outcome_files("confirmatory", "T1")
    assert [f for f in t1 if not f.endswith("/outcomes.json")] == batches  # 30 free runs, 3 jobs
    live = [f for f in t1 if f.endswith("/outcomes.json")]
    assert len(live) == 20 and all(wf.is_live_run("confirmatory", f.split("/")[3]) for f in live)
    key = batches[-1].rsplit("_", 1)[1][:-5]
    last = wc(kind="runs", design="confirmatory", first="0121", last="0130", chash=key)
    assert wf.batch_cells(last) == "share_0"
    assert wf.batch_seeds(last) == " ".join(map(str, range(121, 131)))
    assert wf.batch_record == "results/{kind}/{design}/runs_{first}-{last}_{chash}.json"
    # every later tier is gathered with the control: its batches, once each
    t2 = wf.tier_outcomes(wc(design="confirmatory", tier="T2", kind="runs"))
    assert [f for f in t2 if f in batches] == batches
    # a rehearsal is batched too, its live cells with the rest (the mock pays nothing): T1's
    # 50 rehearsed runs, the control's included, are 5 jobs
    rehearsed = wf.outcome_files("confirmatory", "T1", mock=True)
    plans = wf._batches("confirmatory", mock=True)
    assert len(rehearsed) == 5 and set(rehearsed) <= set(plans)
    assert all(f.startswith("results/rehearsal/confirmatory/runs_") for f in rehearsed)
    assert sorted((c, s) for f in rehearsed for c in plans[f][0] for s in plans[f][1]) == sorted(
        wf.designs.runs("confirmatory", "T1", mock=True))
    # a rehearsed batch replays the rehearsed library or none, and only the equal-USD cells'
    # batches wait for the rehearsal's freeze
    spec = wf.designs.get("confirmatory")
    for record, (cells, _) in plans.items():
        first, last, key = re.match(r".*runs_(\d+)-(\d+)_(\w+)\.json", record).groups()
        job = wc(kind="rehearsal", design="confirmatory", first=first, last=last, chash=key)
        equal = [c for c in cells if spec.cells[c].equal_usd_of]
        assert equal in ([], list(cells))
        assert wf.freeze_input(job) == ([wf.manifest("freeze", mock=True)] if equal else [])
        libraries = {wf.designs.frozen_library("confirmatory", c, mock=True) for c in cells}
        assert wf.library_input(job) == sorted(p for p in libraries if p)
        assert all(p.startswith("results/rehearsal/") for p in wf.library_input(job))
        assert wf.batch_cells(job) == " ".join(cells)
    assert any(wf.library_input(wc(kind="rehearsal", design="confirmatory", first=f, last=t,
                                   chash=k))
               for f, t, k in (re.match(r".*runs_(\d+)-(\d+)_(\w+)\.json", r).groups()
                               for r in plans))
    # the exploratory design (14 cells of 3 seeds): four jobs of 4, 4, 3 and 3 cells, in
    # design order
    design = wf.designs.get("exploratory")
    cells = [c for c in design.cells if not design.cells[c].unavailable]
    assert len(cells) == 14
    groups = [" ".join(cells[a:b]) for a, b in ((0, 4), (4, 8), (8, 11), (11, 14))]
    assert wf.outcome_files("exploratory") == [batch("exploratory", g, 1, 3) for g in groups]
    first = wf.outcome_files("exploratory")[0].rsplit("_", 1)[1][:-5]
    assert wf.batch_cells(wc(kind="runs", design="exploratory", first="0001", last="0003",
                             chash=first)) == groups[0]
    # runs_per_job sets the batches: one run per job, or the whole cell in one
    one = Workflow({"runs_per_job": 1}).outcome_files("sigma")
    assert len(one) == 30 and one[0] == batch("sigma", "share_0", 1, 1)
    assert Workflow({"runs_per_job": 30}).outcome_files("sigma") == [
        batch("sigma", "share_0", 1, 30)]
    assert Workflow({"runs_per_job": 5}).outcome_files("exploratory")[0] == batch(
        "exploratory", cells[0], 1, 3)
    # a batch is of one tier: a tier's target needs no other tier's free runs, so a cell of
    # T6 changed re-makes nothing T1 needs (its reconciled spend, the later gates), also in a
    # small stage where every cell's one seed is the same (the contract's pilot: max_seeds 1)
    spec = wf.designs.get("confirmatory")
    for small in (Workflow({"max_seeds": 1}), Workflow({"runs_per_job": 60})):
        plans = small._batches("confirmatory")
        assert any(len(cells) > 1 for cells, _ in plans.values())
        for tier in ("T1", "T4", "T6"):
            for record in small.outcome_files("confirmatory", tier):
                if record in plans:
                    assert {spec.cells[c].tier for c in plans[record][0]} == {tier}, record
    # a batch never mixes a cell that replays a frozen library with others: the control's runs
    # wait for no library (built from live T1 runs), however large the batches
    big = Workflow({"runs_per_job": 60})
    plans = list(big._batches("confirmatory").values())
    library = [c for c in wf.designs.get("confirmatory").cells
               if wf.designs.frozen_library("confirmatory", c)]
    assert library and any(len(cells) > 1 for cells, _ in plans)
    assert all(set(cells) <= set(library) or not set(cells) & set(library)
               for cells, _ in plans)
    control = next(p for p, (cells, _) in big._batches("confirmatory").items()
                   if "share_0" in cells)
    first, last, key = re.match(r".*runs_(\d+)-(\d+)_(\w+)\.json", control).groups()
    assert big.library_input(wc(kind="runs", design="confirmatory", first=first, last=last,
                                chash=key)) == []
    # a live cell's runs are never made by the free runs' rule (no budget gate there); a batch
    # the design does not have, or has no more (another key), is named with the ones it has
    with pytest.raises(ConfigError, match=r"not a batch of free runs of confirmatory now "
                                          r"\(runs_per_job 12\): runs_0101-0110_"):
        wf.batch_seeds(wc(kind="runs", design="confirmatory", first="0101", last="0110",
                          chash="0" * 12))
    # a paid cell in a design with no live role (budget and planning price given)
    paid = wf.designs.path("exploratory")
    text = paid.read_text().replace("cap_usd: 0.0", "cap_usd: 5.0")
    mock = "provider_mix: {mock: 1.0}\n      population.llm.models: {mock: claude-haiku-5-5}"
    live = ("provider_mix: {anthropic: 1.0}\n      population.llm.models: "
            "{anthropic: claude-haiku-5-5}\n      population.llm.usd_cap: 0.5")
    assert mock in text
    paid.write_text(text.replace(mock, live)
                    + "planning: {usd_per_decision: {claude-haiku-5-5: 0.001}}\n")
    with pytest.raises(ConfigError, match="haiku_25 is a live cell of exploratory"):
        Workflow({}).outcome_files("exploratory")


def test_unknown_target_and_design_are_named(wf):
    with pytest.raises(ConfigError, match="unknown target 'tier_T9'. Targets: all"):
        wf.unknown_target(wc(name="tier_T9"))
    with pytest.raises(ConfigError, match="unknown design 'nosuch'"):
        wf.design_yaml(wc(design="nosuch"))


def test_the_rules_command_runs_without_path(wf):
    done = subprocess.run([*shlex.split(wf.ma), "--help"], capture_output=True, text=True,
                          env={}, timeout=120)
    assert done.returncode == 0 and "usage: ma" in done.stdout


def test_serving_switches_reach_the_jobs_through_the_environment():
    """`--config replay=true` / `new_cache=true` become MARKET_AGENTS_REPLAY / _NEW_CACHE for
    every `ma` job (rule parameters would re-run finished jobs when toggled); off, nothing is
    set, so a switch the user exported stays."""
    from market_agents.llm.cache import NEW_CACHE_ENV, REPLAY_ENV

    environ = {REPLAY_ENV: "1"}
    Workflow({}).export_serving_switches(environ)
    assert environ == {REPLAY_ENV: "1"}
    Workflow({"replay": True, "new_cache": True}).export_serving_switches(environ)
    assert environ == {REPLAY_ENV: "1", NEW_CACHE_ENV: "1"}


def test_the_workflow_passes_its_guard_settings_to_every_job(monkeypatch):
    """rules/common.smk puts guard_env() in the jobs' environment; `ma` reads it back."""
    from market_agents.pipeline.workflow_config import (
        DEFAULTS,
        GUARD_ENV,
        WorkflowConfig,
        guard_settings,
    )

    monkeypatch.delenv(GUARD_ENV, raising=False)
    assert guard_settings() == DEFAULTS
    wf = WorkflowConfig(designs_dir="config/test/designs", confirmatory="main",
                        project_cap_usd=30.0, deviation="after the outage")
    monkeypatch.setenv(GUARD_ENV, wf.guard_env()[GUARD_ENV])
    got = guard_settings()
    assert (got.designs_dir, got.confirmatory, got.project_cap_usd, got.deviation) == (
        "config/test/designs", "main", 30.0, "after the outage")
    monkeypatch.setenv(GUARD_ENV, "{broken")
    with pytest.raises(ConfigError, match=r"\$MARKET_AGENTS_GUARDS: not valid JSON"):
        guard_settings()


def test_batch_records_are_vetted_against_their_runs(wf, tmp_path, capsys):
    import json

    from market_agents.core import sha256_file

    design = tmp_path / "results/runs/d"
    for run in ("c/seed0001", "c/seed0002", "e/seed0001"):
        (design / run).mkdir(parents=True)
        (design / run / OUTCOMES_FILE).write_text(f'{{"{run}": 1}}')
    vouched = {r: sha256_file(design / r / OUTCOMES_FILE) for r in ("c/seed0001", "e/seed0001")}
    good = design / "runs_0001-0001_0123456789ab.json"  # two cells, one seed
    good.write_text(json.dumps({"outcomes_sha256": vouched}))
    other = design / "runs_0002-0002_0123456789ab.json"
    other.write_text(json.dumps({"outcomes_sha256": {"c/seed0002": sha256_file(
        design / "c/seed0002" / OUTCOMES_FILE)}}))
    gathered = design / "outcomes.parquet"
    gathered.write_text("gathered")
    root = tmp_path / "results"
    assert wf.vet_batch_records(root) == [] and good.exists() and gathered.exists()

    unreadable = design / "runs_0003-0003_0123456789ab.json"
    unreadable.write_text("{not json")
    (design / "e/seed0001" / OUTCOMES_FILE).write_text("{}")  # changed by hand
    assert wf.vet_batch_records(root) == [str(design / "e/seed0001"), str(unreadable)]
    assert not good.exists() and not unreadable.exists() and not gathered.exists()
    assert other.exists()  # its run is as it was
    assert not (design / "e/seed0001" / OUTCOMES_FILE).exists()  # scored again by its batch
    assert (design / "c/seed0001" / OUTCOMES_FILE).exists()
    assert f"market_agents: {design / 'e/seed0001'} is gone or changed since {good}" in (
        capsys.readouterr().err)


def test_the_dry_run_line_of_a_confirmatory_gate_says_whether_the_freeze_exists(wf, workdir):
    line = wf.gate_plan(wc(design="confirmatory", tier="T1"))
    assert line.endswith("; results/manifests/freeze.json does not exist yet: the gate refuses "
                         "these runs until the pilot is reviewed and the freeze made "
                         "(.venv/bin/snakemake freeze)")
    assert "freeze" not in wf.gate_plan(wc(design="pilot_openai", tier="pilot"))
    (workdir / "results/manifests").mkdir(parents=True)
    (workdir / "results/manifests/freeze.json").write_text("{}")
    assert "freeze" not in wf.gate_plan(wc(design="confirmatory", tier="T1"))


def test_plain_params_stores_what_snakemake_stored_without_pandas():
    """plain_params: Snakemake's plain serializer for job params gives every value that is no
    DataFrame the text its pandas one gave, and pandas is never imported (fresh processes)."""
    values = [None, 3, 0.5, "x", ["a", 1], {"k": (1, 2)}, b"b", ("t",), {1, 2}]

    def serialized(plain: bool) -> list[str]:
        code = ("import sys; from snakemake.persistence.file import FilePersistence as P\n"
                + ("from market_agents.pipeline.workflow import plain_params; plain_params()\n"
                   if plain else "")
                + f"p = P.__new__(P); print([p._serialize_param(v) for v in {values!r}]); "
                "print('pandas' in sys.modules)\n")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True).stdout.splitlines()

    stored, with_pandas = serialized(plain=False)
    assert with_pandas == "True"  # what Snakemake does where pandas is installed
    assert serialized(plain=True) == [stored, "False"]
    assert stored == repr([repr(v) for v in values])

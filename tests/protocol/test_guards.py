"""The guards on every path to a paid call (docs/guards.md): the freeze refuses a confirmatory
live call without a freeze, with a changed design, a moved HEAD or a dirty tree, on `ma cell`,
`ma design`, `ma run` and the gate, unless a deviation is given (logged once, carried into
every run manifest); the spend ledger refuses any paying command over the project or pilot
cap before a single request reaches the (fake) provider."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market_agents.config import dump_yaml
from market_agents.errors import BudgetExceeded
from market_agents.protocol import ledger
from market_agents.protocol.design import load_design
from market_agents.protocol.facts import design_facts
from market_agents.protocol.freeze import mismatches
from market_agents.testing.fakeserver import FakeAPI
from tests.support import ROOT, inprocess
from tests.support.workflow import BIN, env

DESIGN = "config/test/designs/confirmatory.yaml"
# The workflow on the test designs passes this to its jobs (rules/common.smk): the guards know
# the confirmatory design file of config/test/.
GUARDS = json.dumps({"designs_dir": "config/test/designs"})
NO_FREEZE = "freeze.json does not exist: confirmatory live runs need a freeze"


def _git(project, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=project, capture_output=True, text=True, check=True).stdout.strip()


def _project(path):
    """A project under git: config/ committed, results/ ignored."""
    shutil.copytree(ROOT / "config", path / "config")
    (path / ".gitignore").write_text("results/\n")
    (path / "NOTES.md").write_text("lab notes\n")
    _git(path, "init", "-q")
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "the pre-registered project")
    return path


@pytest.fixture
def project(tmp_path):
    return _project(tmp_path)


@pytest.fixture(scope="session")
def _frozen_once(tmp_path_factory):
    """One project frozen (the sigma design run, then `ma freeze create`) per test process;
    :func:`frozen` hands each test a copy of it."""
    path = _project(tmp_path_factory.mktemp("frozen"))
    return path, _freeze(path)


@pytest.fixture
def frozen(_frozen_once, tmp_path):
    """A copy of the frozen project (git history, results and freeze included) and its
    freeze.json: what _freeze(project) leaves, made once per process."""
    path, record = _frozen_once
    copy = tmp_path / "project"
    shutil.copytree(path, copy, symlinks=True)
    return copy, record


def _ma(project, *args, api=None):
    keys = {"OPENAI_API_KEY": "sk-test", "MARKET_AGENTS_GUARDS": GUARDS}
    if api is not None:
        keys["OPENAI_BASE_URL"] = f"{api.url}/v1"
    return inprocess.ma(args, env(**keys), project)


def _export(project, design, cell, name):
    """A cell's config as a plain config file (what `ma run` takes)."""
    path = project / name
    path.write_text(dump_yaml(load_design(project / design).cell_config(cell)))
    return path.name


def _freeze(project):
    pilot = project / "results/manifests/pilot.json"
    pilot.parent.mkdir(parents=True, exist_ok=True)
    pilot.write_text(json.dumps({
        "pass": True, "criteria": {},
        "sigma_d": {"share_25": {"n_pairs": 3, "volatility": 0.002}},
        "usd_per_run": {"share_25": {"mean_usd": 0.0123, "runs": 3, "models": ["gpt-5.4-nano"]}},
        "tokens_per_decision": {"in": 700.0, "out": 200.0, "reasoning": 50.0}}))
    # the freeze confirms the fundamentals on the sigma runs (issue 13)
    sigma = _ma(project, "design", "config/test/designs/sigma.yaml", "--quiet")
    assert sigma.returncode == 0, sigma.stderr
    done = _ma(project, "freeze", "create", DESIGN)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads((project / "results/manifests/freeze.json").read_text())


def _live_paths(project, api, extra=()):
    """Every path to a confirmatory live call, as `ma` commands (the workflow runs the gate
    and `ma cell`)."""
    config = _export(project, DESIGN, "share_25", "share_25.yaml")
    return {
        "ma cell": _ma(project, "cell", DESIGN, "share_25", "--seed", "101", *extra, api=api),
        "ma design": _ma(project, "design", DESIGN, "--quiet", *extra, api=api),
        "ma run": _ma(project, "run", config, "--seed", "101", "--out", "adhoc", "--quiet",
                      *extra, api=api),
        "gate": _ma(project, "gate", "approve", DESIGN, "--tier", "T1", "--out", "gate.json",
                    *extra, api=api),
    }


def _assert_refused(results, message):
    for path, done in results.items():
        assert done.returncode == 2, (path, done.stderr)
        assert message in done.stderr, (path, done.stderr)
        assert "Traceback" not in done.stderr


@pytest.mark.slow(11)
def test_no_freeze_refuses_every_confirmatory_live_path_and_free_cells_still_run(project):
    with FakeAPI() as api:
        _assert_refused(_live_paths(project, api), NO_FREEZE)
        assert api.requests == []
    assert not (project / "results/runs/confirmatory").exists()
    assert not (project / "adhoc").exists()
    # A free cell of the confirmatory design makes no call: it needs no freeze.
    free = _ma(project, "cell", DESIGN, "share_0", "--seed", "101")
    assert free.returncode == 0, free.stderr


@pytest.mark.slow(14)
def test_a_changed_design_is_refused_naming_the_change(frozen):
    project, frozen = frozen
    assert frozen["git"]["commit"] == _git(project, "rev-parse", "HEAD")
    assert _ma(project, "freeze", "verify", DESIGN).returncode == 0
    design = project / DESIGN
    design.write_text(design.read_text().replace(
        "  - {name: share_50, tier: T2, n_seeds: 2",
        "  - {name: extra_0, tier: T2, n_seeds: 2, overrides: {population.llm_share: 0.0}}\n"
        "  - {name: share_50, tier: T2, n_seeds: 2").replace("usd_cap: 0.5", "usd_cap: 0.4"))
    _git(project, "commit", "-qam", "a cell more, a lower cap")  # a clean tree, HEAD moved
    verify = _ma(project, "freeze", "verify", DESIGN)
    assert verify.returncode == 2
    for change in ("cell extra_0 added (tier T2)", "cell share_25: config_hash changed",
                   "is not the frozen commit"):
        assert change in verify.stderr
    with FakeAPI() as api:
        _assert_refused(_live_paths(project, api), "cell extra_0 added (tier T2)")
        assert api.requests == []


@pytest.mark.slow(9)
def test_a_freeze_pins_a_clean_commit(project):
    (project / "NOTES.md").write_text("uncommitted\n")
    with pytest.raises(AssertionError, match="uncommitted changes to tracked files: commit"):
        _freeze(project)
    assert not (project / "results/manifests/freeze.json").exists()


@pytest.mark.slow(17)
def test_a_moved_head_is_refused(frozen):
    project, frozen = frozen
    (project / "NOTES.md").write_text("lab notes\nafter the freeze\n")
    _git(project, "commit", "-qam", "notes")
    head = _git(project, "rev-parse", "HEAD")
    with FakeAPI() as api:
        _assert_refused(_live_paths(project, api), f"HEAD {head[:12]} is not the frozen commit "
                        f"{frozen['git']['commit'][:12]} (protocol §6: git log -1 matches "
                        "freeze.json)")
        assert api.requests == []
    verify = _ma(project, "freeze", "verify", DESIGN)
    assert verify.returncode == 2 and "is not the frozen commit" in verify.stderr


@pytest.mark.slow(45)
def test_a_dirty_tree_is_refused_and_a_deviation_is_logged_once_and_carried(frozen):
    project, _ = frozen
    (project / "NOTES.md").write_text("lab notes\nuncommitted\n")
    dirty = "the work tree has uncommitted changes to tracked files"
    with FakeAPI() as api:
        _assert_refused(_live_paths(project, api), dirty)
        assert api.requests == []
        reason = ("--deviation", "re-run after the provider outage")
        for seed in ("101", "102"):
            done = _ma(project, "cell", DESIGN, "share_25", "--seed", seed, *reason, api=api)
            assert done.returncode == 0, done.stderr
        config = _export(project, DESIGN, "share_25", "share_25.yaml")
        adhoc = _ma(project, "run", config, "--seed", "101", "--out", "adhoc", "--quiet",
                    *reason, api=api)
        assert adhoc.returncode == 0, adhoc.stderr
        assert api.requests
    log = [json.loads(line) for line in
           (project / "results/manifests/deviations.jsonl").read_text().splitlines()]
    assert len(log) == 1  # one deviation, however many runs carry it
    entry = log[0]
    assert entry["reason"] == "re-run after the provider outage"
    assert entry["design"] == "confirmatory" and entry["date"].endswith("Z")
    assert entry["mismatches"] == [f"{dirty} (git status)"]
    assert entry["git"]["dirty"] is True
    runs = [project / f"results/runs/confirmatory/share_25/seed{s}" for s in ("0101", "0102")]
    for run in [*runs, project / "adhoc"]:
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["deviations"] == [entry]
        assert manifest["freeze"]["holds"] is False
    shown = _ma(project, "deviations")
    assert shown.returncode == 0 and "re-run after the provider outage" in shown.stdout
    assert dirty in shown.stdout
    added = _ma(project, "deviations", "add", "T6 dropped: library not built")
    assert added.returncode == 0, added.stderr
    assert len(_ma(project, "deviations", "--json").stdout.splitlines()) == 2


def test_real_confirmatory_design_changes_are_named(workdir):
    """Issue 11's reproduction on the protocol's design: a cell added to T4 and T5's usd_cap
    lowered passed the old check; each is named now, and so is a changed price. (T5's cap is
    the freeze's equal_usd record since issue 13: the change is a hand-set cap in its place.)"""
    path = workdir / "config/designs/confirmatory.yaml"
    facts = design_facts(load_design(path))
    frozen = {"config_hash": facts["config_hash"], "fingerprint": facts["fingerprint"],
              "git": {"commit": "c" * 40}}
    git = {"commit": "c" * 40, "dirty": False}
    assert mismatches(frozen, facts, git) == []
    path.write_text(path.read_text().replace(
        "  - name: poslimit_25\n",
        "  - {name: extra_0, tier: T4, n_seeds: 3, overrides: {population.llm_share: 0.0}}\n"
        "  - name: poslimit_25\n").replace(
        "    equal_usd_of: share_25\n    overrides:\n",
        "    overrides:\n      population.llm.usd_cap: 0.2\n"))
    prices = workdir / "config/prices.yaml"
    prices.write_text(prices.read_text().replace("input: 0.20", "input: 0.10", 1))
    from market_agents.llm.pricing import _load

    _load.cache_clear()  # one process reads the price table once; a command is one process
    changed = mismatches(frozen, design_facts(load_design(path)), git)
    assert "cell extra_0 added (tier T4)" in changed
    assert any(c.startswith("cell mini_25_equalusd: config_hash changed") for c in changed)
    assert "cell mini_25_equalusd: equal_usd_of changed (share_25 frozen, null now)" in changed
    assert any(c.startswith("design prices.gpt-5.4-") and ".input changed" in c
               for c in changed), changed
    assert mismatches(frozen, facts, {"commit": "d" * 40, "dirty": True}) == [
        f"HEAD {'d' * 12} is not the frozen commit {'c' * 12} (protocol §6: git log -1 matches "
        "freeze.json)", "the work tree has uncommitted changes to tracked files (git status)"]


def _spent(project, design, usd):
    run = project / f"results/runs/{design}/share_25/seed0001"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"llm_usage": {"usd_spent": usd}}))


@pytest.mark.slow(16)
def test_every_paying_command_over_the_project_cap_is_refused_before_any_call(workdir):
    _spent(workdir, "earlier", 39.99)
    design = "config/test/designs/pilot_openai.yaml"
    config = _export(workdir, design, "share_25", "pilot_25.yaml")
    with FakeAPI() as api:
        results = {
            # (--set: the pilot's share_25 is also the tiny confirmatory design's share_25)
            "ma run": _ma(workdir, "run", config, "--seed", "1", "--out", "adhoc", "--set",
                          "population.llm.usd_cap=0.45", api=api),
            "ma cell": _ma(workdir, "cell", design, "share_25", "--seed", "2", api=api),
            "ma design": _ma(workdir, "design", design, "--quiet", api=api),
            "ma bazaar eval": _ma(workdir, "bazaar", "eval", "--tier", "micro", "--provider",
                                  "openai", "--model", "gpt-5.4-nano", "--usd-cap", "0.5",
                                  "--seeds", "2", "--out", "bz", api=api),
            "gate": _ma(workdir, "gate", "approve", design, "--tier", "all", "--out", "g.json",
                        api=api),
        }
        assert api.requests == []
    _assert_refused(results, "USD exceeds the project cap 40.00 USD; no live call was made")
    # a run is admitted at its worst case (its usd_cap), never at its plan; ma design looks
    # at all its runs' plan first (and each run again at its worst case as it starts)
    assert ("refused: worst case 0.5000 USD (its usd_cap; plan 0.0125 USD) + spent 39.99 USD "
            "= 40.49 USD") in results["ma cell"].stderr
    assert "refused: plan 0.5000 USD + spent 39.99 USD" in results["ma bazaar eval"].stderr
    assert ("ma run pilot_25.yaml --out adhoc: refused: worst case 0.4500 USD (its usd_cap; "
            "plan 0.01") in results["ma run"].stderr
    for out in ("adhoc", "bz", "g.json", "results/runs/pilot_openai"):
        assert not (workdir / out).exists()


def test_pilot_cap_counts_the_pilot_designs_spend(workdir):
    _spent(workdir, "pilot_openai", 4.995)
    with FakeAPI() as api:
        done = _ma(workdir, "cell", "config/test/designs/pilot_openai.yaml", "share_25",
                   "--seed", "2", api=api)
        assert api.requests == []
    assert done.returncode == 2
    assert ("worst case 0.5000 USD (its usd_cap; plan 0.0125 USD) + spent 5.00 USD = 5.50 USD "
            "exceeds the pilot cap 5.00 USD" in done.stderr), done.stderr


@pytest.mark.slow(10)
def test_a_ledger_at_39_98_refuses_a_run_whose_worst_case_passes_40(workdir):
    """Issue 25 item 5: a run admitted on its planning estimate (here 0.0125 USD) could pay
    up to its usd_cap and take the ledger past the cap; it is admitted at its worst case."""
    _spent(workdir, "earlier", 39.98)
    config = _export(workdir, "config/test/designs/pilot_openai.yaml", "share_25", "p.yaml")
    with FakeAPI() as api:
        over = _ma(workdir, "run", config, "--seed", "1", "--out", "over", "--set",
                   "population.llm.usd_cap=0.05", api=api)
        assert api.requests == []
        err = over.stderr.strip()
        assert over.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
        assert ("refused: worst case 0.0500 USD (its usd_cap; plan 0.01" in err
                and "+ spent 39.98 USD = 40.03 USD exceeds the project cap 40.00 USD" in err), err
        assert not (workdir / "over").exists()
        assert ledger.spend(workdir / "results").unsettled_usd == 0  # refused: no record
        # a worst case that fits is admitted, and counts at it while unsettled
        fits = _ma(workdir, "run", config, "--seed", "1", "--out", "fits", "--set",
                   "population.llm.usd_cap=0.02", api=api)
        assert fits.returncode == 0, fits.stderr
        assert api.requests
    spent = ledger.spend(workdir / "results")
    assert spent.unsettled_usd == 0 and spent.total_usd <= 40.0 + 1e-9


def test_an_unsettled_job_counts_at_its_worst_case(tmp_path):
    with pytest.raises(RuntimeError), ledger.paying(tmp_path, tmp_path / "killed", 0.01,
                                                    worst_usd=0.5):
        raise RuntimeError("killed")
    assert ledger.spend(tmp_path).unsettled_usd == 0.5
    with pytest.raises(BudgetExceeded, match=r"worst case 0.3000 USD \(its usd_cap; plan "
                       r"0.0100 USD\) \+ spent 0.5000 USD = 0.8000 USD exceeds the project "
                       r"cap 0.7000 USD"):
        ledger.check(ledger.Caps(0.7), 0.01, "job", root=tmp_path, worst_usd=0.3)
    ledger.check(ledger.Caps(0.7), 0.01, "job", root=tmp_path)  # at the plan it would pass


@pytest.mark.slow(13)
def test_paid_jobs_are_in_the_ledger_while_they_run_and_after(workdir):
    from tests.support.bazaar import bazaar_server

    design = "config/test/designs/pilot_openai.yaml"
    with FakeAPI() as api:
        done = _ma(workdir, "cell", design, "share_25", "--seed", "1", api=api)
        assert done.returncode == 0, done.stderr
    with bazaar_server() as api:
        done = _ma(workdir, "bazaar", "eval", "--tier", "micro", "--provider", "openai",
                   "--model", "gpt-5.4-nano", "--usd-cap", "0.5", "--seeds", "2", "--out", "bz",
                   api=api)
        assert done.returncode == 0, done.stderr
    summary = json.loads(_ma(workdir, "spend", "--json").stdout)
    paid = json.loads((workdir / "bz/summary.json").read_text())["usage"]["usd"]
    run = ledger.recorded_usd(workdir / "results/runs/pilot_openai/share_25/seed0001")
    assert run > 0 and paid > 0
    assert summary["by_kind_usd"] == {"bazaar": round(paid, 6), "run": round(run, 6)}
    assert summary["pilot_usd"] == round(run, 6) and summary["unsettled_usd"] == 0
    # A job that never finishes stays in the ledger at its plan until it is resumed.
    with pytest.raises(RuntimeError), ledger.paying(workdir / "results", workdir / "x", 0.25):
        raise RuntimeError("killed")
    assert ledger.spend(workdir / "results").unsettled_usd == 0.25


def test_a_live_run_without_its_key_stops_before_the_ledger_holds_it(workdir):
    """A missing key is known before any call: no unsettled record at the run's plan, no run
    directory, no cache (a record would count against both caps until the run is made)."""
    design = "config/test/designs/pilot_openai.yaml"
    done = subprocess.run([str(BIN / "ma"), "cell", design, "share_25", "--seed", "1"],
                          cwd=workdir, env=env(OPENAI_API_KEY="", MARKET_AGENTS_GUARDS=GUARDS),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "OPENAI_API_KEY is not set" in done.stderr
    assert "Traceback" not in done.stderr
    assert ledger.spend(workdir / "results").unsettled_usd == 0
    assert not (workdir / "results/runs/pilot_openai").exists()
    assert not (workdir / "results/cache/pilot_openai.sqlite").exists()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spent=st.lists(st.floats(0, 10), max_size=4), unsettled=st.floats(0, 10),
       plan=st.floats(0, 30), cap=st.floats(0, 40))
def test_check_refuses_exactly_when_plan_plus_ledger_passes_the_cap(tmp_path_factory, spent,
                                                                     unsettled, plan, cap):
    root = tmp_path_factory.mktemp("results")
    for i, usd in enumerate(spent):
        run = root / f"runs/d{i}/c/seed0001"
        run.mkdir(parents=True)
        (run / "manifest.json").write_text(json.dumps({"llm_usage": {"usd_spent": usd}}))
    with pytest.raises(RuntimeError), ledger.paying(root, root / "killed", unsettled):
        raise RuntimeError
    total = sum(spent) + round(unsettled, 6)
    caps = ledger.Caps(project_cap_usd=cap)
    if plan + total > cap + 1e-9:
        with pytest.raises(BudgetExceeded, match="exceeds the project cap"):
            ledger.check(caps, plan, "job", root=root)
    else:
        assert ledger.check(caps, plan, "job", root=root).total_usd == pytest.approx(total)


def test_a_damaged_spend_record_is_named(tmp_path):
    from market_agents.errors import ConfigError

    record = tmp_path / "manifests/spend/0123456789abcdef.json"
    record.parent.mkdir(parents=True)
    record.write_text("{not json")
    with pytest.raises(ConfigError, match=r"0123456789abcdef\.json: not a spend record"):
        ledger.spend(tmp_path)

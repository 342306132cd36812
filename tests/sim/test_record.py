"""The record can be trusted, through `ma run` against the local fake server (127.0.0.1):
fatal provider errors stop with one line and nothing recorded, transient ones are retried,
counted and recorded, a run over its failure limit is marked failed, replays need no key and
make no call, the hard cap holds, and a damaged or unusable cache is refused."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from market_agents.llm.cache import PAID_MARKER, ResponseCache
from market_agents.testing.fakeserver import FakeAPI
from tests.support import inprocess
from tests.support.liverun import (
    SECRET,
    env,
    ma_run,
    ma_run_cmd,
    one_line_error,
    same_bytes,
    stored,
)
from tests.support.osconditions import run_on_full_disk, run_unprivileged, shared_tmp

NO_RETRY = "{openai: {max_retries: 1, backoff_s: 0.0}}"


def test_the_tests_live_runs_use_a_config_of_no_project(tmp_path):
    """The checkout's own config would check these runs against the checkout's spend ledger:
    where a study was run, every live run of the suite was refused (26 tests failed)."""
    from pathlib import Path

    from market_agents.layout import project_of

    cmd = ma_run_cmd(tmp_path / "run", None)
    config = Path(cmd[cmd.index("run") + 1])
    assert config.is_file() and project_of(config) is None and project_of(tmp_path) is None


@pytest.mark.parametrize("fault,what", [
    ("quota", r"quota exhausted \(HTTP 429 insufficient_quota\)"),
    ("400", r"invalid request \(HTTP 400 invalid_request_error\)"),
    ("401", r"authentication or permission refused \(HTTP 401"),
    ("403", r"authentication or permission refused \(HTTP 403"),
    ("404", r"unknown model \(HTTP 404"),
])
@pytest.mark.slow(11)  # CPU s on 2 cores: out of the quick subset
def test_fatal_error_stops_the_run_with_one_line_and_records_nothing(tmp_path, fault, what):
    with FakeAPI(fault_all=fault) as api:
        proc = ma_run(tmp_path / "run", tmp_path / "cache", api)
    err = one_line_error(proc)
    assert re.search(r"provider 'openai' \(openai\), model 'gpt-5.4-nano': " + what, err), err
    assert not (tmp_path / "run").exists() and stored(tmp_path / "cache") == 0
    assert 1 <= len(api.requests) <= 5  # the first tick's batch at most: never retried
    # no temp dirs, no failed record; results/ holds the spend ledger's record of the job
    # (unsettled, so counted at its worst case, its usd_cap: docs/guards.md)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "results"]


@pytest.mark.slow(6)  # CPU s on 2 cores: out of the quick subset
def test_anthropic_quota_and_auth_stop_the_run_too(tmp_path):
    anthropic = dict(population__llm__provider_mix="{anthropic: 1.0}",
                     population__llm__models="{anthropic: claude-haiku-5-5}")
    for fault, what in (("401", "authentication or permission refused"),
                        ("400", "invalid request")):
        with FakeAPI(fault_all=fault) as api:
            proc = ma_run(tmp_path / f"run{fault}", tmp_path / "cache", api, **anthropic)
        assert re.search(f"provider 'anthropic' \\(anthropic\\), model 'claude-haiku-5-5': "
                         f"{what}", one_line_error(proc))
        assert not (tmp_path / f"run{fault}").exists()
    assert stored(tmp_path / "cache") == 0


@pytest.mark.slow(8)  # CPU s on 2 cores: out of the quick subset
def test_transient_failures_over_the_limit_mark_the_run_failed(tmp_path):
    out, cache = tmp_path / "run", tmp_path / "cache"
    with FakeAPI(fault_all="500") as api:
        proc = ma_run(out, cache, api, population__llm__providers=NO_RETRY)
    err = one_line_error(proc)
    assert "run stopped at tick" in err and "marked failed" in err
    assert "population.llm.max_failure_rate 0.1; server_error" in err
    assert not out.exists()
    failed = json.loads((tmp_path / "run.failed.json").read_text())
    assert failed["status"] == "failed" and failed["reason"] == "max_failure_rate"
    assert failed["failures"] > 0.1 * failed["planned_decisions"] == 2.5
    assert failed["llm_usage"]["failures_by_class"] == {"server_error": failed["failures"]}
    assert failed["llm_usage"]["retries_by_class"] == {"server_error": failed["failures"]}
    assert len(api.requests) == 2 * failed["failures"]  # one retry each, then recorded
    assert stored(cache) == failed["failures"]

    # the failures are the record: the same command fails the same way with no call
    again = ma_run(out, cache, api)
    assert "marked failed" in one_line_error(again) and len(api.requests) == 2 * failed[
        "failures"]
    # a deliberate re-fetch: remove the recorded failures, then run against a healthy server
    retry = run_ma("cache", "retry-failures", str(cache))
    assert retry.returncode == 0, retry.stderr
    assert f"removed {failed['failures']} recorded failure(s) (server_error " in retry.stdout
    assert "USD at the planning profile" in retry.stdout
    with FakeAPI() as healthy:
        done = ma_run(out, cache, healthy)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "run.failed.json").exists()
    usage = json.loads((out / "manifest.json").read_text())["llm_usage"]
    assert usage["failures"] == 0 and usage["calls"] == 25


def run_ma(*args):
    return inprocess.ma(args, env(), os.getcwd())


def test_transient_failures_under_the_limit_are_retried_and_counted(tmp_path):
    with FakeAPI(first_attempt_fail_rate=0.5, retry_after_s=0.01, seed=3) as api:
        proc = ma_run(tmp_path / "run", tmp_path / "cache", api,
                      population__llm__providers="{openai: {backoff_s: 0.0}}")
    assert proc.returncode == 0, proc.stderr
    usage = json.loads((tmp_path / "run/manifest.json").read_text())["llm_usage"]
    retried = usage["retries_by_class"]
    assert set(retried) == {"rate_limit", "server_error"} and sum(retried.values()) > 3
    assert usage["failures"] == 0 and usage["calls"] == 25 + sum(retried.values())


@pytest.mark.slow(5)  # CPU s on 2 cores: out of the quick subset
def test_replay_needs_no_key_makes_no_call_and_is_byte_identical(tmp_path):
    cache = tmp_path / "cache"
    with FakeAPI(vary=True) as api:
        live = ma_run(tmp_path / "live", cache, api)
        assert live.returncode == 0, live.stderr
        n = len(api.requests)
        replay = ma_run(tmp_path / "replay", cache, api, "--replay", key=False)
        assert replay.returncode == 0, replay.stderr
        assert len(api.requests) == n == 25
    assert same_bytes(tmp_path / "live", tmp_path / "replay")
    usage = json.loads((tmp_path / "replay/manifest.json").read_text())["llm_usage"]
    assert (usage["calls"], usage["usd_spent"], usage["replay"]) == (0, 0.0, True)
    assert usage["usd_live"] == json.loads((tmp_path / "live/manifest.json").read_text())[
        "llm_usage"]["usd_live"] > 0
    # a replay that needs an answer the cache lacks stops, calls nothing, writes nothing
    miss = ma_run(tmp_path / "miss", cache, None, key=False, seed=2,
                  population__llm__replay="true")  # the config switch, this time
    assert re.search(r"replay: \d request\(s\) of tick \d+ have no stored answer in "
                     f"{cache}", one_line_error(miss))
    assert not (tmp_path / "miss").exists()


def test_replay_of_an_edited_record_is_an_error_not_a_divergence(tmp_path, recorded):
    """An entry forged with a valid checksum passes the store's check; the run directory's
    answer hashes catch it, before any call."""
    cache, out = tmp_path / "cache", tmp_path / "run"
    shutil.copytree(recorded / "cache", cache)
    shutil.copytree(recorded / "run", out)
    c = ResponseCache(cache)
    key = c.keys()[3]
    body = c.get(key)
    body["usage"] = {**body["usage"], "output": body["usage"]["output"] + 1}
    c.put_raw(key, c._text(key, body))  # a new, valid checksum
    c.close()
    with FakeAPI() as api:
        proc = ma_run(out, cache, api)  # re-running into the run directory checks its record
        assert api.requests == []
    err = one_line_error(proc)
    assert "differs from the one that run used" in err and key in err
    assert same_bytes(out, recorded / "run")  # the run directory is left as it was
    replay = ma_run(tmp_path / "elsewhere", cache, None, "--replay", "--expect", str(out),
                    key=False)
    assert "differs from the one that run used" in one_line_error(replay)


@pytest.mark.slow(5)  # CPU s on 2 cores: out of the quick subset
def test_hard_cap_holds_against_a_server_billing_the_output_limit(tmp_path):
    with FakeAPI(bill_max_output=True) as api:
        for cap, conc in ((0.001, 1), (0.01, 16)):
            out = tmp_path / f"cap{cap}_{conc}"
            proc = ma_run(out, None, api, population__llm__usd_cap=cap,
                          population__llm__max_concurrency=conc)
            assert proc.returncode == 0, proc.stderr
            usage = json.loads((out / "manifest.json").read_text())["llm_usage"]
            assert usage["usd"] <= cap and usage["usd_spent"] <= cap, usage
            assert usage["usd_over_cap"] == 0.0 and usage["budget_halts"] > 0
            assert usage["halt_tick"] is not None and usage["reserved_at_halt_usd"] is not None
            assert usage["spent_at_halt_usd"] <= cap


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One finished live run and its cache (copied by each test that damages it)."""
    root = tmp_path_factory.mktemp("recorded")
    with FakeAPI() as api:
        proc = ma_run(root / "run", root / "cache", api)
        assert proc.returncode == 0, proc.stderr
    assert (root / "cache" / PAID_MARKER).exists()
    return root


@pytest.mark.parametrize("damage", ["truncated", "random", "edited", "emptied", "deleted"])
def test_a_damaged_cache_stops_the_run_before_any_call(tmp_path, recorded, damage):
    cache = tmp_path / "cache"
    shutil.copytree(recorded / "cache", cache)
    db = cache / "cache.db"
    if damage == "edited":
        c = ResponseCache(cache)
        key = c.keys()[0]
        c.put_raw(key, c._store.get(key).replace('"text":"', '"text":" ', 1))
        c.close()
    else:
        import sqlite3

        con = sqlite3.connect(db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        data = db.read_bytes()
        if damage == "truncated":
            db.write_bytes(data[: len(data) // 2])
        elif damage == "random":
            db.write_bytes(os.urandom(len(data)))
        elif damage == "emptied":
            db.write_bytes(b"")
        else:
            db.unlink()
    with FakeAPI() as api:
        err = one_line_error(ma_run(tmp_path / "again", cache, api))
        assert api.requests == []  # no silent paid call
        assert str(cache) in err and not (tmp_path / "again").exists()
        if damage in ("emptied", "deleted"):
            assert "paid.json says paid answers were stored here" in err
            assert "--new-cache" in err
            started = ma_run(tmp_path / "again", cache, api, "--new-cache")
            assert started.returncode == 0, started.stderr  # deliberate: pays again
            assert len(api.requests) == 25


@pytest.mark.slow(6)  # CPU s on 2 cores: out of the quick subset
def test_cache_path_that_is_a_file_or_unwritable_or_on_a_full_disk(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    err = one_line_error(ma_run(tmp_path / "run", blocker))
    assert f"--cache {blocker}: is a regular file" in err
    with shared_tmp() as tmp:
        locked = tmp / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        proc = run_unprivileged(ma_run_cmd(tmp / "run", locked), env=env(), cwd=tmp)
        err = one_line_error(proc)
        assert f"--cache {locked}: the directory is not writable" in err
        assert sorted(p.name for p in tmp.iterdir()) == ["locked"]  # nor a ledger record
    full = tmp_path / "full"
    proc = run_on_full_disk(ma_run_cmd(tmp_path / "run", full / "cache"), full, env=env(),
                            cwd=tmp_path)
    err = one_line_error(proc)
    assert f"--cache {full / 'cache'}" in err and ("full" in err or "large" in err), err
    # the full disk shows only once the run opens its cache, after the checks: the spend
    # ledger keeps that job's record (unsettled: counted at its worst case until a rerun)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "full", "results"]


@pytest.mark.slow(8)  # CPU s on 2 cores: out of the quick subset
def test_a_design_with_paid_runs_refuses_a_missing_cache(tmp_path):
    from tests.support import ROOT

    shutil.copytree(ROOT / "config", tmp_path / "config")
    design = "config/test/designs/live.yaml"
    with FakeAPI() as api:
        proc = _cell(tmp_path, design, api, 1)
        assert proc.returncode == 0, proc.stderr
        shutil.rmtree(tmp_path / "results/cache")  # the whole cache directory is lost
        n = len(api.requests)
        err = one_line_error(_cell(tmp_path, design, api, 2))
        assert "the cache is missing, but 1 run(s) recorded" in err and "--new-cache" in err
        assert len(api.requests) == n
        again = _cell(tmp_path, design, api, 2, "--new-cache")
        assert again.returncode == 0, again.stderr


def _cell(project, design, api, seed, *args):
    return inprocess.ma(["cell", design, "share_25", "--seed", str(seed), *args], env(api),
                        project)


def test_key_never_printed(tmp_path):
    with FakeAPI(fault_all="401") as api:
        proc = ma_run(tmp_path / "run", None, api)
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.slow(5)  # CPU s on 2 cores: out of the quick subset
def test_manifest_counts_paid_answers_across_a_resume(tmp_path):
    """The gate's figure survives a kill: usd_live counts answers served from the cache."""
    cache = tmp_path / "cache"
    with FakeAPI() as api:
        assert ma_run(tmp_path / "a", cache, api).returncode == 0
        assert ma_run(tmp_path / "b", cache, api).returncode == 0
    a = json.loads((tmp_path / "a/manifest.json").read_text())["llm_usage"]
    b = json.loads((tmp_path / "b/manifest.json").read_text())["llm_usage"]
    assert b["usd_spent"] == 0.0 and b["usd_live"] == a["usd_live"] == a["usd_spent"] > 0
    assert same_bytes(tmp_path / "a", tmp_path / "b")


def test_rerunning_into_a_run_directory_checks_only_a_run_of_the_same_config(tmp_path):
    from market_agents.cli import main

    out = tmp_path / "run"
    mock = ["--set", "simulation.ticks=120", "--set", "simulation.burn_in=20", "--quiet"]
    config = tmp_path / "defaults.yaml"
    config.write_text("{}\n")  # every key at its default, LLM traders on the mock
    base = ["run", str(config), "--seed", "1", "--out", str(out)]
    share = ["--set", "population.llm_share=0.05"]
    assert main(base + mock + share) == 0
    assert main(base + mock + share) == 0  # the same run again: its answers match its record
    assert main(base + mock + ["--set", "population.llm_share=0.1"]) == 0  # another run

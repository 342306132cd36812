"""`ma spend settle` (issue 37): a paid run killed and re-made under another --out no longer
holds its worst case in the ledger for good. Settled at the answers its process paid for (as
its cache recorded them) plus the worst case of its calls in flight, it frees the project cap
for a plan refused before, while every answer the (fake) server returned stays counted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from market_agents.errors import ConfigError
from market_agents.llm.cache import ResponseCache
from market_agents.llm.types import Usage
from market_agents.pipeline.settle import settle
from market_agents.prices import load_prices
from market_agents.protocol import ledger
from market_agents.testing.fakeserver import FakeAPI
from tests.support import inprocess, procs
from tests.support.liverun import SECRET, env, ma_run, ma_run_cmd, one_line_error

TOKENS = (1000, 200)  # every answer of the fake server bills this usage
MODEL = "gpt-5.4-nano"
KILLS = 3


def _ma(*args: str, cwd) -> subprocess.CompletedProcess:
    return inprocess.ma(args, env(), cwd)


def _kill_after(proc: subprocess.Popen, api: FakeAPI, n: int) -> None:
    """SIGKILL the run's process group once ``n`` more requests have reached the server."""
    target = api.n_arrived + n
    while proc.poll() is None and not api.wait_for(target, timeout=0.05):
        pass
    assert proc.poll() is None, "the run ended before its kill"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert api.wait_idle(60)


@pytest.mark.slow(25)
def test_settling_killed_runs_frees_the_cap_and_forgets_nothing_paid(tmp_path):
    root, cache = tmp_path / "results", tmp_path / "cache"
    per_answer = load_prices().cost(MODEL, Usage(input=TOKENS[0], output=TOKENS[1]))
    with FakeAPI(tokens=TOKENS, latency_s=0.15, jitter_s=0.05) as api:
        for i in range(KILLS):
            proc = procs.popen(ma_run_cmd(tmp_path / f"killed{i}", cache), env=env(api),
                               cwd=tmp_path, start_new_session=True)
            if i == 0:  # while it runs, nobody settles it
                assert api.wait_for(1, timeout=120)
                with pytest.raises(ConfigError, match=r"refused: pid \d+ .* still runs it"):
                    settle(root, tmp_path / "killed0")
            _kill_after(proc, api, 3 + 2 * i)
        done = ma_run(tmp_path / "done", cache, api)  # re-made under another --out
        assert done.returncode == 0, done.stderr[-3000:]
    served_usd = api.answered * per_answer  # what the provider billed, every answer
    fresh = json.loads((tmp_path / "done/manifest.json").read_text())["llm_usage"]["usd_spent"]

    before = ledger.spend(root)
    assert before.unsettled_usd == pytest.approx(KILLS * 0.5)  # each at its usd_cap
    listing = _ma("spend", "--results", str(root), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    for i in range(KILLS):
        line = next(ln for ln in listing.stdout.splitlines() if f"killed{i}" in ln)
        assert "unfinished" in line and "ma run " in line and f"--out {tmp_path}/killed{i}" \
            in line, line
    assert "ma spend settle RUN_DIR" in listing.stdout
    # the next plan: refused against a cap the held reservations fill
    caps = ledger.Caps(project_cap_usd=before.total_usd + 0.4)
    with pytest.raises(Exception, match="exceeds the project cap"):
        ledger.check(caps, 0.01, "next plan", root=root, worst_usd=0.5)

    for i in range(KILLS):
        out = _ma("spend", "settle", str(tmp_path / f"killed{i}"), "--results", str(root),
                  cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.strip().splitlines()) == 1 and SECRET not in out.stdout
        assert f"settled {tmp_path}/killed{i} at " in out.stdout, out.stdout
    again = _ma("spend", "settle", str(tmp_path / "killed0"), "--results", str(root),
                cwd=tmp_path)
    assert "already settled" in one_line_error(again)

    after = ledger.spend(root)
    assert after.unsettled_usd == 0 and after.total_usd < before.total_usd - 1.0
    ledger.check(caps, 0.01, "next plan", root=root, worst_usd=0.5)  # admitted now
    # nothing paid is forgotten: the whole ledger, and the killed runs' share alone (what the
    # server billed beyond what the finished run paid itself), are counted in full
    assert after.total_usd >= served_usd - 1e-9
    killed = [e for e in after.entries if Path(e.path).name.startswith("killed")]
    assert len(killed) == KILLS and all(e.settled_by == "ma spend settle" for e in killed)
    assert sum(e.usd for e in killed) >= served_usd - fresh - 1e-9, (served_usd, fresh)
    for i in range(KILLS):  # the records are kept, saying how they were settled
        rec = json.loads(ledger.record_path(root, tmp_path / f"killed{i}").read_text())
        assert rec["settled_by"] == "ma spend settle" and rec["settled_at"]
        assert rec["settlement"]["recorded_answers"] >= 1
        assert rec["spent_usd"] <= rec["worst_usd"]


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _killed_record(root, out, cache_dir, changes=None):
    """The spend record of a paid job whose process is gone (a dead pid), and its cache
    holding one paid answer that process stored; ``changes``: record keys set (None: removed,
    as in a record written before they existed)."""
    with pytest.raises(RuntimeError), ledger.paying(root, out, 0.01, worst_usd=0.5,
                                                    cache=cache_dir, in_flight=4):
        raise RuntimeError("killed")
    path = ledger.record_path(root, out)
    rec = json.loads(path.read_text())
    rec["process"]["pid"] = _dead_pid()
    c = ResponseCache(cache_dir)
    c.put("k" * 64, {"status": "answered", "usd": 0.001, "reserved_usd": 0.002,
                     "stored_by": rec["process"], "recorded_at": "9999"}, paid=True)
    c.close()
    for key, value in (changes or {}).items():
        if value is None:
            rec.pop(key, None)
        else:
            rec[key] = value
    path.write_text(json.dumps(rec))
    return path


def test_a_live_process_refuses_and_an_old_record_names_what_to_pass(tmp_path):
    root, out, cache = tmp_path / "results", tmp_path / "run", tmp_path / "cache"
    with pytest.raises(RuntimeError), ledger.paying(root, out, 0.01, worst_usd=0.5,
                                                    cache=cache, in_flight=4):
        raise RuntimeError("killed")
    with pytest.raises(ConfigError, match=r"refused: pid \d+ .* still runs it"):
        settle(root, out)  # this very process wrote it and runs
    path = _killed_record(root, out, cache, {"cache": None, "in_flight": None})
    with pytest.raises(ConfigError, match="does not name the run's response cache.*pass "
                       "--cache DIR"):
        settle(root, out)
    with pytest.raises(ConfigError, match=r"pass --in-flight-usd USD \(at most its worst case "
                       r"0.5000 USD\)"):
        settle(root, out, cache=cache)
    rec = settle(root, out, cache=cache, in_flight_usd=0.01)
    assert rec["spent_usd"] == pytest.approx(0.011)
    assert json.loads(path.read_text())["settled_by"] == "ma spend settle"
    with pytest.raises(ConfigError, match="no spend record of"):
        settle(root, tmp_path / "elsewhere")


def test_settled_at_recorded_plus_in_flight_and_kept_when_the_output_is_run_again(tmp_path):
    root, out, cache = tmp_path / "results", tmp_path / "run", tmp_path / "cache"
    _killed_record(root, out, cache)
    rec = settle(root, out)
    # one recorded answer (0.001) + 4 calls in flight x the largest reservation (0.002)
    assert rec["spent_usd"] == pytest.approx(0.009)
    assert rec["settlement"]["recorded_answers"] == 1
    # the same output run again later: what the settled execution paid stays counted
    with ledger.paying(root, out, 0.01, worst_usd=0.5, cache=cache, in_flight=4) as new:
        new["spent_usd"] = 0.003
    entries = ledger.spend(root).entries
    assert sorted(round(e.usd, 6) for e in entries) == [0.003, 0.009]
    assert json.loads(ledger.record_path(root, out).read_text())["earlier"][0][
        "settled_by"] == "ma spend settle"


@pytest.mark.slow(3)
def test_bad_input_is_one_line(tmp_path):
    proc = _ma("spend", "settle", str(tmp_path / "nothing"), "--results", str(tmp_path),
               cwd=tmp_path)
    assert "no spend record of" in one_line_error(proc)
    proc = _ma("spend", "settle", "x", "--results", str(tmp_path / "missing"), cwd=tmp_path)
    assert "--results" in one_line_error(proc)


def test_a_workflow_holding_the_project_may_resume_a_run_under_results_runs(tmp_path):
    """A killed run under results/runs is resumed by the next workflow invocation: while one
    holds the project (its flock on .snakemake/holder.json), the run is not settled."""
    root = tmp_path / "results"
    out, cache = root / "runs/d/c/seed0001", tmp_path / "cache"
    _killed_record(root, out, cache)
    holder_file = tmp_path / ".snakemake/holder.json"
    holder_file.parent.mkdir()
    script = (
        "import fcntl, json, os, socket, sys, time\n"
        f"fd = os.open({str(holder_file)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, json.dumps({'pid': os.getpid(), 'host': socket.gethostname(),"
        " 'started': 'now', 'target': 'tier_T1'}).encode())\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=r"refused: snakemake pid \d+ .*target tier_T1\) "
                           "holds the project and may resume this run"):
            settle(root, out)
    finally:
        proc.kill()
        proc.wait()
    assert settle(root, out)["settled_by"] == "ma spend settle"  # once it has ended

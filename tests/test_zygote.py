"""The fork server the tests start their Snakemake and live `ma` processes from
(market_agents.testing.zygote, tests/support/procs.py): a forked command leaves what a new
interpreter leaves (files, lines, exit status), is its own process (session, signals), and a
command it cannot honour (an environment an interpreter reads as it starts) runs fresh."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from market_agents.testing.fakeserver import FakeAPI
from market_agents.testing.zygote import Zygote
from tests.support import ROOT, procs
from tests.support.liverun import env, ma_run_cmd, tables
from tests.support.workflow import env as wf_env
from tests.support.workflow import smk_cmd

# What differs between two invocations of Snakemake whatever starts them: the time, the
# workflow's id, the directory it was imported in (procs: a forked child's is the server's).
VOLATILE = re.compile(r"^\s*(Date|Workflow ID|Run directory):.*$|^\[\w{3} \w{3} .*\d{4}\]$",
                      re.M)


def _fresh(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


@pytest.mark.slow(6)
def test_a_forked_live_run_leaves_what_a_new_interpreter_leaves(tmp_path):
    with FakeAPI() as api:
        runs = {}
        for how in ("forked", "fresh"):
            cmd = ma_run_cmd(tmp_path / how / "run", tmp_path / how / "cache")
            (tmp_path / how).mkdir()
            run = procs.run if how == "forked" else _fresh
            runs[how] = run(cmd, cwd=tmp_path / how, env=env(api), timeout=300)
        assert procs.forked(cmd, env(api)) is not None  # the first one was forked
    forked, fresh = runs["forked"], runs["fresh"]
    assert forked.returncode == fresh.returncode == 0, forked.stderr + fresh.stderr
    assert (forked.stdout, forked.stderr) == (fresh.stdout, fresh.stderr)
    got, want = tables(tmp_path / "forked/run", ("latency_s",)), tables(tmp_path / "fresh/run",
                                                                        ("latency_s",))
    assert got.keys() == want.keys() and all(got[t].equals(want[t]) for t in want)
    # a refusal: the same one line and exit 2, both ways
    bad = ma_run_cmd(tmp_path / "bad", None, 1, "--set", "simulation.ticks=-1")
    refused = procs.run(bad, cwd=tmp_path, env=env(), timeout=120)
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert (refused.returncode, refused.stderr) == (
        (f := _fresh(bad, cwd=tmp_path, env=env(), timeout=120)).returncode, f.stderr)


@pytest.mark.slow(4)
def test_a_forked_snakemake_plans_what_a_new_one_plans(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    cmd = smk_cmd("-n", "exploratory")
    forked = procs.run(cmd, cwd=tmp_path, env=wf_env(), timeout=300)
    fresh = _fresh(cmd, cwd=tmp_path, env=wf_env(), timeout=300)
    assert forked.returncode == fresh.returncode == 0, forked.stderr[-2000:]
    assert re.search(r"^simulate\s+1$", forked.stdout, re.M)
    assert VOLATILE.sub("", forked.stdout) == VOLATILE.sub("", fresh.stdout)
    assert VOLATILE.sub("", forked.stderr) == VOLATILE.sub("", fresh.stderr)


def test_a_forked_child_is_its_own_session_and_dies_by_a_signal(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text("import json, os, sys, time\nprint(json.dumps([os.getpid(), os.getpgid(0),"
                      " os.getsid(0), sys.argv, os.getcwd(), dict(os.environ)]), flush=True)\n"
                      "time.sleep(600)\n")
    zyg = procs.zygote(procs.WORKFLOW_PRELOAD)
    child = zyg.popen([script, "a", "b"], cwd=tmp_path, env={"WHO": "me"},
                      stdout=tmp_path / "out.txt", start_new_session=True)
    assert os.getpgid(child.pid) == child.pid and os.getsid(child.pid) == child.pid
    while not (tmp_path / "out.txt").read_text():
        assert child.poll() is None
        time.sleep(0.01)
    pid, pgid, sid, argv, cwd, environ = json.loads((tmp_path / "out.txt").read_text())
    assert pid == pgid == sid == child.pid
    assert (argv, cwd, environ) == ([str(script), "a", "b"], str(tmp_path), {"WHO": "me"})
    os.killpg(child.pid, signal.SIGKILL)
    assert child.wait(60) == -signal.SIGKILL and child.poll() == -signal.SIGKILL
    done = zyg.run([sys.executable, "-m", "json.tool", "--no-such-flag"], cwd=tmp_path, env={})
    assert done.returncode == 2 and "--no-such-flag" in done.stderr  # argparse's own exit
    with pytest.raises(RuntimeError, match=r"ended \(exit 1\) before it started"):
        zyg.run([script], cwd=tmp_path / "no-such-folder", env={}, timeout=60)  # at once


def test_an_environment_read_at_start_up_gets_a_new_interpreter():
    cmd = smk_cmd("--version")
    assert procs.forked(cmd, wf_env()) is not None
    assert procs.forked(cmd, wf_env(PYTHONPATH="/elsewhere")) is None
    assert procs.forked(cmd, wf_env(OPENBLAS_NUM_THREADS="8")) is None
    assert procs.forked(["make", "test"], wf_env()) is None
    done = procs.run(cmd, cwd=ROOT, env=wf_env(PYTHONPROFILEIMPORTTIME="1"), timeout=120)
    assert done.returncode == 0 and "import time:" in done.stderr  # a new interpreter's


def test_the_server_refuses_to_fork_after_polars_started_its_threads(tmp_path):
    zyg = Zygote(("polars",))
    try:
        with pytest.raises(RuntimeError, match="the zygote ended"):
            zyg.run([sys.executable, "-m", "json.tool"], cwd=tmp_path, env={}, timeout=60)
    finally:
        zyg.close()
    assert zyg.proc.returncode != 0

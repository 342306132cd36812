"""The tests' in-process `ma` (tests/support/inprocess.py) runs a command as a process would:
with the environment given, os.environ itself included, and everything restored after."""

from __future__ import annotations

import os

from market_agents.inputs import REPLAY_ENV
from tests.support import inprocess


def test_the_environment_given_is_the_commands_and_is_restored(tmp_path, monkeypatch):
    monkeypatch.setenv(REPLAY_ENV, "maybe")  # a switch neither on nor off: refused, named
    here = os.getcwd()
    done = inprocess.ma(["schema", "--out", str(tmp_path / "s")], os.environ, tmp_path)
    assert done.returncode == 2 and REPLAY_ENV in done.stderr and done.stdout == ""
    assert os.environ[REPLAY_ENV] == "maybe" and os.getcwd() == here
    done = inprocess.ma(["schema", "--out", str(tmp_path / "s")],
                        {k: v for k, v in os.environ.items() if k != REPLAY_ENV}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert os.environ[REPLAY_ENV] == "maybe" and os.getcwd() == here


def test_a_usage_error_is_its_exit_code(tmp_path):
    done = inprocess.ma(["run", "--seed", "one"], os.environ, tmp_path)
    assert done.returncode == 2 and "error" in done.stderr

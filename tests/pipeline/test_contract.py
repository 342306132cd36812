"""The run contract: a bad RUN_ID or MODE says what exists. (A sanity run writing eval_inputs/
and metrics.json, in its own project directory: tests/pipeline/test_modes.py.)"""

import subprocess
import sys

from tests.support.workflow import ROOT, env


def _py(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=300)


def test_unknown_run_id_lists_the_runs(workdir):
    done = _py("src.main", "--run-id", "nosuch", "--workdir", str(workdir))
    assert done.returncode == 2
    assert "RUN_ID='nosuch': no " in done.stderr
    assert "config/run/nosuch.yaml (runs: exploratory_mock, pilot_openai, sigma)" in done.stderr

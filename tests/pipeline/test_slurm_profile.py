"""The slurm profile and the test-cluster script, without a cluster (the default suite); the
cluster itself is exercised by test_slurm.py (`make test-slurm`)."""

from __future__ import annotations

import subprocess

import yaml

from tests.support import ROOT

PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "profile.yaml"
START = ROOT / "workflow" / "slurm" / "start_cluster.sh"


def test_slurm_profile_resubmits_timed_out_and_requeues_preempted_jobs():
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    assert profile["retries"] >= 1 and profile["slurm-requeue"] is True
    # A resubmitted job gets a longer time limit than the one it ran out of.
    limits = [profile["default-resources"]["runtime"]] + [
        r["runtime"] for r in profile["set-resources"].values() if "runtime" in r]
    assert limits and all("attempt" in str(limit) for limit in limits)


def test_start_cluster_without_a_state_dir_says_how_to_call_it():
    done = subprocess.run(["bash", str(START)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == "start_cluster.sh: usage: start_cluster.sh STATE_DIR [stop]"

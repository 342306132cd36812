"""The workflow on a real SLURM cluster: a one-node cluster on this machine
(workflow/slurm/start_cluster.sh: munged, slurmctld and slurmd on loopback), driven through the
slurm profile and snakemake-executor-plugin-slurm.

Opt-in (several minutes, root, Debian packages): `make test-slurm`, or
`pytest tests/pipeline/test_slurm.py --runslurm` once the packages are installed.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from tests.support.workflow import ROOT, SNAKEMAKE, env, smk

pytestmark = pytest.mark.slurm

START = ROOT / "workflow" / "slurm" / "start_cluster.sh"
PROFILE = str(ROOT / "workflow" / "profiles" / "slurm")
# The test cluster keeps no accounting database (slurmdbd), so the plugin asks squeue, not
# sacct; and it checks job status every few seconds instead of after 40 s.
CLUSTER_FLAGS = ("--slurm-status-command", "squeue",
                 "--slurm-init-seconds-before-status-checks", "5")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    state = tmp_path_factory.mktemp("slurm-cluster")
    started = subprocess.run(["bash", str(START), str(state)], capture_output=True, text=True,
                             timeout=300)
    assert started.returncode == 0, started.stderr
    yield {"SLURM_CONF": str(state / "slurm.conf")}
    subprocess.run(["bash", str(START), str(state), "stop"], capture_output=True, timeout=60)


def slurm_jobs(cluster: dict[str, str]) -> list[dict[str, str]]:
    """Every job the test cluster knows (finished ones too): id, state, comment, workdir."""
    out = subprocess.run(["squeue", "--states=all", "-h", "-o", "%i|%T|%k|%Z"],
                         capture_output=True, text=True, env=env(**cluster), check=True).stdout
    keys = ("id", "state", "comment", "workdir")
    return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines()]


def scontrol(cluster: dict[str, str], *args: str) -> str:
    return subprocess.run(["scontrol", *args], capture_output=True, text=True,
                          env=env(**cluster), check=True).stdout


def test_exploratory_through_slurm_equals_the_local_run(tmp_path, cluster):
    local, remote = tmp_path / "local", tmp_path / "slurm"
    for d in (local, remote):
        shutil.copytree(ROOT / "config", d / "config")

    done_local = smk(local, "--cores", "2", "exploratory", timeout=900)
    assert done_local.returncode == 0, done_local.stderr[-3000:]
    done = smk(remote, "--profile", PROFILE, *CLUSTER_FLAGS, "exploratory", timeout=1800,
               **cluster)
    assert done.returncode == 0, done.stderr[-3000:]

    # The jobs really ran as SLURM jobs, from that directory, and finished.
    ours = [j for j in slurm_jobs(cluster) if Path(j["workdir"]) == remote]
    assert ours and {j["state"] for j in ours} == {"COMPLETED"}
    comments = [j["comment"] for j in ours]
    assert any(c.startswith("rule_gather") for c in comments), comments
    # the free cells' jobs: `simulate`, bundled by the profile's group `runs`
    assert any(c.startswith(("rule_simulate", "rule_runs")) for c in comments), comments

    # Free runs open no response cache, so the two paths agree byte for byte.
    table = "results/runs/exploratory/outcomes.parquet"
    assert pl.read_parquet(local / table).height > 0
    assert (local / table).read_bytes() == (remote / table).read_bytes()


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"snakemake ended before {path.name} appeared"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.5)


def job_of(cluster: dict[str, str], workdir: Path, rule: str) -> dict[str, str]:
    found = [j for j in slurm_jobs(cluster)
             if Path(j["workdir"]) == workdir and j["comment"] == f"rule_{rule}"]
    assert found, f"no SLURM job for rule {rule}"
    return found[-1]


def test_timed_out_job_is_retried_and_preempted_job_requeued(tmp_path, cluster):
    """The profile resubmits a job killed at its time limit (Snakemake retries, attempt 2) and
    lets SLURM restart a preempted one (--requeue; the test cluster requeues nothing by
    default)."""
    cmd = [str(SNAKEMAKE), "-s", str(Path(__file__).parent / "slurm_retry.smk"),
           "--profile", PROFILE, *CLUSTER_FLAGS]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env(**cluster), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(tmp_path / "timeout.started", proc)
        timed = job_of(cluster, tmp_path, "timeout")
        scontrol(cluster, "update", f"JobId={timed['id']}", "TimeLimit=0:01")
        wait_for(tmp_path / "preempt.started", proc)
        preempted = job_of(cluster, tmp_path, "preempt")
        scontrol(cluster, "requeue", preempted["id"])
        out, _ = proc.communicate(timeout=1200)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert (tmp_path / "timeout.txt").read_text().split() == ["attempt", "2"]
    assert (tmp_path / "preempt.txt").read_text().split() == ["attempt", "1"]
    states = {j["id"]: j["state"] for j in slurm_jobs(cluster)}
    assert states[timed["id"]] == "TIMEOUT"
    assert "Restarts=1" in scontrol(cluster, "show", "job", preempted["id"])
    assert states[preempted["id"]] == "COMPLETED"

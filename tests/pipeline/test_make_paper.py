"""`make paper` with no live results (issue 27): `ma paper`'s one line is the last thing it
prints (not buried in Snakemake's error report), and it exits 2."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.workflow import TEST_CONFIG, env

VENV = Path(sys.executable).parent


@pytest.mark.slow(4)
def test_make_paper_without_live_results_ends_with_the_one_line(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    shutil.copy2(ROOT / "Makefile", tmp_path / "Makefile")
    smk = f"{VENV}/snakemake -s {ROOT}/Snakefile --configfile {TEST_CONFIG}"
    done = subprocess.run(["make", "--no-print-directory", f"VENV={VENV}", "-o", f"{VENV}/ma",
                           f"SMK={smk}", "paper"], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    # make's own trailer (make[1]: when the suite itself runs under `make test`)
    lines = [line for line in done.stderr.splitlines()
             if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert lines[-1].startswith("ma paper: error: results/runs/confirmatory/outcomes.parquet "
                                "does not exist"), lines[-5:]

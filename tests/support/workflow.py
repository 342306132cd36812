"""Helpers to run the real Snakefile in a scratch directory on the tiny test designs
(config/test/), with `ma` on PATH and no provider key unless a test sets one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, procs

BIN = Path(sys.executable).parent
SNAKEMAKE = BIN / "snakemake"
TEST_CONFIG = "config/test/workflow.yaml"


def env(**extra: str) -> dict[str, str]:
    e = procs.server_env()  # no provider key or URL
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    e.update(extra)
    return e


def smk_cmd(*args: str, test_config: bool = True) -> list[str]:
    cmd = [str(SNAKEMAKE), "-s", str(ROOT / "Snakefile")]
    if test_config:
        cmd += ["--configfile", TEST_CONFIG]
    return cmd + list(args)


def smk(workdir: Path, *args: str, test_config: bool = True, timeout: float = 300,
        **extra_env: str) -> subprocess.CompletedProcess:
    """``snakemake ARGS`` in ``workdir`` (forked: ``procs``), its output captured."""
    return procs.run(smk_cmd(*args, test_config=test_config), cwd=workdir,
                     env=env(**extra_env), timeout=timeout)

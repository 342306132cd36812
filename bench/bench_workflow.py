"""Workflow overhead: the same design run by `snakemake --cores N` and by `ma design --workers N`
in fresh scratch directories (same runs, same outcomes), plus the time of a dry run of the
largest target. Prints seconds and the ratio snakemake / ma design measured in this run.

    .venv/bin/python bench/bench_workflow.py [--design exploratory] [--cores 2] [--test-designs]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def timed(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def scratch() -> Path:
    d = Path(tempfile.mkdtemp(prefix="bench_wf_"))
    shutil.copytree(ROOT / "config", d / "config")
    return d


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--design", default="exploratory")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--test-designs", action="store_true", help="the tiny designs of config/test")
    args = p.parse_args()
    designs = "config/test/designs" if args.test_designs else "config/designs"
    cfg = ["--configfile", "config/test/workflow.yaml"] if args.test_designs else []
    smk = [str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), args.design, *cfg]

    dirs = [scratch(), scratch()]
    try:
        t_ma = timed([str(BIN / "ma"), "design", f"{designs}/{args.design}.yaml", "--workers",
                      str(args.cores), "--quiet"], dirs[0])
        t_smk = timed([*smk, "--cores", str(args.cores)], dirs[1])
        t_noop = timed([*smk, "--cores", str(args.cores)], dirs[1])
        t_dry = timed([str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), "-n", "protocol"],
                      dirs[1])
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    print(f"design {args.design} ({designs}), {args.cores} cores")
    print(f"ma design          {t_ma:8.2f} s")
    print(f"snakemake          {t_smk:8.2f} s   ratio {t_smk / t_ma:.2f} x ma design")
    print(f"snakemake (no-op)  {t_noop:8.2f} s")
    print(f"dry run protocol   {t_dry:8.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Workflow overhead: the same design run by `snakemake --cores N` and by `ma design --workers N`
in fresh scratch directories, then a no-op snakemake invocation and a dry run of the largest
target. Prints wall seconds, CPU seconds (user + system of every process each path started) and
the ratios snakemake / ma design measured in this run (target for CPU: <= 1.3), and checks that
both paths gathered the same outcomes.parquet, byte for byte.

    .venv/bin/python bench/bench_workflow.py [--design exploratory] [--cores 2] [--test-designs]
        [--snakefile PATH]   # e.g. an older checkout's Snakefile, for a before/after figure
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s of the processes it started, user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def scratch() -> Path:
    d = Path(tempfile.mkdtemp(prefix="bench_wf_"))
    shutil.copytree(ROOT / "config", d / "config")
    return d


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--design", default="exploratory")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--test-designs", action="store_true", help="the tiny designs of config/test")
    p.add_argument("--snakefile", default=str(ROOT / "Snakefile"))
    args = p.parse_args()
    designs = "config/test/designs" if args.test_designs else "config/designs"
    cfg = ["--configfile", "config/test/workflow.yaml"] if args.test_designs else []
    smk = [str(BIN / "snakemake"), "-s", args.snakefile, args.design, *cfg]
    gathered = f"results/runs/{args.design}/outcomes.parquet"

    dirs = [scratch(), scratch()]
    try:
        t_ma = timed([str(BIN / "ma"), "design", f"{designs}/{args.design}.yaml", "--workers",
                      str(args.cores), "--quiet"], dirs[0])
        t_smk = timed([*smk, "--cores", str(args.cores)], dirs[1])
        t_noop = timed([*smk, "--cores", str(args.cores)], dirs[1])
        t_dry = timed([str(BIN / "snakemake"), "-s", args.snakefile, "-n", "protocol"], dirs[1])
        same = (dirs[0] / gathered).read_bytes() == (dirs[1] / gathered).read_bytes()
        if not same:
            import polars as pl

            a, b = (pl.read_parquet(d / gathered) for d in dirs)
            differ = [c for c in a.columns if c in b.columns and not a[c].equals(b[c])]
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    print(f"design {args.design} ({designs}), {args.cores} cores, {args.snakefile}")
    print(f"{'':18} {'wall s':>8} {'CPU s':>8}")
    print(f"ma design          {t_ma[0]:8.2f} {t_ma[1]:8.2f}")
    print(f"snakemake          {t_smk[0]:8.2f} {t_smk[1]:8.2f}   ratio wall "
          f"{t_smk[0] / t_ma[0]:.2f}, CPU {t_smk[1] / t_ma[1]:.2f} x ma design (CPU target <= 1.3)")
    print(f"snakemake (no-op)  {t_noop[0]:8.2f} {t_noop[1]:8.2f}")
    print(f"dry run protocol   {t_dry[0]:8.2f} {t_dry[1]:8.2f}")
    if same:
        print(f"{gathered}: identical bytes on both paths")
        return 0
    print(f"{gathered}: DIFFERS between the paths (columns: {', '.join(differ) or 'bytes only'})")
    return 1


if __name__ == "__main__":
    sys.exit(main())

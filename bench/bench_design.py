"""Benchmark: the whole exploratory design (14 cells x seeds 1-3, mock) on 2 worker processes.

Prints wall time and per-run time, against a baseline measured in the same process: the same
design's first seed of every cell run serially on 1 worker. The ratio says what the process pool
buys on this machine (process start-up included). Usage:

    .venv/bin/python bench/bench_design.py [--workers 2] [--design config/designs/exploratory.yaml]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from market_agents.analysis.scoring import score_run
from market_agents.layout import run_dir
from market_agents.protocol.design import load_design
from market_agents.protocol.steps import run_design, sensitivity, sensitivity_grid, write_gather


def timed(design, root: Path, workers: int, max_seeds: int | None) -> tuple[float, int]:
    started = time.perf_counter()
    counts = run_design(design, max_seeds=max_seeds, workers=workers, root=root, progress=False)
    return time.perf_counter() - started, counts["ran"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="config/designs/exploratory.yaml")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    design = load_design(args.design)
    with tempfile.TemporaryDirectory() as tmp:
        base_wall, base_runs = timed(design, Path(tmp) / "serial", 1, 1)
        wall, runs = timed(design, Path(tmp) / "pool", args.workers, None)
        pool = Path(tmp) / "pool"
        started = time.perf_counter()
        write_gather(design, root=pool)
        gather_s = time.perf_counter() - started
        started = time.perf_counter()
        for cell, seed in design.runs():
            score_run(run_dir(design.name, cell, seed, root=pool))
        score_s = time.perf_counter() - started
        started = time.perf_counter()
        sensitivity(design, sensitivity_grid(), root=pool)
        sens_s = time.perf_counter() - started
    serial_per_run, per_run = base_wall / base_runs, wall / runs
    print(f"design {design.name}: {runs} runs ({len(design.cells)} cells)")
    print(f"baseline (1 worker, {base_runs} runs): {base_wall:.1f} s, {serial_per_run:.2f} s/run")
    print(f"{args.workers} workers: wall {wall:.1f} s, {per_run:.2f} s/run (wall / runs)")
    print(f"gather: {gather_s:.2f} s; re-scoring every run: {score_s:.2f} s "
          f"({1000 * score_s / runs:.0f} ms/run); sensitivity grid (9 points): {sens_s:.2f} s")
    print(f"ratio serial s/run / pooled s/run: {serial_per_run / per_run:.2f}x")


if __name__ == "__main__":
    main()

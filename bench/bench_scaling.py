"""Engine scaling in the number of traders N: time and peak memory of one classical run.

Two series over N = 100, 300, 1,000, 3,000, 10,000 (600 ticks, 5 market makers, seeds 1..R):
- activity fixed: every trader decides every 20 ticks, so order flow grows with N;
- activity scaled by 100/N (protocol §5.4, the `library_1000` cell): `decision_interval`
  20 × N / 100, so order flow per tick stays that of N = 100 and only the population grows.

Each N runs in its own process (bench/engine_runs.py), so peak memory is that run's: the peak
resident set of the process, and the run's own part of it, the peak less the resident set after
the imports and config (what the first run imports lazily, a few MiB, counts in it). Time is the CPU
time of the run's process (wall time on a shared machine measures the other jobs). Exponents
are least-squares slopes of log(time) and log(run memory) on log(N): 1 means linear.

    .venv/bin/python bench/bench_scaling.py [--runs 2] [--max-n 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE_RUNS = [sys.executable, str(ROOT / "bench" / "engine_runs.py")]
SIZES = (100, 300, 1000, 3000, 10000)


def measure(n: int, interval: int, runs: int) -> dict:
    cmd = ENGINE_RUNS + [str(runs), "--set", f"population.n_traders={n}",
                         "--set", f"simulation.decision_interval={interval}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"N={n}: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(ys) on log(xs)."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return (sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True))
            / sum((a - mx) ** 2 for a in lx))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per N (median time)")
    parser.add_argument("--max-n", type=int, default=max(SIZES))
    args = parser.parse_args()
    sizes = [n for n in SIZES if n <= args.max_n]
    for label, interval_of in (("activity fixed (decision_interval 20)", lambda n: 20),
                               ("activity scaled by 100/N (decision_interval 20 N/100)",
                                lambda n: 20 * n // 100)):
        print(label)
        print(f"{'N':>7} {'interval':>8} {'decisions':>9} {'messages':>9} {'CPU s':>8} "
              f"{'us/decision':>11} {'peak MiB':>9} {'run MiB':>8}")
        times, mems = [], []
        for n in sizes:
            r = measure(n, interval_of(n), args.runs)
            t = statistics.median(r["cpu"])
            mem = r["rss_peak_mib"] - r["rss_before_mib"]
            times.append(t)
            mems.append(mem)
            dec = statistics.median(r["decisions"])
            msgs = statistics.median(r["messages"])
            print(f"{n:>7} {interval_of(n):>8} {dec:>9.0f} {msgs:>9.0f} {t:>8.3f} "
                  f"{t / dec * 1e6:>11.1f} {r['rss_peak_mib']:>9.1f} {mem:>8.1f}", flush=True)
        print(f"  fitted exponent in N: time {slope(sizes, times):.2f}, "
              f"run memory {slope(sizes, mems):.2f}\n")


if __name__ == "__main__":
    main()

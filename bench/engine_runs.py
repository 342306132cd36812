"""Run classical markets in-process and print one JSON line, for bench_engine.py and
bench_scaling.py (a separate process, so a bench can time, count instructions of, or measure the
memory of the engine alone, or of the engine at another git revision via PYTHONPATH).

    python bench/engine_runs.py RUNS [--set key=value ...] [--warmup] [--config PATH]

RUNS simulations of config/baseline.yaml (or PATH) with the dotted overrides, seeds 1..RUNS. Prints
per-run wall seconds and CPU seconds of this process (which other jobs on a shared machine
disturb far less), order/cancel messages per run, trader decisions per run, and the peak resident
memory of the process before and after the runs (MiB).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from market_agents.config import load_config

try:  # the engine's module after and before the package layout moved it (bench --against)
    from market_agents.sim.simulation import simulate
except ImportError:
    from market_agents.simulation import simulate

BASELINE = Path(__file__).resolve().parents[1] / "config" / "baseline.yaml"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", type=int)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--warmup", action="store_true", help="one untimed run first")
    parser.add_argument("--config", type=Path, default=BASELINE)
    args = parser.parse_args()
    config = load_config(args.config, args.set)
    if args.warmup:
        simulate(config, 1000, progress=False)
    rss_before = peak_rss_mib()
    times, cpu, messages, decisions = [], [], [], []
    for seed in range(1, args.runs + 1):
        start, start_cpu = time.perf_counter(), time.process_time()
        tables = simulate(config, seed, progress=False)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        messages.append(tables["orders"].height)
        decisions.append(int(tables["agents"]["n_decisions"].sum()))
    print(json.dumps({"times": times, "cpu": cpu, "messages": messages, "decisions": decisions,
                      "rss_before_mib": rss_before, "rss_peak_mib": peak_rss_mib()}))


if __name__ == "__main__":
    main()

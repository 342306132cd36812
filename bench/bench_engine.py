"""Engine speed: one classical baseline run in-process, the whole `ma run` process, and PAMS.

Every figure is a ratio against a baseline measured in the same run (the machine is shared):
- in-process: `simulate(baseline, seed)` against PAMS's CI2002 sample (100 FCN agents, 600
  steps), which runs in its own uv environment because PAMS needs numpy < 2;
- whole process: `ma run config/baseline.yaml` against `python -c "import numpy, polars,
  pydantic, yaml"` (the import floor no run can go below).

    .venv/bin/python bench/bench_engine.py [--repeats 7] [--no-pams]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MA = [sys.executable, "-m", "market_agents.cli"]


def timed(cmd: list[str], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
        out.append(time.perf_counter() - start)
    return out


def in_process(repeats: int) -> tuple[list[float], int]:
    from market_agents.config import load_config
    from market_agents.sim.simulation import simulate

    config = load_config(ROOT / "config" / "baseline.yaml")
    simulate(config, 1, progress=False)  # warm-up
    times, orders = [], 0
    for seed in range(1, repeats + 1):
        start = time.perf_counter()
        tables = simulate(config, seed, progress=False)
        times.append(time.perf_counter() - start)
        orders = tables["orders"].height
    return times, orders


def message_floor(n: int = 20000) -> float:
    """Seconds for the cheapest message: one limit order that rests, then expires.

    Every quote a market maker sends costs at least this, whatever else the run does."""
    from market_agents.config import ExchangeConfig
    from market_agents.market.exchange import Exchange
    from market_agents.market.types import BUY, Order

    ex = Exchange(ExchangeConfig(), 1, [100.0])
    ex.open_account(0, "market_maker", False, 1e9, 0)
    ex.seal()
    order = Order(BUY, 1, 99.0, 0, 1)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            ex.submit(0, order)
            ex.begin_tick(ex.tick + 1)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def pams(repeats: int) -> tuple[list[float], int] | None:
    cmd = ["uv", "run", "--quiet", "--no-project", "--with", "pams==0.3.0", "python",
           str(ROOT / "bench" / "pams_ci2002.py"), str(repeats + 1)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        print(f"PAMS not timed: {proc.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result["times"][1:], result["messages"]  # drop the warm-up run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-pams", action="store_true")
    args = parser.parse_args()
    med = statistics.median

    ours, n_orders = in_process(args.repeats)
    print(f"in-process baseline run (100 traders, 600 ticks): median {med(ours) * 1e3:.1f} ms "
          f"over {args.repeats} seeds; {n_orders} order/cancel messages per run")
    if not args.no_pams:
        timed_pams = pams(args.repeats)
        if timed_pams:
            theirs, their_orders = timed_pams
            print(f"PAMS CI2002 (100 FCN agents, 600 steps), same machine: median "
                  f"{med(theirs) * 1e3:.1f} ms; {their_orders} order/cancel messages per run")
            print(f"  ratio PAMS / ours, per run: {med(theirs) / med(ours):.2f}x; "
                  f"per message: {(med(theirs) / their_orders) / (med(ours) / n_orders):.2f}x "
                  f"(>1: ours faster)")
            floor = message_floor()
            print(f"  message floor: one order sent, rested and expired costs "
                  f"{floor * 1e6:.2f} us, so {n_orders} messages alone take "
                  f"{n_orders * floor * 1e3:.1f} ms; 2x PAMS leaves {med(theirs) / 2 * 1e3:.1f} ms "
                  f"for the whole run")

    with tempfile.TemporaryDirectory() as tmp:
        floor = timed([sys.executable, "-c", "import numpy, polars, pydantic, yaml"],
                      args.repeats)
        whole = timed(MA + ["run", "config/baseline.yaml", "--seed", "1", "--out",
                            f"{tmp}/run", "--quiet"], args.repeats)
    print(f"whole process `ma run`: median {med(whole):.3f} s; import floor "
          f"(numpy, polars, pydantic, yaml) {med(floor):.3f} s; "
          f"ratio {med(whole) / med(floor):.2f}x")


if __name__ == "__main__":
    main()

"""Live runs at once: a small live design through Snakemake with `--resources api=K`, K = 1, 2,
4, each against a fresh local fake API (a separate process) answering in a fixed latency.

A live run cannot be faster than its distinct decision ticks x latency (decisions due at one
tick go out together): its floor. K runs at once cannot beat the sum of the runs' floors / K.
Prints, per K: the live span (first live run's start to last one's end, from the run
manifests) and the whole snakemake wall time (gate, gather and start-up included), throughput
(runs per minute of live span) and its ratio to K = 1 measured in this run, and span / floor;
and checks that every K gathered the same outcomes (apart from the columns that say how answers
were served) and that the server answered each request key once.

    .venv/bin/python bench/bench_live.py [--latency 0.2] [--seeds 4] [--ticks 300] [--k 1 2 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from market_agents.llm.cache import ResponseCache

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GATHERED = "results/runs/live/outcomes.parquet"
SERVING = ["llm_cached_hits", "llm_usd_spent"]


def project(seeds: int, ticks: int) -> Path:
    d = Path(tempfile.mkdtemp(prefix="bench_live_"))
    shutil.copytree(ROOT / "config", d / "config")
    design = d / "config/test/designs/live.yaml"
    design.write_text(design.read_text().replace('seeds: "1-3"', f'seeds: "1-{seeds}"').replace(
        "simulation.ticks: 120", f"simulation.ticks: {ticks}"))
    return d


def run(k: int, args: argparse.Namespace) -> dict:
    d = project(args.seeds, args.ticks)
    log = d / "requests.jsonl"
    server = subprocess.Popen([sys.executable, "-m", "market_agents.testing.fakeserver",
                               "--port", "0", "--latency", str(args.latency), "--log", str(log)],
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split()[-1]
        env = {**os.environ, "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sk-bench-local",
               "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        cmd = [str(BIN / "snakemake"), "-s", str(ROOT / "Snakefile"), "--configfile",
               "config/test/workflow.yaml", "--cores", str(max(2, k)), "--resources", f"api={k}",
               "--", GATHERED]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"K={k}: snakemake failed\n{(done.stdout + done.stderr)[-3000:]}")
    finally:
        server.terminate()
        server.wait()
    runs = sorted((d / "results/runs/live").glob("*/seed*"))
    ends = [(r / "manifest.json").stat().st_mtime for r in runs]
    starts = [e - json.loads((r / "manifest.json").read_text())["wall_time_s"]
              for r, e in zip(runs, ends, strict=True)]
    ticks = [pl.read_parquet(r / "llm_decisions.parquet")["tick"].n_unique() for r in runs]
    cache = ResponseCache(d / "results/cache/live.sqlite", readonly=True)
    keys = len(cache)  # distinct request keys recorded
    cache.close()
    bodies = log.read_text().splitlines()
    out = {"k": k, "wall": wall, "span": max(ends) - min(starts), "runs": len(runs),
           "floor": sum(ticks) * args.latency / k, "requests": len(bodies), "keys": keys,
           "outcomes": pl.read_parquet(d / GATHERED).drop(SERVING)}
    shutil.rmtree(d, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="server seconds per answer")
    ap.add_argument("--seeds", type=int, default=4, help="live runs in the design")
    ap.add_argument("--ticks", type=int, default=300)
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    results = [run(k, args) for k in args.k]
    base = results[0]
    print(f"live design: {base['runs']} runs (5 LLM agents, {args.ticks} ticks), latency "
          f"{args.latency} s, {base['requests']} requests")
    print(f"{'K':>3} {'span s':>8} {'wall s':>8} {'runs/min':>9} {'x K=' + str(base['k']):>7} "
          f"{'floor s':>8} {'span/floor':>10}")
    same = True
    for r in results:
        tput = r["runs"] / r["span"] * 60
        same &= r["outcomes"].equals(base["outcomes"]) and r["requests"] == r["keys"]
        print(f"{r['k']:>3} {r['span']:8.1f} {r['wall']:8.1f} {tput:9.2f} "
              f"{base['span'] / r['span']:7.2f} {r['floor']:8.1f} {r['span'] / r['floor']:10.2f}")
    print("outcomes identical for every K, each request answered once" if same else
          "OUTCOMES OR REQUEST COUNTS DIFFER between K")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

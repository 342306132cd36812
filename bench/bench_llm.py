"""Benchmark: 25 LLM agents against the local fake API with 200 ms latency.

Decisions due at the same tick go out together, so a live run cannot be faster than
(distinct decision ticks x latency): the floor. The first ratio says how close the run gets
to it (the rest is simulation and HTTP overhead). The second compares a cached replay of the
same cell with the same cell on the mock provider (no cache): both make zero network calls.

    .venv/bin/python bench/bench_llm.py [--latency 0.2] [--ticks 600] [--seed 1]

The fake server runs as a separate process (python -m market_agents.testing.fakeserver).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from market_agents.config import Config
from market_agents.sim.runner import run_to_dir


def cell(ticks: int, llm: dict) -> Config:
    return Config.model_validate({"simulation": {"ticks": ticks},
                                  "population": {"llm_share": 0.25, "llm": llm}})


def timed(config: Config, seed: int, out: Path, cache: Path | None) -> tuple[float, Path]:
    started = time.perf_counter()
    run = run_to_dir(config, seed, out, cache=cache, progress=False)
    return time.perf_counter() - started, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="server seconds per answer")
    ap.add_argument("--ticks", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "market_agents.testing.fakeserver", "--port", "0",
         "--latency", str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split()[-1]
        os.environ["OPENAI_API_KEY"] = "sk-bench-local"
        os.environ["OPENAI_BASE_URL"] = f"{url}/v1"
        live = cell(args.ticks, {"provider_mix": {"openai": 1.0},
                                 "models": {"openai": "gpt-5.4-nano"}, "usd_cap": 5.0,
                                 "max_concurrency": 32,
                                 "providers": {"openai": {"max_concurrency": 32}}})
        mock = cell(args.ticks, {})
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            live_s, run = timed(live, args.seed, tmp / "live", tmp / "cache")
            replay_s, replay = timed(live, args.seed, tmp / "replay", tmp / "cache")
            mock_s, _ = timed(mock, args.seed, tmp / "mock", None)
            dec = pl.read_parquet(run / "llm_decisions.parquet")
            usage = json.loads((replay / "manifest.json").read_text())["llm_usage"]
    finally:
        server.terminate()
        server.wait(10)
    ticks = dec["tick"].n_unique()
    floor = ticks * args.latency
    per_tick = dec.group_by("tick").len()["len"]
    print(f"live run: {dec.height} decisions by {dec['slot'].n_unique()} LLM agents at "
          f"{ticks} distinct ticks (max {per_tick.max()} at one tick), latency "
          f"{args.latency:g} s")
    print(f"  wall {live_s:.2f} s, floor (ticks x latency) {floor:.2f} s, "
          f"ratio wall/floor {live_s / floor:.3f}")
    print(f"  mean recorded latency {dec['latency_s'].mean():.3f} s, "
          f"recorded usd {dec['usd'].sum():.4f}")
    print(f"cached replay: {replay_s:.2f} s (calls {usage['calls']}, cached_hits "
          f"{usage['cached_hits']:.2f}, usd_spent {usage['usd_spent']}); same cell on the "
          f"mock: {mock_s:.2f} s; ratio replay/mock {replay_s / mock_s:.3f}")


if __name__ == "__main__":
    main()

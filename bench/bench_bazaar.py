"""Benchmark: Bazaar episodes per second for each tier, scripted anchor and mock LLM.

Ratios are against a baseline measured in the same run: drawing the episode's scenario alone
(the seeded random world), so the figure says what the engine, parser and policy cost on top of
the random draws, independent of the machine. Usage:

    .venv/bin/python bench/bench_bazaar.py [--episodes 400]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from market_agents.bazaar.anchors import HONEST_ANCHOR
from market_agents.bazaar.play import play_policy
from market_agents.bazaar.scenario import draw
from market_agents.bazaar.tiers import TIERS, eval_seeds


def rate(fn, n: int) -> float:
    started = time.perf_counter()
    for s in eval_seeds(n):
        fn(s)
    return n / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=400)
    args = ap.parse_args()
    print(f"{'tier':13} {'policy':12} {'episodes/s':>11} {'draw/s':>9} {'cost vs draw':>12}")
    for name, tier in TIERS.items():
        policy = HONEST_ANCHOR[name]
        base = rate(lambda s, t=tier: draw(t, s), args.episodes)
        eps = rate(lambda s, n=name, p=policy: play_policy(n, s, p), args.episodes)
        print(f"{name:13} {policy:12} {eps:11.0f} {base:9.0f} {base / eps:11.1f}x")

    from market_agents.cli import main as ma

    with tempfile.TemporaryDirectory() as tmp:
        n = max(args.episodes // 10, 5)
        argv = ["bazaar", "eval", "--tier", "micro", "--provider", "mock", "--seeds", str(n),
                "--cache", f"{tmp}/cache"]
        started = time.perf_counter()
        ma([*argv, "--out", f"{tmp}/a"])
        cold = time.perf_counter() - started
        started = time.perf_counter()
        ma([*argv, "--out", f"{tmp}/b"])
        warm = time.perf_counter() - started
    print(f"mock LLM eval, {n} micro episodes: {cold:.2f} s cold, {warm:.2f} s replayed from "
          f"the cache ({cold / warm:.1f}x)")


if __name__ == "__main__":
    main()

"""Workflow overhead: the same design run by `snakemake --cores N` and by `ma design --workers N`,
alternated in one run (snakemake, ma design, snakemake, ma design, ...), each in a fresh
scratch directory, then a no-op snakemake invocation and a dry run of the largest target.
Prints per round the wall and CPU seconds (user + system of every process each path started),
then the medians and the median CPU ratio snakemake / ma design (target: <= 1.15), and checks
that every path of every round gathered the same outcomes.parquet, byte for byte.

With --breakdown every Python process either path starts records its own CPU seconds at exit,
and how much of them went to simulating runs (`protocol.steps.simulate`: the engine's imports
on a process's first run, the run) and to scoring them (`write_outcomes`), through a
`sitecustomize` module put first on PYTHONPATH; the rest of a process's CPU is its start-up
(interpreter, imports, loading and checking the design) and bookkeeping. Prints per path and
round the processes, their CPU, simulate, score and the rest, and the snakemake process's own
(Snakefile, DAG, scheduling). The hook costs next to nothing, but the headline figure is measured
without it (run the two separately).

The machine may be shared: alternating the two paths in one run exposes both to the same load,
and the medians of several rounds damp a busy moment. Compare ratios, not seconds.

    .venv/bin/python bench/bench_workflow.py [--rounds 3] [--design exploratory] [--cores 2]
        [--test-designs] [--ma-first] [--breakdown]
        [--snakefile PATH]   # e.g. an older checkout's Snakefile, for a before/after figure
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET = 1.15  # issue 38: snakemake at most 1.15x ma design in CPU (issue 34: 1.2)


HOOK = '''"""bench_workflow.py --breakdown: each Python process appends its CPU seconds at exit to
$BENCH_CPU_LOG, with those spent in protocol.steps.simulate and write_outcomes."""
import atexit, importlib.abc, importlib.machinery, json, os, sys, time

_log = os.environ.get("BENCH_CPU_LOG")
_spent = {"simulate": 0.0, "write_outcomes": 0.0, "runs": 0}


def _timed(module, name):
    inner = getattr(module, name)

    def outer(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            _spent[name] += time.process_time() - start
            _spent["runs"] += name == "simulate"
    setattr(module, name, outer)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "market_agents.protocol.steps":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _timed(module, "simulate")
            _timed(module, "write_outcomes")
        spec.loader.exec_module = exec_module
        return spec


def _record():
    t = os.times()
    with open(_log, "a") as f:
        f.write(json.dumps({"argv": sys.argv[:3], "cpu": t.user + t.system, **_spent}) + "\\n")


if _log:
    sys.meta_path.insert(0, _Finder())
    atexit.register(_record)
'''


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall s, CPU s of the processes it started, user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} (in {cwd}) failed, exit {done.returncode}:\n"
                 f"{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def columns(a: bytes, b: bytes) -> str:
    """The columns in which two gathered parquet files differ."""
    import io

    import polars as pl

    x, y = pl.read_parquet(io.BytesIO(a)), pl.read_parquet(io.BytesIO(b))
    return ", ".join(c for c in x.columns if c not in y.columns or not x[c].equals(y[c])) \
        or "bytes only"


def breakdown(log: Path, total: float) -> tuple[str, dict[str, float]]:
    """One line of what the processes of one path spent (``--breakdown``) and its figures."""
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    cpu = sum(r["cpu"] for r in rows)
    sim = sum(r["simulate"] for r in rows)
    score = sum(r["write_outcomes"] for r in rows)
    own = sum(r["cpu"] for r in rows if "snakemake" in r["argv"][0])
    workers = [r for r in rows if r["runs"]]
    f = {"processes": len(rows), "cpu": cpu, "simulate": sim, "score": score,
         "rest": cpu - sim - score, "snakemake": own, "not python": total - cpu,
         "rest per process with runs": (sum(r["cpu"] - r["simulate"] - r["write_outcomes"]
                                            for r in workers) / max(1, len(workers)))}
    line = (f"{f['processes']:>3} python processes {cpu:7.2f} = simulate {sim:7.2f} "
            f"({sum(r['runs'] for r in rows)} runs) + score {score:5.2f} + rest {f['rest']:5.2f} "
            f"(snakemake itself {own:4.2f}; each process that ran runs "
            f"{f['rest per process with runs']:4.2f}); not python {f['not python']:4.2f}")
    return line, f


def scratch() -> Path:
    d = Path(tempfile.mkdtemp(prefix="bench_wf_"))
    shutil.copytree(ROOT / "config", d / "config")
    return d


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--design", default="exploratory")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="pairs of runs, alternated (default 3)")
    p.add_argument("--ma-first", action="store_true", help="each round starts with ma design")
    p.add_argument("--test-designs", action="store_true", help="the tiny designs of config/test")
    p.add_argument("--snakefile", default=str(ROOT / "Snakefile"))
    p.add_argument("--breakdown", action="store_true",
                   help="where each path's CPU goes: simulate, score, the rest (module docstring)")
    args = p.parse_args()
    hook = Path(tempfile.mkdtemp(prefix="bench_wf_hook_")) if args.breakdown else None
    if hook is not None:
        (hook / "sitecustomize.py").write_text(HOOK)
    split: dict[str, list[dict[str, float]]] = {}
    designs = "config/test/designs" if args.test_designs else "config/designs"
    cfg = ["--configfile", "config/test/workflow.yaml"] if args.test_designs else []
    smk = [str(BIN / "snakemake"), "-s", args.snakefile, args.design, *cfg]
    gathered = f"results/runs/{args.design}/outcomes.parquet"
    paths = {
        "snakemake": [*smk, "--cores", str(args.cores)],
        "ma design": [str(BIN / "ma"), "design", f"{designs}/{args.design}.yaml", "--workers",
                      str(args.cores), "--quiet"],
    }
    order = list(paths)[::-1] if args.ma_first else list(paths)

    print(f"design {args.design} ({designs}), {args.cores} cores, {args.rounds} rounds "
          f"alternated ({' / '.join(order)}), {args.snakefile}", flush=True)
    print(f"{'round':>5} {'path':<10} {'wall s':>8} {'CPU s':>8}", flush=True)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in paths}
    reference: bytes | None = None
    differ: list[str] = []
    last = None
    for r in range(1, args.rounds + 1):
        for name in order:
            d = scratch()
            env = None
            if hook is not None:
                log = d.parent / f"{d.name}.cpu.jsonl"
                env = {**os.environ, "BENCH_CPU_LOG": str(log), "PYTHONPATH": os.pathsep.join(
                    x for x in (str(hook), os.environ.get("PYTHONPATH")) if x)}
            try:
                t = timed(paths[name], d, env)
                data = (d / gathered).read_bytes()
                if reference is None:
                    reference = data
                elif data != reference:
                    differ.append(f"round {r} {name} (columns: {columns(reference, data)})")
                if name == "snakemake" and r == args.rounds:
                    t_noop = timed(paths[name], d)
                    t_dry = timed([str(BIN / "snakemake"), "-s", args.snakefile, "-n", "protocol",
                                   *cfg], d)
                    last = (t_noop, t_dry)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            times[name].append(t)
            print(f"{r:>5} {name:<10} {t[0]:8.2f} {t[1]:8.2f}", flush=True)
            if hook is not None:
                line, f = breakdown(log, t[1])
                log.unlink()
                split.setdefault(name, []).append(f)
                print(f"{'':>16} {line}", flush=True)
        s, m = times["snakemake"][-1], times["ma design"][-1]
        print(f"{r:>5} {'ratio':<10} {s[0] / m[0]:8.2f} {s[1] / m[1]:8.2f}", flush=True)

    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in times.items()}
    ratios = [(s[0] / m[0], s[1] / m[1])
              for s, m in zip(times["snakemake"], times["ma design"], strict=True)]
    cpu_ratio = statistics.median(c for _, c in ratios)
    print("median:")
    for k, (w, c) in med.items():
        print(f"      {k:<10} {w:8.2f} {c:8.2f}")
    print(f"CPU ratio snakemake / ma design: median of rounds {cpu_ratio:.2f} (each: "
          f"{', '.join(f'{c:.2f}' for _, c in ratios)}), of medians "
          f"{med['snakemake'][1] / med['ma design'][1]:.2f} (target <= {TARGET}); wall: median "
          f"of rounds {statistics.median(w for w, _ in ratios):.2f}")
    for name, figures in split.items():
        print(f"median {name}: " + ", ".join(
            f"{k} {statistics.median(f[k] for f in figures):.2f}" for k in figures[0]))
    if split:
        extra = [s["rest"] + s["not python"] - m["rest"] - m["not python"]
                 for s, m in zip(split["snakemake"], split["ma design"], strict=True)]
        print(f"snakemake's extra CPU beyond simulating and scoring (rest + not python, less "
              f"ma design's): median {statistics.median(extra):.2f} s (each: "
              f"{', '.join(f'{x:.2f}' for x in extra)})")
        shutil.rmtree(hook, ignore_errors=True)
    if last is not None:
        (nw, nc), (dw, dc) = last
        print(f"snakemake no-op: {nw:.2f} s wall, {nc:.2f} CPU s; dry run protocol: {dw:.2f} s "
              f"wall, {dc:.2f} CPU s")
    if not differ:
        print(f"{gathered}: identical bytes on every path of every round")
        return 0
    print(f"{gathered}: DIFFERS from round 1's {order[0]} in: {', '.join(differ)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())

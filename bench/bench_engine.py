"""Engine speed: our classical market against PAMS on equal work, the engine against an earlier
revision of itself, and the whole `ma run` process.

Every figure is a ratio against a baseline measured in the same run, and times are CPU times of
the measured process (the machine is shared: wall time would measure the other jobs):
- equal-work pairs (bench/README.md, section "bench_engine.py", says what each means): our
  protocol market (5 market makers quoting every tick, 95 traders deciding every 20 ticks,
  about 8,400 messages) against PAMS 0.3.0 with 5 of its MarketMakerAgents and 95 FCN agents
  (about 9,000 messages); our smallest market (1 market maker, one trader decision per tick,
  about 1,700 messages) against PAMS's CI2002 sample (600 messages); and the earlier, unequal
  pair (protocol against CI2002).
  Per run, per message, and with --callgrind per run in instructions (valgrind's callgrind; the
  instructions of one run are those of a 2-run process less those of a 1-run process, so start-up
  and imports cancel). PAMS runs in its own uv environment (it needs numpy < 2).
- --against REF: the protocol market on the engine at git revision REF (default: 92ab1d5, the
  merge of the profile-led speed-up) against this tree, each in its own process, alternately;
- N-scaling: N = 10,000 traders against N = 100 with activity scaled by 100/N
  (`decision_interval` 20 N/100, the same order flow: protocol §5.4's large populations), each
  in its own process, alternately (bench_scaling.py gives the whole series);
- whole process: `ma run config/baseline.yaml` against `python -c "import numpy, polars,
  pydantic, yaml"` (the import floor no run can go below).

    .venv/bin/python bench/bench_engine.py [--repeats 7] [--no-pams] [--callgrind]
                                           [--against REF | --no-against] [--no-scaling]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MA = [sys.executable, "-m", "market_agents.cli"]
ENGINE_RUNS = [sys.executable, str(ROOT / "bench" / "engine_runs.py")]
PAMS = ["uv", "run", "--quiet", "--no-project", "--with", "pams==0.3.0"]
PAMS_SCRIPT = str(ROOT / "bench" / "pams_workloads.py")
# The merge of the profile-led speed-up (issue 16): the engine must stay at least as fast as
# it was there (issue 26); --against compares with it. 3d92a05 is the commit before that speed-up.
BEFORE_SPEEDUP = "92ab1d5"

OURS = {
    "protocol": [],  # config/baseline.yaml as it is
    "smallest": ["population.n_market_makers=1", "simulation.decision_interval=99"],
}
PAIRS = [  # (what the pair is, our workload, PAMS workload)
    ("equal work: protocol market vs PAMS with 5 market makers", "protocol", "market_makers"),
    ("equal work: our smallest market vs PAMS CI2002", "smallest", "ci2002"),
    ("unequal work (earlier figure): protocol market vs PAMS CI2002", "protocol", "ci2002"),
]


def overrides(workload: str) -> list[str]:
    return [arg for kv in OURS[workload] for arg in ("--set", kv)]


def run_json(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ours(workload: str, repeats: int, env: dict[str, str] | None = None) -> dict:
    return run_json(ENGINE_RUNS + [str(repeats), "--warmup"] + overrides(workload), env)


def pams(workload: str, repeats: int) -> dict:
    result = run_json(PAMS + ["python", PAMS_SCRIPT, workload, str(repeats + 1)])
    return {k: v[1:] for k, v in result.items()}  # drop the warm-up run


def instructions(cmd: list[str], env: dict[str, str] | None = None) -> int:
    """Instructions executed by the process ``cmd``, under callgrind."""
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    # `uv run` (PAMS) starts valgrind inside its environment; ours runs under it directly.
    cmd = cmd[:len(PAMS)] + valgrind + cmd[len(PAMS):] if cmd[:len(PAMS)] == PAMS else (
        valgrind + cmd)
    # A fixed hash seed: string hashing decides dict and set layouts, and so a few % of the count.
    env = {**(env or os.environ), "PYTHONHASHSEED": "0"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"callgrind failed: {proc.stderr.strip()[-400:]}")
    return int(found.group(1))


def instructions_per_run(kind: str, workload: str, env: dict[str, str] | None = None,
                         extra: tuple[str, ...] = ()) -> tuple[int, int]:
    """Instructions of one run (a 2-run process less a 1-run process: start-up and imports
    cancel) and that run's messages. ``env``/``extra``: our engine at another revision."""
    def cmd(runs: int) -> list[str]:
        if kind == "ours":
            return ENGINE_RUNS + [str(runs), *overrides(workload), *extra]
        return PAMS + ["python", PAMS_SCRIPT, workload, str(runs)]

    second = run_json(cmd(2), env)["messages"][1]
    return instructions(cmd(2), env) - instructions(cmd(1), env), second


def equal_work(repeats: int, callgrind: bool) -> None:
    med = statistics.median
    timed = {("ours", w): ours(w, repeats) for w in OURS}
    try:
        for w in ("market_makers", "ci2002"):
            timed[("pams", w)] = pams(w, repeats)
    except RuntimeError as err:
        print(f"PAMS not timed: {err}", file=sys.stderr)
    print(f"{'workload':<28} {'CPU ms/run':>10} {'messages':>9} {'us/message':>11}")
    for (kind, w), r in timed.items():
        ms, msgs = med(r["cpu"]) * 1e3, med(r["messages"])
        print(f"{kind + ' ' + w:<28} {ms:10.1f} {msgs:9.0f} {ms * 1e3 / msgs:11.2f}")
    counted = {}
    if callgrind:
        for key in timed:
            counted[key] = instructions_per_run(*key)
    for label, mine, theirs in PAIRS:
        if ("pams", theirs) not in timed:
            continue
        a, b = timed[("ours", mine)], timed[("pams", theirs)]
        per_run = med(b["cpu"]) / med(a["cpu"])
        per_msg = (med(b["cpu"]) / med(b["messages"])) / (med(a["cpu"]) / med(a["messages"]))
        line = f"{label}: PAMS / ours per run {per_run:.2f}x, per message {per_msg:.2f}x"
        if counted:
            (ia, ma), (ib, mb) = counted[("ours", mine)], counted[("pams", theirs)]
            line += (f"; instructions per run {ib / 1e6:.0f}M / {ia / 1e6:.0f}M = {ib / ia:.1f}x, "
                     f"per message {(ib / mb) / (ia / ma):.1f}x")
        print(line + " (>1: ours faster)")


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
        start = time.process_time()
        for _ in range(n):
            ex.submit(0, order)
            ex.begin_tick(ex.tick + 1)
        best = min(best, (time.process_time() - start) / n)
    return best


def checkout(ref: str, dest: Path) -> Path:
    """``src/`` and ``config/`` of git revision ``ref`` under ``dest``."""
    archive = subprocess.run(["git", "archive", ref, "src", "config"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def against(ref: str, repeats: int, callgrind: bool) -> None:
    """The protocol market on the engine at ``ref`` and on this tree, alternately, 3 rounds."""
    med = statistics.median
    with tempfile.TemporaryDirectory() as tmp:
        old = checkout(ref, Path(tmp))
        env_old = {**os.environ, "PYTHONPATH": str(old / "src")}
        config_old = ("--config", str(old / "config" / "baseline.yaml"))
        t_old, t_new, same = [], [], True
        for _ in range(3):
            a = run_json(ENGINE_RUNS + [str(repeats), "--warmup", *config_old], env_old)
            b = ours("protocol", repeats)
            t_old += a["cpu"]
            t_new += b["cpu"]
            same &= a["messages"] == b["messages"]
        print(f"engine at {ref}: median {med(t_old) * 1e3:.1f} CPU ms/run; this tree: "
              f"{med(t_new) * 1e3:.1f} CPU ms/run; speed-up {med(t_old) / med(t_new):.2f}x "
              f"({len(t_new)} runs each; same messages per seed: {same})")
        if not same:  # another market (the classical traders changed): per message too
            m_old, m_new = med(a["messages"]), med(b["messages"])
            print(f"  messages per run: {m_old:.0f} at {ref}, {m_new:.0f} here; speed-up per "
                  f"message {(med(t_old) / m_old) / (med(t_new) / m_new):.2f}x")
        if callgrind:
            i_old, _ = instructions_per_run("ours", "protocol", env_old, config_old)
            i_new, _ = instructions_per_run("ours", "protocol")
            print(f"  instructions per run: {i_old / 1e6:.0f}M at {ref}, {i_new / 1e6:.0f}M "
                  f"here; ratio {i_old / i_new:.2f}x")


def scaling(repeats: int, large: int = 10000) -> None:
    """N = ``large`` against N = 100 with activity scaled by 100/N, alternately, 3 rounds."""
    med = statistics.median
    cpu: dict[int, list[float]] = {100: [], large: []}
    for _ in range(3):
        for n in cpu:
            r = run_json(ENGINE_RUNS + [str(repeats), "--warmup",
                                        "--set", f"population.n_traders={n}",
                                        "--set", f"simulation.decision_interval={20 * n // 100}"])
            cpu[n] += r["cpu"]
    ratio = med(cpu[large]) / med(cpu[100])
    print(f"N-scaling, activity scaled by 100/N: N = 100 median {med(cpu[100]) * 1e3:.1f} CPU "
          f"ms/run, N = {large:,} {med(cpu[large]) * 1e3:.1f}; ratio {ratio:.2f}x "
          f"(target <= 2x; {len(cpu[100])} runs each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-pams", action="store_true")
    parser.add_argument("--callgrind", action="store_true",
                        help="also count instructions per run (valgrind; several minutes)")
    parser.add_argument("--against", default=BEFORE_SPEEDUP, metavar="REF",
                        help=f"git revision to compare the engine with (default {BEFORE_SPEEDUP})")
    parser.add_argument("--no-against", action="store_true")
    parser.add_argument("--no-scaling", action="store_true")
    args = parser.parse_args()
    med = statistics.median

    if args.no_pams:
        r = ours("protocol", args.repeats)
        print(f"protocol market: median {med(r['cpu']) * 1e3:.1f} CPU ms/run, "
              f"{med(r['messages']):.0f} messages")
    else:
        equal_work(args.repeats, args.callgrind)
    floor = message_floor()
    print(f"message floor: one order sent, rested and expired costs {floor * 1e6:.2f} us")
    if not args.no_against:
        against(args.against, args.repeats, args.callgrind)
    if not args.no_scaling:
        scaling(args.repeats)

    with tempfile.TemporaryDirectory() as tmp:
        floor_s = [timed_s([sys.executable, "-c", "import numpy, polars, pydantic, yaml"])
                   for _ in range(args.repeats)]
        whole = [timed_s(MA + ["run", "config/baseline.yaml", "--seed", "1", "--out",
                               f"{tmp}/run{i}", "--quiet"]) for i in range(args.repeats)]
    print(f"whole process `ma run`: median {med(whole):.3f} CPU s; import floor "
          f"(numpy, polars, pydantic, yaml) {med(floor_s):.3f} s; "
          f"ratio {med(whole) / med(floor_s):.2f}x")


def timed_s(cmd: list[str]) -> float:
    """CPU seconds (user + system) of the process ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


if __name__ == "__main__":
    main()

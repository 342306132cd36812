"""Run the fault corpus (faults/cases.yaml) and count what must never happen.

Each case is one ``ma`` command in a fresh scratch project (a checkout's markers, a source
file, a folder of the user's, a results root with a spend record), optionally against the
local fake provider server with a fault, and is judged by what it leaves:

- **traceback**: ``Traceback`` on stdout or stderr;
- **wrong outcome**: a case that must be refused (exit 2, one line on stderr) and was not, or
  a case that must finish (exit 0) and did not;
- **silent acceptance that pays**: a case that must be refused sent a request to the server;
- **paid and not recorded**: answers the server wrote in full (HTTP 200 with a billable body)
  that are neither stored in the run's response cache nor charged at their worst case in its
  record (``llm_usage.worst_case_charges`` of its manifest or failed record);
- **removed**: a file of the scratch project that was there before and is gone or changed.

    .venv/bin/python faults/run.py              # every case; exit 1 if any count is not 0
    .venv/bin/python faults/run.py --only out-  # the cases whose name starts with out- (or
                                                # with any of several prefixes)
    .venv/bin/python faults/run.py --workers 4  # four cases at once
    .venv/bin/python faults/run.py --fresh      # a new interpreter per case (see below)

Each case's ``ma`` is its own process: its argv, environment, working directory, output
streams, signals and exit status are the case's, and it ends through the interpreter's normal
exit. By default it is forked from one process (``market_agents.testing.zygote``) that has
imported the libraries every case imports (:data:`PRELOAD`: the provider SDKs, pydantic, numpy,
the config models), because starting Python was most of the corpus's time: ``import
anthropic`` alone is 1.1 CPU s of a 2 CPU s case. polars is never preloaded (it starts threads
at import, and a fork of a process with threads may deadlock), nor ``market_agents.cli``,
which runs as ``__main__`` as under ``python -m``. ``--fresh`` starts ``python -m
market_agents.cli`` per case instead; ``tests/test_fault_corpus.py`` checks both ways judge
cases alike.

The corpus is kept apart from the test suite (tests/test_fault_corpus.py runs it whole as one
test): its cases are the ones issue 33's findings came from, and more of their kind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from market_agents.testing.fakeserver import FakeAPI
from market_agents.testing.zygote import Zygote

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECRET = "sk-fault-corpus-NEVER-PRINT-0001"
# A small live run: 5 LLM traders deciding 5 times each (25 requests at most).
LIVE = {"simulation.ticks": 120, "simulation.burn_in": 20, "population.n_traders": 20,
        "population.n_market_makers": 2, "population.llm_share": 0.25,
        "population.llm.usd_cap": 0.5}
ROUTES = {
    "openai": {"population.llm.provider_mix": "{openai: 1.0}",
               "population.llm.models": "{openai: gpt-5.4-nano}"},
    "anthropic": {"population.llm.provider_mix": "{anthropic: 1.0}",
                  "population.llm.models": "{anthropic: claude-haiku-5-5}"},
    "local": {"population.llm.provider_mix": "{local: 1.0}",
              "population.llm.models": "{local: qwen3-4b}",
              "population.llm.providers": "{local: {kind: openai_compatible, base_url: "
                                          "'{url}/v1'}}"},
}
COUNTS = ("traceback", "wrong_outcome", "silent_paying", "paid_unrecorded", "removed")
# What the zygote imports before it forks a case: what every `ma run` of a live route imports,
# polars excepted (market_agents.testing.zygote); the package first, which keeps numpy's BLAS
# to one thread (a thread started before the forks makes the zygote refuse). The tests' live
# `ma` processes are forked from the same list (tests/support/procs.py).
PRELOAD = ("market_agents", "numpy", "yaml", "pydantic", "httpx", "openai", "anthropic",
           "market_agents.config", "market_agents.llm.client",
           "market_agents.llm.providers.openai_responses",
           "market_agents.llm.providers.openai_compatible",
           "market_agents.llm.providers.anthropic_messages")


def scratch(root: Path) -> Path:
    """A scratch project like a researcher's checkout."""
    proj = root / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'scratch'\n")
    (proj / "config").mkdir()
    shutil.copy(ROOT / "config" / "baseline.yaml", proj / "config" / "baseline.yaml")
    shutil.copy(ROOT / "config" / "prices.yaml", proj / "config" / "prices.yaml")
    (proj / "src").mkdir()
    (proj / "src" / "model.py").write_text("x = 1\n")
    (proj / "precious_dir").mkdir()
    (proj / "precious_dir" / "precious.txt").write_text("irreplaceable\n")
    spend = proj / "results" / "manifests" / "spend"
    spend.mkdir(parents=True)
    (spend / "0000.json").write_text(json.dumps({
        "kind": "run", "out": str(proj / "earlier"), "design": None, "planned_usd": 1.0,
        "worst_usd": 1.0, "spent_usd": 0.5}))
    return proj


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` outside run directories and response caches."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and not any((q / "manifest.json").exists() or (q / "cache.db").exists()
                                   for q in p.parents):
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def fill(value: Any, ctx: dict[str, str]) -> Any:
    """``{name}`` placeholders of a case filled from ``ctx`` (strings only)."""
    if isinstance(value, str):
        for k, v in ctx.items():
            value = value.replace("{" + k + "}", v)
        return value
    if isinstance(value, list):
        return [fill(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, ctx) for k, v in value.items()}
    return value


def recorded(proj: Path, out: Path | None) -> int:
    """Answers the run stored in its cache plus attempts it charged without storing."""
    n = 0
    cache = proj / "cache"
    if (cache / "cache.db").exists():
        from market_agents.llm.cache import CacheError, ResponseCache

        try:
            c = ResponseCache(cache, readonly=True)
        except CacheError:  # not the run's cache (a foreign database): nothing stored there
            c = None
        if c is not None:
            n += len(c)
            c.close()
    for record in ([out / "manifest.json", out.with_name(out.name + ".failed.json")]
                   if out is not None else []):
        if record.exists():
            data = json.loads(record.read_text())
            usage = data.get("llm_usage") or data
            # unparseable answers are stored in the cache and charged: count them once
            n += sum(int(c.get("n") or 0) for k, c in
                     (usage.get("worst_case_charges") or {}).items() if k != "unparseable")
            break
    return n


def run_case(case: dict[str, Any], timeout: float, zyg: Zygote | None = None) -> dict[str, Any]:
    """Run one case in a fresh scratch project; return what it left, counted. ``zyg``: fork
    its ``ma`` from there (None: a new interpreter)."""
    with tempfile.TemporaryDirectory(prefix="ma-fault-") as tmp:
        proj = scratch(Path(tmp))
        server = case.get("server")
        api = FakeAPI(**(server or {})).start() if server is not None or case.get("route") \
            else None
        try:
            url = api.url if api is not None else "http://127.0.0.1:9"
            ctx = {"project": str(proj), "tmp": tmp, "url": url, "root": str(ROOT),
                   "baseline": str(proj / "config" / "baseline.yaml")}
            for name, text in (case.get("files") or {}).items():
                path = proj / fill(name, ctx)
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(text, str) and text.startswith("hex:"):
                    path.write_bytes(bytes.fromhex(text[4:]))
                elif isinstance(text, str) and text.startswith("sqlite:"):
                    with contextlib.closing(sqlite3.connect(path)) as db:
                        db.executescript(text[7:])
                else:
                    path.write_text(fill(text, ctx))
            argv = [str(a) for a in fill(case["argv"], ctx)]
            out = None
            if case.get("route"):
                sets = {**LIVE, **ROUTES[case["route"]], **(case.get("sets") or {})}
                for k, v in sets.items():
                    argv += ["--set", f"{k}={fill(str(v), ctx)}"]
                argv += ["--cache", str(proj / "cache"), "--quiet"]
            else:
                for k, v in (case.get("sets") or {}).items():
                    argv += ["--set", f"{k}={fill(str(v), ctx)}"]
            if "--out" in argv:
                out = proj / argv[argv.index("--out") + 1]
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("OPENAI_", "ANTHROPIC_", "MARKET_AGENTS_"))
                   and k.lower() not in ("all_proxy", "http_proxy", "https_proxy")}
            env.update(OPENAI_API_KEY=SECRET, ANTHROPIC_API_KEY=SECRET,
                       OPENAI_BASE_URL=f"{url}/v1", ANTHROPIC_BASE_URL=url)
            env.update(fill(case.get("env") or {}, ctx))
            before = files(proj.parent)
            started = time.perf_counter()
            output = ""
            for _ in range(int(case.get("repeat", 1))):  # the same command again, same server
                cwd = fill(case.get("cwd", "{project}"), ctx)
                cmd = [sys.executable, "-m", "market_agents.cli", *argv]
                proc = (zyg.run(cmd, cwd=cwd, env=env, timeout=timeout) if zyg is not None else
                        subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                                       timeout=timeout))
                output += proc.stdout + proc.stderr
            after = files(proj.parent)
            err = proc.stderr.strip()
            expect = case["expect"]
            refused = proc.returncode == 2 and len(err.splitlines()) == 1
            ok = {"refused": refused, "ok": proc.returncode == 0,
                  "stopped": proc.returncode != 0 and len(err.splitlines()) == 1}[expect]
            if api is not None:  # every handler done: a body being written is counted or not
                api.wait_idle(timeout=60)
            answered = api.answered if api is not None else 0
            requests = len(api.requests) if api is not None else 0
            kept = recorded(proj, out)
            return {
                "name": case["name"], "exit": proc.returncode, "seconds":
                round(time.perf_counter() - started, 2), "requests": requests,
                "answered": answered, "recorded": kept,
                "line": err.splitlines()[-1][:160] if err else "",
                "traceback": int("Traceback" in output),
                "wrong_outcome": int(not ok),
                "silent_paying": int(expect == "refused" and requests > 0),
                "paid_unrecorded": max(0, answered - kept),
                "removed": len([k for k in before if after.get(k) != before[k]]),
                "secret": int(SECRET in output),
            }
        finally:
            if api is not None:
                api.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the corpus (or the cases ``--only`` names); exit 1 when any count is not 0."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=Path, default=HERE / "cases.yaml")
    p.add_argument("--only", nargs="+", default=[""], metavar="PREFIX",
                   help="only the cases whose name starts with one of these")
    p.add_argument("--json", type=Path, default=None, help="write every case's counts here")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    p.add_argument("--workers", type=int, default=1,
                   help="cases at once (each has its own project and server; most of a case "
                        "is waiting on its server's latency, hangs and retries)")
    p.add_argument("--fresh", action="store_true",
                   help="start a new interpreter per case instead of forking it from one that "
                        "has imported the SDKs (slower; the same judgement)")
    args = p.parse_args(argv)
    cases = [c for c in yaml.safe_load(args.cases.read_text())
             if c["name"].startswith(tuple(args.only))]
    rows = []
    zyg = None if args.fresh else Zygote(PRELOAD)
    with ThreadPoolExecutor(max(1, args.workers)) as pool:  # map: printed in the cases' order
        done = pool.map(lambda case: run_case(case, args.timeout, zyg), cases)
        for i, row in enumerate(done, 1):
            rows.append(row)
            bad = [k for k in (*COUNTS, "secret") if row[k]]
            print(f"[{i:>3}/{len(cases)}] {'FAIL' if bad else 'ok  '} {row['name']:<34} "
                  f"exit {row['exit']} requests {row['requests']:>2} answered "
                  f"{row['answered']:>2} recorded {row['recorded']:>2} {row['seconds']:>5.1f} s"
                  + (f"  <- {', '.join(bad)}: {row['line']}" if bad else ""), flush=True)
    if zyg is not None:
        zyg.close()
    totals = {k: sum(r[k] for r in rows) for k in (*COUNTS, "secret")}
    print(f"{len(rows)} cases: " + ", ".join(f"{v} {k}" for k, v in totals.items()))
    if args.json:
        args.json.write_text(json.dumps({"totals": totals, "cases": rows}, indent=1) + "\n")
    return 1 if any(totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

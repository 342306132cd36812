"""Live concurrency as a setting: the same small live design run through Snakemake with one live
run at a time (`--resources api=1`, the default) and with four (`api=4`), each against a fresh
local server whose answers vary between identical requests. Every request is paid once (the
server's arrivals equal the distinct request keys the cache recorded), and each run's outcomes
are byte-identical under api=1 and api=4, apart from the columns that say how answers were served.

Two cells of the design are the same market, so their runs need the same requests from two
processes at once under api=4: they share them through the response cache's cross-process
claims (src/market_agents/llm/cache.py).

The server varies its answers with ``vary="repeat"``: the k-th arrival of a body gets the k-th
answer, so a key paid twice changes a result whichever run paid it, while a client that pays each
key once gets the same answers from any fresh server. The server sees bodies, not keys: the key
also names the agent, and the traders of a run send identical bodies when they see the same
market (all of them at the first decision tick). Which agent's request arrives first must then
not depend on timing: each run sends one request at a time (max_concurrency 1), and the first
test leaves the twin cell out; the second keeps it, with answers varied by arrival count
(``vary=True``), and checks what does not depend on which process paid: each key paid once, both
twins' runs equal each other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from market_agents.llm.cache import ResponseCache
from market_agents.testing.fakeserver import FakeAPI
from tests.support import ROOT, procs
from tests.support.workflow import env as wf_env
from tests.support.workflow import smk_cmd

GATHERED = "results/runs/live/outcomes.parquet"
CACHE = "results/cache/live.sqlite"
SEEDS = (1, 2)
# how answers were served (a cache hit, or paid here), not what they said
SERVING = ["llm_cached_hits", "llm_usd_spent"]


def _project(path: Path, cells: tuple[str, ...]) -> Path:
    shutil.copytree(ROOT / "config", path / "config")
    design = path / "config/test/designs/live.yaml"
    text = design.read_text().replace('seeds: "1-3"', f'seeds: "{SEEDS[0]}-{SEEDS[-1]}"')
    text = text.replace("simulation.ticks: 120", "simulation.ticks: 45\n"
                        "  simulation.decision_interval: 1").replace(
        "population.llm_share: 0.25", "population.llm_share: 0.4\n"
        "  population.llm.max_concurrency: 1")
    text = text.replace("  - {name: share_25}\n", "".join(f"  - {{name: {c}}}\n" for c in cells))
    design.write_text(text)
    return path


def _run(project: Path, k: int, vary: bool | str) -> int:
    """Run the design with api=k against a fresh server; check that each request key was paid
    once and return how many were."""
    with FakeAPI(vary=vary, latency_s=0.02) as api:
        keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        done = procs.run(smk_cmd("--cores", str(max(2, k)), "--resources", f"api={k}",
                                 "--", GATHERED), cwd=project, env=wf_env(**keys), timeout=900)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        n = api.n_arrived
    cache = ResponseCache(project / CACHE, readonly=True)
    try:
        stored = [cache.get(key) for key in cache.keys()]
    finally:
        cache.close()
    assert all(e["status"] == "answered" for e in stored)
    assert n == len(stored), f"api={k}: {n} requests arrived for {len(stored)} keys"
    usage = [json.loads(m.read_text())["llm_usage"] for m in _runs(project, "manifest.json")]
    assert sum(u["calls"] for u in usage) == n
    assert sum(u["answers_discarded"] for u in usage) == 0
    return n


def _runs(project: Path, name: str) -> list[Path]:
    return sorted((project / "results/runs/live").glob(f"*/seed*/{name}"))


def _outcomes(project: Path) -> dict[str, dict]:
    return {str(p.relative_to(project)): {k: v for k, v in json.loads(p.read_text()).items()
                                          if k not in SERVING}
            for p in _runs(project, "outcomes.json")}


def _overlapped(project: Path) -> bool:
    """Whether two live runs were running at the same time."""
    spans = sorted((m.stat().st_mtime - json.loads(m.read_text())["wall_time_s"],
                    m.stat().st_mtime) for m in _runs(project, "manifest.json"))
    return any(end > start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))


@pytest.mark.slow(30)
def test_live_design_has_the_same_outcomes_with_api_1_and_4(tmp_path):
    one = _project(tmp_path / "api1", ("share_40",))
    four = _project(tmp_path / "api4", ("share_40",))
    # 8 LLM traders x 25 decision ticks x 2 seeds, each key once
    assert _run(one, 1, "repeat") == _run(four, 4, "repeat") == 400
    assert _overlapped(four) and not _overlapped(one)
    a, b = _outcomes(one), _outcomes(four)
    assert len(a) == len(SEEDS) and a == b
    got1, got4 = pl.read_parquet(one / GATHERED), pl.read_parquet(four / GATHERED)
    assert got4.drop(SERVING).equals(got1.drop(SERVING))


@pytest.mark.slow(34)
def test_twin_live_runs_at_once_pay_each_request_once(tmp_path):
    """api=4 on two cells that are the same market: the processes of one seed need the same
    keys at the same time; each key is paid once and both runs use the one recorded answer."""
    twins = ("share_40", "twin")
    project = _project(tmp_path / "twins", twins)
    assert _run(project, 4, True) == 400  # the twin cell's requests are the first cell's
    assert _overlapped(project)
    usage = [json.loads(m.read_text())["llm_usage"] for m in _runs(project, "manifest.json")]
    assert sum(u["claim_waits"] + u["cache_hits"] for u in usage) > 0
    got = _outcomes(project)
    for seed in SEEDS:
        pair = [dict(got[f"results/runs/live/{c}/seed{seed:04d}/outcomes.json"]) for c in twins]
        for o in pair:  # the cell's name is in its config hash
            o.pop("cell", None), o.pop("config_hash")
        assert pair[0] == pair[1], seed

"""Several `ma run` processes sharing one response cache at once, against a server whose
answers vary between identical requests (as real models' do): every request is paid once in
all, no "database is locked", and each run's replay reproduces its parquet files byte for
byte. (Three `ma design` workers, or `snakemake --resources api=4`, share a cache this way.)"""

from __future__ import annotations

import json
import subprocess

import pytest

from market_agents.llm.cache import ResponseCache
from market_agents.testing.fakeserver import FakeAPI
from tests.support import procs
from tests.support.liverun import env, ma_run, ma_run_cmd, same_bytes

# 600 ticks: each run makes ~135 requests over ~27 decision ticks, so the processes overlap
LONG = {"simulation__ticks": 600, "simulation__burn_in": 50,
        "population__llm__max_concurrency": 4}


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [(1, 1), (1, 1, 2, 2)], ids=["2proc", "4proc"])
def test_processes_sharing_a_cache_pay_each_request_once(tmp_path, seeds):
    cache = tmp_path / "cache"
    with FakeAPI(vary=True, latency_s=0.05, jitter_s=0.1, seed=len(seeds)) as api:
        runs = [procs.popen(ma_run_cmd(tmp_path / f"run{i}", cache, seed, **LONG),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(api),
                            cwd=tmp_path)
                for i, seed in enumerate(seeds)]
        outs = [p.communicate(timeout=900) for p in runs]
        for p, (_, err) in zip(runs, outs, strict=True):
            assert p.returncode == 0, err[-3000:]
            assert "database is locked" not in err
        c = ResponseCache(cache, readonly=True)
        stored = len(c)
        c.close()
        # every answer the server gave is in the record, and each request was sent once
        assert api.answered == len(api.requests) == stored
        usage = [json.loads((tmp_path / f"run{i}/manifest.json").read_text())["llm_usage"]
                 for i in range(len(seeds))]
        assert sum(u["calls"] for u in usage) == stored
        assert sum(u["claim_waits"] + u["cache_hits"] for u in usage) > 0  # they did share
        n = len(api.requests)
        for i, seed in enumerate(seeds):
            replay = ma_run(tmp_path / f"replay{i}", cache, None, "--replay", key=False,
                            seed=seed, **LONG)
            assert replay.returncode == 0, replay.stderr[-3000:]
            assert same_bytes(tmp_path / f"run{i}", tmp_path / f"replay{i}"), f"run{i}"
        assert len(api.requests) == n
    # runs of one seed used the same answers, though the server would have varied them
    for i, j in ((0, 1), (2, 3))[: len(seeds) // 2]:
        assert same_bytes(tmp_path / f"run{i}", tmp_path / f"run{j}")

"""`ma run` against the local fake server answering every request with a body the SDK cannot
read (openai-python #2486: ``output: null``, billed): each answer is recorded as an invalid
answer and charged at its worst case, and running the same command again buys nothing
(issue 33: 3 runs paid 3 answers per decision and stored none)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from market_agents.testing.fakeserver import FakeAPI
from tests.support.liverun import ma_run, stored


@pytest.mark.slow(7)  # CPU s on 2 cores: out of the quick subset
def test_an_unreadable_answer_is_paid_once_whatever_the_reruns(tmp_path):
    cache = tmp_path / "cache"
    usd = []
    with FakeAPI(fault_all="output_null", tokens=(700, 150)) as api:
        for i in range(3):
            out = tmp_path / f"run{i}"
            proc = ma_run(out, cache, api)
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert "Traceback" not in proc.stderr
            usage = json.loads((out / "manifest.json").read_text())["llm_usage"]
            dec = pl.read_parquet(out / "llm_decisions.parquet")
            assert dec.height == 25 and set(dec["error_class"]) == {"unparseable"}
            assert (dec["action"] == "hold").all()
            usd.append(usage["usd_live"])
            charges = usage["worst_case_charges"]["unparseable"]
            assert charges["n"] == 25 and charges["usd"] == pytest.approx(usage["usd_live"])
            assert usage["usd_spent"] == (usage["usd_live"] if i == 0 else 0.0)
        answered = api.answered
    assert answered == 25 == stored(cache)  # one answer per decision, bought once
    assert usd[0] > 0 and usd == [usd[0]] * 3  # each run used (and counts) the same record

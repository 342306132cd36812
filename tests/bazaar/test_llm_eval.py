"""``ma bazaar eval`` through a real HTTP provider (openai_compatible against the fake server on
127.0.0.1): the episodes match the engine played with the same rule, spend is priced, and a USD
cap stops episodes instead of overspending."""

import json

import polars as pl
import pytest

from market_agents.bazaar.play import play
from market_agents.cli import main
from tests.support.bazaar import act, bazaar_server


def _eval(server, out, usd_cap, seeds=3):
    return main(["bazaar", "eval", "--tier", "micro", "--provider", "openai_compatible",
                 "--base-url", f"{server.url}/v1", "--model", "gpt-5.4-nano",
                 "--seeds", str(seeds),
                 "--usd-cap", str(usd_cap), "--out", str(out),
                 "--results", str(out / "results")])  # the spend ledger of a scratch project


def test_openai_compatible_eval_matches_engine_and_is_priced(tmp_path):
    with bazaar_server() as server:
        assert _eval(server, tmp_path, usd_cap=1.0) == 0
        requests = len(server.requests)
    scores = pl.read_parquet(tmp_path / "scores.parquet")
    assert requests == 3 * 11  # one illegal first attempt + ten turns per episode
    for row in scores.iter_rows(named=True):
        expected = play("micro", row["seed"], act)
        assert row["reward"] == pytest.approx(expected["reward"], abs=1e-12)
        assert row["illegal"] == 1 and row["stopped"] is None
    summary = json.loads((tmp_path / "summary.json").read_text())
    # the fake server reports 10 input and 5 output tokens per call, priced from config/prices.yaml
    assert summary["usage"]["usd_spent"] == pytest.approx(33 * (10 * 0.20 + 5 * 1.25) / 1e6)


def test_usd_cap_stops_episodes_and_scores_them_as_passes(tmp_path):
    with bazaar_server() as server:
        # the planning estimate of one call (760 in, 230 out) already exceeds this cap
        assert _eval(server, tmp_path, usd_cap=0.0001, seeds=2) == 0
        assert server.requests == []
    scores = pl.read_parquet(tmp_path / "scores.parquet")
    assert scores["stopped"].to_list() == ["budget_halt", "budget_halt"]
    assert scores["truncated"].all()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stopped"] == 2 and summary["usage"]["budget_halts"] == 2


def test_timeout_and_max_output_tokens_reach_the_wire(tmp_path):
    from market_agents.testing.fakeserver import FakeAPI

    # the first call hangs past --timeout: it is cut off and retried, not waited out for 60 s
    with FakeAPI(faults=["timeout"], hang_s=5.0) as api:
        assert main(["bazaar", "eval", "--tier", "micro", "--provider", "openai_compatible",
                     "--base-url", f"{api.url}/v1", "--model", "gpt-5.4-nano", "--seeds", "1",
                     "--usd-cap", "1", "--timeout", "1", "--max-output-tokens", "64",
                     "--out", str(tmp_path), "--results", str(tmp_path / "results")]) == 0
        bodies = [r["body"] for r in api.requests]
    usage = json.loads((tmp_path / "summary.json").read_text())["usage"]
    assert {b["max_tokens"] for b in bodies} == {64}
    assert usage["calls"] == usage["answered"] + 1 and usage["failures"] == 0


@pytest.mark.parametrize("flag,value,message", [
    ("--timeout", "0", "--timeout must be > 0 seconds"),
    ("--max-output-tokens", "3", "--max-output-tokens must be >= 16"),
])
def test_bad_timeout_or_token_limit_is_a_one_line_error(tmp_path, capsys, flag, value, message):
    assert main(["bazaar", "eval", "--tier", "micro", "--provider", "mock", flag, value,
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "x").exists()

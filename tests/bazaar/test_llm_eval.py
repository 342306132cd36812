"""``ma bazaar eval`` through a real HTTP provider (openai_compatible against the fake server on
127.0.0.1): the episodes match the engine played with the same rule, spend is priced, and a USD
cap stops episodes instead of overspending."""

import json

import polars as pl
import pytest

from market_agents.bazaar.play import play
from market_agents.cli import main
from market_agents.layout import project_of
from tests.support.bazaar import act, bazaar_server


@pytest.fixture(autouse=True)
def _outside_the_checkout(tmp_path_factory, monkeypatch):
    """Each eval runs from a scratch folder of its own: from the checkout, a paid eval is
    checked against the checkout's spend ledger (``layout.project_root``), and one where a
    study was run refused these tests' evals into their scratch results roots."""
    here = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(here)
    assert project_of(here) is None


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


def test_usd_cap_stops_episodes_and_scores_them_as_errored_not_as_passes(tmp_path, capsys):
    with bazaar_server() as server:
        # the planning estimate of one call (760 in, 230 out) already exceeds this cap
        assert _eval(server, tmp_path, usd_cap=0.0001, seeds=2) == 1  # nothing was scored
        assert server.requests == []
    assert "all 2 episode(s) errored (budget_halt 2)" in capsys.readouterr().err
    scores = pl.read_parquet(tmp_path / "scores.parquet")
    assert scores["stopped"].to_list() == ["budget_halt", "budget_halt"]
    assert scores["errored"].all() and scores["truncated"].all()
    assert scores["reward"].to_list() == [None, None]  # never the passes it did not play
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stopped"] == 2 and summary["usage"]["budget_halts"] == 2
    assert (summary["scored"], summary["errored"], summary["reward"]) == (0, 2, None)


def test_no_server_is_an_error_never_a_score(tmp_path, capsys):
    """Nothing listens at the base URL: the evaluation stops with one line and exit 2, and no
    summary claims a reward (before the fix, vf-eval scored this 1.203)."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = main(["bazaar", "eval", "--tier", "micro", "--provider", "openai_compatible",
                 "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "gpt-5.4-nano",
                 "--seeds", "2", "--usd-cap", "1", "--out", str(tmp_path / "out"),
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot connect" in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "summary.json").exists()


def test_failed_calls_make_errored_episodes_left_out_of_the_means(tmp_path, capsys):
    """Every call answered HTTP 500 (x-should-retry false: one attempt each): every episode
    errored; exit 1, reward None, the errors counted by class."""
    from market_agents.testing.fakeserver import FakeAPI

    with FakeAPI(fault_all="500", fault_headers={"x-should-retry": "false"}) as api:
        assert _eval(api, tmp_path, usd_cap=1.0, seeds=3) == 1
        assert len(api.requests) == 3  # one turn each, then the episode is errored
    assert "all 3 episode(s) errored (server_error 3)" in capsys.readouterr().err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["scored"], summary["errored"], summary["errors_by_class"]) == (
        0, 3, {"server_error": 3})
    assert summary["reward"] is None and summary["score"] is None
    scores = pl.read_parquet(tmp_path / "scores.parquet")
    assert scores["errored"].all() and scores["format_bonus"].to_list() == [None] * 3


def test_one_errored_episode_is_reported_apart_and_the_rest_scored(tmp_path, capsys):
    from market_agents.testing.fakeserver import FakeAPI
    from tests.support.bazaar import TOKENS, answer

    # the first request to arrive (one episode's first turn) fails; every other is answered
    with FakeAPI(faults=["500"], fault_headers={"x-should-retry": "false"}, answer=answer,
                 tokens=TOKENS) as api:
        assert _eval(api, tmp_path, usd_cap=1.0, seeds=3) == 0
    out = capsys.readouterr().out
    assert "1 of 3 episode(s) errored (server_error 1) and are left out of the means" in out
    scores = pl.read_parquet(tmp_path / "scores.parquet")
    assert scores["errored"].sum() == 1
    played = scores.filter(~pl.col("errored"))["seed"].to_list()
    summary = json.loads((tmp_path / "summary.json").read_text())
    rewards = [play("micro", s, act)["reward"] for s in played]
    assert summary["reward"] == pytest.approx(sum(rewards) / 2, abs=1e-12)
    assert summary["scored"] == 2 and summary["anchor_score"] is not None


def test_think_blocks_are_stripped_before_the_command_is_read(tmp_path):
    from market_agents.testing.fakeserver import FakeAPI
    from tests.support.bazaar import TOKENS, think_answer, think_only_answer

    # a decoy command inside <think>: the episode plays the answer after it, as the rule does
    with FakeAPI(answer=think_answer, tokens=TOKENS) as api:
        assert _eval(api, tmp_path / "a", usd_cap=1.0, seeds=2) == 0
    for row in pl.read_parquet(tmp_path / "a" / "scores.parquet").iter_rows(named=True):
        assert row["reward"] == pytest.approx(play("micro", row["seed"], act)["reward"],
                                              abs=1e-12)
    # only reasoning (closed, or cut off mid-thought): no command was answered, none is played
    with FakeAPI(answer=think_only_answer, tokens=TOKENS) as api:
        assert _eval(api, tmp_path / "b", usd_cap=1.0, seeds=2) == 0
    for row in pl.read_parquet(tmp_path / "b" / "scores.parquet").iter_rows(named=True):
        assert row["trades"] == 0 and row["illegal"] > 1 and row["format_bonus"] == 0


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


def test_a_free_local_model_needs_no_row_in_the_price_table(tmp_path):
    # issue 27: `--free` prices a server you run at 0 USD without a copy of config/prices.yaml
    args = ["bazaar", "eval", "--tier", "micro", "--provider", "openai_compatible",
            "--model", "smollm2-135m-instruct-q4_1", "--seeds", "1", "--usd-cap", "1",
            "--out", str(tmp_path), "--results", str(tmp_path / "results")]
    with bazaar_server() as server:
        url = ["--base-url", f"{server.url}/v1"]
        assert main([*args, *url, "--free"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["usage"]["calls"] > 0 and summary["usage"]["usd_spent"] == 0.0
    assert main([*args, *url]) == 2  # not declared free: no price, one line

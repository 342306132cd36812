"""``ma bazaar``: anchors, exploits, play and eval (mock) write their files; bad arguments are
one-line errors with exit 2."""

import json

import polars as pl
import pytest

from market_agents.cli import main


def test_anchors_writes_table_and_files(tmp_path, capsys):
    assert main(["bazaar", "anchors", "--tiers", "micro,hard", "--seeds", "20",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # ours next to theirs on the eval split, and ours on train seeds 0-19
    assert "micro         honest            1.0410  1.0410" in out
    assert "[ok] micro eval: honest score 1.0410 vs public 1.0410 (within 0.01)" in out
    assert "[ok] micro train: honest beats passive on every seed" in out
    data = json.loads((tmp_path / "anchors.json").read_text())
    assert all(c["ok"] for c in data["claims"])
    rows = pl.read_parquet(tmp_path / "anchors.parquet")
    assert rows.height == 2 * 7 and set(rows["block"]) == {"eval", "train"}


def test_anchors_exit_1_when_a_level_is_off(monkeypatch, capsys):
    from market_agents.bazaar import anchors

    monkeypatch.setitem(anchors.PUBLIC, "micro", {**anchors.PUBLIC["micro"],
                                                  "honest": {"score": "1.0530"}})
    assert main(["bazaar", "anchors", "--tiers", "micro"]) == 1
    assert "[FAIL] micro eval: honest score 1.0410 vs public 1.0530" in capsys.readouterr().out


def test_anchors_exit_1_when_an_ordering_fails(monkeypatch, capsys):
    from market_agents.bazaar import anchors

    monkeypatch.setitem(anchors.ORDERINGS, "micro", [
        ("passive beats honest on every seed",
         anchors._beats_on_every_seed("passive", "honest"))])
    assert main(["bazaar", "anchors", "--tiers", "micro"]) == 1
    assert "[FAIL] micro eval: passive beats honest" in capsys.readouterr().out


def test_anchors_with_other_seed_counts_check_orderings_only(capsys):
    assert main(["bazaar", "anchors", "--tiers", "micro", "--seeds", "3"]) == 0
    out = capsys.readouterr().out
    assert "levels not checked" in out and "vs public" not in out


def test_exploits_writes_report(tmp_path, capsys):
    assert main(["bazaar", "exploits", "--tier", "micro", "--seeds", "5",
                 "--out", str(tmp_path)]) == 0
    blocks = json.loads((tmp_path / "exploits_micro.json").read_text())["blocks"]
    assert set(blocks) == {"eval", "train"}
    farms = blocks["train"]["farms"]
    assert {f["policy"] for f in farms} >= {"self_trading", "bonus_farming", "prose_rambling"}
    out = capsys.readouterr().out
    assert "tier micro (train seeds)" in out and "no farm beats" in out


def test_play_prints_transcript(tmp_path, capsys):
    assert main(["bazaar", "play", "--tier", "maker_micro", "--policy", "vol_aware",
                 "--out", str(tmp_path)]) == 0
    assert "> quote" in capsys.readouterr().out
    assert len((tmp_path / "transcript.jsonl").read_text().splitlines()) == 10
    assert json.loads((tmp_path / "summary.json").read_text())["policy"] == "vol_aware"


@pytest.mark.parametrize("argv, message", [
    (["anchors", "--tiers", "mega"], "unknown bazaar tier 'mega'"),
    (["exploits", "--tier", "micro", "--seeds", "0"], "--seeds must be >= 1"),
    (["play", "--tier", "micro", "--policy", "yolo"], "unknown bazaar policy 'yolo'"),
    (["play", "--tier", "micro", "--policy", "wide"], "taker-only"),
    (["eval", "--tier", "mega", "--provider", "mock", "--out", "x"], "unknown bazaar tier"),
    (["eval", "--tier", "micro", "--provider", "nope", "--model", "m", "--out", "x"],
     "provider 'nope' is unknown"),
    (["eval", "--tier", "micro", "--provider", "mock", "--model", "no-such-model",
      "--out", "x"], "no-such-model"),
])
def test_bad_arguments_are_one_line_errors(argv, message, capsys):
    assert main(["bazaar", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_eval_mock_writes_transcripts_scores_summary_and_replays_from_cache(tmp_path, capsys):
    args = ["bazaar", "eval", "--tier", "micro", "--provider", "mock", "--seeds", "6",
            "--cache", str(tmp_path / "cache")]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["usage"]["calls"] > 0 and summary["usage"]["cache_hits"] == 0
    assert summary["illegal"] > 0  # the mock sends some malformed answers
    assert summary["anchor"] == "honest_bonus"
    scores = pl.read_parquet(tmp_path / "a" / "scores.parquet")
    assert scores["seed"].to_list() == list(range(1_000_000, 1_000_006))
    lines = (tmp_path / "a" / "transcripts.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert len(lines) == 6 and first["messages"]
    assert len(first["llm"]) == len(first["messages"]) and not first["llm"][0]["cache_hit"]

    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    again = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert again["usage"]["calls"] == 0 and again["usage"]["cache_hits"] > 0
    assert pl.read_parquet(tmp_path / "b" / "scores.parquet").equals(scores)
    assert again["score"] == summary["score"]


def test_eval_live_provider_needs_a_usd_cap(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    assert main(["bazaar", "eval", "--tier", "micro", "--provider", "openai", "--model",
                 "gpt-5.4-nano", "--out", str(tmp_path), "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "usd_cap" in err and "sk-test" not in err

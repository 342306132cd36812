import json
import multiprocessing as mp

import pytest

from market_agents.llm.cache import ResponseCache


def test_roundtrip_and_first_writer_wins(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put("k1", {"status": "answered", "text": "a"})
    c.put("k1", {"status": "answered", "text": "b"})
    assert c.get("k1")["text"] == "a"
    assert c.get("missing") is None
    c.close()


@pytest.mark.parametrize("value,why", [
    ("{not json", "unparseable"),
    (b"\x00pickle", "not JSON text"),
    (json.dumps({"v": 1, "sha256": "0" * 64, "body": {"key": "k", "text": "x"}}), "checksum"),
])
def test_corrupt_entry_is_reported_deleted_and_missed(tmp_path, caplog, value, why):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put_raw("k", value)
    with caplog.at_level("WARNING"):
        assert c.get("k") is None
    assert why in caplog.text and c.corrupt == ["k"]
    assert len(c) == 0  # deleted, so the next run re-fetches


def test_tampered_text_fails_checksum(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put("k", {"text": '{"action": "buy"}'})
    raw = c._store.get("k")
    c.put_raw("k", raw.replace("buy", "sell"))
    assert c.get("k") is None and c.corrupt == ["k"]


def test_entry_under_wrong_key_is_rejected(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put("a", {"text": "x"})
    c.put_raw("b", c._store.get("a"))
    assert c.get("b") is None and c.get("a") is not None


def _writer(path, worker, n):
    c = ResponseCache(path)
    for i in range(n):
        c.put(f"w{worker}-{i}", {"text": f"{worker}:{i}"})
        c.put("shared", {"text": f"from {worker}"})
    c.close()


def test_safe_across_processes(tmp_path):
    path = tmp_path / "shared.sqlite"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    c = ResponseCache(path)
    assert len(c) == 4 * 40 + 1
    assert all(c.get(f"w{w}-{i}")["text"] == f"{w}:{i}" for w in range(4) for i in range(40))
    assert c.get("shared")["text"].startswith("from ") and c.corrupt == []


def test_ma_cache_summarizes_and_flags_corrupt_entries(tmp_path, capsys):
    from market_agents.cli import main
    from market_agents.llm import schema
    from market_agents.llm.client import LLMClient
    from market_agents.llm.config import LLMConfig
    from tests.support.llm import decision_request

    path = tmp_path / "c.sqlite"
    c = LLMClient.from_settings(LLMConfig(), cache_path=path, env={})
    c.complete_many([decision_request(agent=f"s{i}") for i in range(30)], schema.parse_decision)
    c.close()
    assert main(["cache", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    [g] = out["groups"]
    assert (g["model"], g["entries"], g["answered"]) == ("mock-trader", 30, 30)
    assert 20 <= g["valid"] <= 30 and out["corrupt"] == []
    ResponseCache(path).put_raw("bad", "{oops")
    assert main(["cache", str(path)]) == 1
    assert "1 corrupt" in capsys.readouterr().out
    assert main(["cache", str(tmp_path / "missing")]) == 2
    assert "not an LLM response cache" in capsys.readouterr().err

"""The response cache as a record: entries with checksums, claims shared across processes,
damage refused with one line, and `ma cache` summary / verify / retry-failures."""

import json
import multiprocessing as mp
import os
import signal
import sys
import time

import pytest

from market_agents.llm.cache import (
    CLAIM_PREFIX,
    PAID_MARKER,
    CacheError,
    ResponseCache,
    answer_sha256,
    check_record,
)
from tests.support import inprocess


def test_roundtrip_first_writer_wins_and_put_returns_what_is_stored(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    assert c.put("k1", {"status": "answered", "text": "a"})["text"] == "a"
    assert c.put("k1", {"status": "answered", "text": "b"})["text"] == "a"
    assert c.get("k1")["text"] == "a"
    assert c.get("missing") is None
    c.close()


@pytest.mark.parametrize("value,why", [
    ("{not json", "unparseable"),
    (b"\x00pickle", "not JSON text"),
    (json.dumps({"v": 1, "sha256": "0" * 64, "body": {"key": "k", "text": "x"}}), "checksum"),
])
def test_damaged_entry_stops_the_reader_and_stays_for_inspection(tmp_path, value, why):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put_raw("k", value)
    with pytest.raises(CacheError, match=f"entry k fails its check \\({why}"):
        c.get("k")
    assert c.scan() == ([], ["k"]) and len(c) == 1  # never deleted: the record is evidence


def test_edited_answer_fails_its_checksum(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put("k", {"text": '{"action": "buy"}'})
    raw = c._store.get("k")
    c.put_raw("k", raw.replace("buy", "sell"))
    with pytest.raises(CacheError, match="checksum mismatch"):
        c.get("k")
    c.put_raw("b", raw)  # a genuine entry copied under another key
    with pytest.raises(CacheError, match="stored under another key"):
        c.get("b")


def test_answer_hash_covers_what_was_said_not_how_it_was_fetched():
    a = {"status": "answered", "text": "x", "usage": {"input": 3}, "latency_s": 0.1,
         "attempts": 1, "recorded_at": "t1"}
    assert answer_sha256(a) == answer_sha256(a | {"latency_s": 9.0, "attempts": 3,
                                                  "recorded_at": "t2"})
    assert answer_sha256(a) != answer_sha256(a | {"text": "y"})
    assert answer_sha256(a) != answer_sha256(a | {"usage": {"input": 4}})


# --- claims --------------------------------------------------------------------------------------

def test_claim_is_mine_then_held_for_others_then_answered(tmp_path):
    a, b = ResponseCache(tmp_path / "c"), ResponseCache(tmp_path / "c")
    assert a.claim("k", 60) == ("mine", None)
    state, info = b.claim("k", 60)  # another owner (a second process, as far as tokens go)
    assert state == "held" and info["pid"] == os.getpid() and info["token"] == a.owner.token
    assert a.claim("k", 60)[0] == "mine"  # re-claiming one's own claim refreshes it
    a.put("k", {"status": "answered", "text": "x"})
    assert b.claim("k", 60) == ("answer", a.get("k"))
    assert a.claims() == [] and a.keys() == ["k"] and len(a) == 1


def test_expired_claim_is_taken_over_and_release_frees_it(tmp_path):
    a, b = ResponseCache(tmp_path / "c"), ResponseCache(tmp_path / "c")
    assert a.claim("k", -1.0)[0] == "mine"  # a lease already over
    state, previous = b.claim("k", 60)
    assert state == "mine" and previous["token"] == a.owner.token
    assert json.loads(b._store.get(CLAIM_PREFIX + "k"))["took_over"] is True
    a.release("k")  # not a's claim any more: left alone
    assert a.claim("k", 60)[0] == "held"
    b.release("k")
    assert a.claim("k", 60)[0] == "mine"


def _claim_and_hang(path, ready):
    c = ResponseCache(path)
    c.claim("k", 3600)
    ready.set()
    time.sleep(600)


def test_claim_of_a_killed_process_is_taken_over_at_once(tmp_path):
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_claim_and_hang, args=(tmp_path / "c", ready))
    proc.start()
    assert ready.wait(120)
    c = ResponseCache(tmp_path / "c")
    assert c.claim("k", 60)[0] == "held"  # a live owner with an hour's lease
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(60)
    state, previous = c.claim("k", 60)
    assert state == "mine" and previous["pid"] == proc.pid


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
    assert c.get("shared")["text"].startswith("from ")


# --- damage to the store, through the command line -----------------------------------------------

def _filled(path, n=40, paid=True):
    from market_agents.llm import schema
    from market_agents.llm.client import LLMClient
    from market_agents.llm.config import LLMConfig
    from tests.support.llm import decision_request

    c = LLMClient.from_settings(LLMConfig(), cache_path=path, env={})
    c.complete_many([decision_request(agent=f"s{i}") for i in range(n)], schema.parse_decision)
    keys = c.cache.keys()
    c.close()
    if paid:  # mock answers are free; mark the cache as a live one would be
        (path / PAID_MARKER).write_text('{"first_paid_at": "2026-11-30T00:00:00Z"}')
    return keys


def _ma(*args):
    return inprocess.ma([str(a) for a in args], os.environ, os.getcwd())


def _one_line(proc, code, pattern):
    import re

    assert proc.returncode == code, proc.stdout + proc.stderr
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert re.search(pattern, err), err


def _flip(path, offset, n=16):
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _checkpointed(path):
    import sqlite3

    con = sqlite3.connect(path / "cache.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


@pytest.mark.parametrize("damage,pattern", [
    ("truncated", r"cache\.db: damaged sqlite database"),
    ("flipped_page", r"cache\.db: damaged sqlite database"),
    ("random", r"cache\.db: damaged sqlite database \(file is not a database\)"),
    ("emptied", r"the cache is empty, but .*paid\.json says paid answers were stored"),
    ("deleted", r"the cache has no cache\.db, but .*paid\.json says paid answers"),
    ("regular_file", r"is a regular file, not a cache directory"),
])
@pytest.mark.slow(9)  # CPU s on 2 cores: out of the quick subset
def test_each_damage_gives_one_line_and_exit_2(tmp_path, damage, pattern):
    path = tmp_path / "c.sqlite"
    _filled(path, n=200)
    _checkpointed(path)
    db = path / "cache.db"
    size = db.stat().st_size
    if damage == "truncated":
        db.write_bytes(db.read_bytes()[: size // 2])
    elif damage == "flipped_page":
        _flip(db, 4096 + 8, 64)  # the header of the second page: a b-tree page
    elif damage == "random":
        db.write_bytes(os.urandom(size))
    elif damage == "emptied":
        db.write_bytes(b"")
    elif damage == "deleted":
        db.unlink()
    elif damage == "regular_file":
        import shutil

        shutil.rmtree(path)
        path.write_text("not a cache")
    for argv in (["cache", "verify", path], ["cache", path]):
        _one_line(_ma(*argv), 2, pattern)


def test_edited_entry_is_named_by_verify(tmp_path):
    path = tmp_path / "c.sqlite"
    keys = _filled(path, n=30)
    c = ResponseCache(path)
    raw = c._store.get(keys[7])
    c.put_raw(keys[7], raw.replace('"text":"', '"text":"X', 1))  # sqlite itself stays sound
    c.close()
    proc = _ma("cache", "verify", path)
    assert proc.returncode == 1, proc.stderr
    assert "30 entries, 1 bad" in proc.stdout and f"bad: {keys[7]}" in proc.stdout
    v = json.loads(_ma("cache", "verify", path, "--json").stdout)
    assert v["bad"] == [keys[7]] and v["entries"] == 30


def test_flipped_bytes_inside_an_answer_are_found_by_its_checksum(tmp_path):
    path = tmp_path / "c.sqlite"
    keys = _filled(path, n=30)
    _checkpointed(path)
    db = path / "cache.db"
    data = db.read_bytes()
    at = data.index(b'"reason":"') + 12  # inside one stored answer's text
    _flip(db, at, 1)
    proc = _ma("cache", "verify", path)
    assert proc.returncode == 1 and "1 bad" in proc.stdout, proc.stdout + proc.stderr
    [bad] = json.loads(_ma("cache", "verify", path, "--json").stdout)["bad"]
    assert bad in keys


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_unreadable_directory_is_named(tmp_path):
    from tests.support.osconditions import run_unprivileged, shared_tmp

    with shared_tmp() as tmp:
        path = tmp / "c.sqlite"
        _filled(path, n=3, paid=False)
        os.chmod(path, 0o000)
        proc = run_unprivileged([sys.executable, "-m", "market_agents.cli", "cache", "verify",
                                 str(path)])
        os.chmod(path, 0o755)
    _one_line(proc, 2, r"cannot read the directory \(permission denied\)")


def test_ma_cache_summarizes(tmp_path, capsys):
    from market_agents.cli import main

    path = tmp_path / "c.sqlite"
    _filled(path, n=30, paid=False)
    assert main(["cache", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    [g] = out["groups"]
    assert (g["model"], g["entries"], g["answered"]) == ("mock-trader", 30, 30)
    assert 20 <= g["valid"] <= 30 and out["corrupt"] == []
    assert main(["cache", "summary", str(path)]) == 0
    assert "30 entries, 0 corrupt" in capsys.readouterr().out
    assert main(["cache", str(tmp_path / "missing")]) == 2
    assert "not an LLM response cache (no cache.db inside)" in capsys.readouterr().err
    assert main(["cache", "frobnicate", str(path)]) == 2
    assert "expected [ACTION] PATH" in capsys.readouterr().err


def test_retry_failures_removes_only_failures_and_prices_them(tmp_path, capsys):
    from market_agents.cli import main

    c = ResponseCache(tmp_path / "c")
    req = {"provider": "openai", "model": "gpt-5.4-nano"}
    for i in range(3):
        c.put(f"f{i}", {"request": req, "status": "failed", "error_class": "timeout"})
    c.put("r", {"request": req, "status": "failed", "error_class": "rate_limit"})
    c.put("ok", {"request": req, "status": "answered", "text": "x", "usd": 0.001})
    c.close()
    assert main(["cache", "retry-failures", str(tmp_path / "c"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would remove 4 recorded failure(s) (rate_limit 1, timeout 3)" in out
    assert "about 0.0018 USD" in out  # 4 x 0.0004395 at the planning profile
    assert len(ResponseCache(tmp_path / "c", readonly=True)) == 5
    assert main(["cache", "retry-failures", str(tmp_path / "c"), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["failures"], r["removed"]) == (4, 4)
    assert ResponseCache(tmp_path / "c").keys() == ["ok"]


def test_opening_while_another_process_stores_its_first_paid_answer_is_no_lost_record(
        tmp_path, monkeypatch):
    """The opener's check and a writer's first paid answer, interleaved the worst way: the
    entries are counted (none yet), then the writer stores the answer and writes paid.json.
    The opener must not call that an emptied cache (it read the marker before counting)."""
    import market_agents.llm.cache as cache_module

    path = tmp_path / "c"
    ResponseCache(path).close()
    counted = cache_module.stored_entries

    def count_then_writer_stores(p):
        n = counted(p)
        monkeypatch.setattr(cache_module, "stored_entries", counted)  # the writer's own open
        writer = ResponseCache(path)
        writer.put("k", {"text": "answer"}, paid=True)
        writer.close()
        return n

    monkeypatch.setattr(cache_module, "stored_entries", count_then_writer_stores)
    check_record(path)  # no CacheError
    assert (path / PAID_MARKER).exists()


# --- another application's database (issue 33) -------------------------------------------------

def _sqlite(path, *statements: str) -> bytes:
    """A cache directory ``path`` whose cache.db is an SQLite database made by ``statements``;
    the file's bytes."""
    import sqlite3

    path.mkdir()
    con = sqlite3.connect(path / "cache.db")
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return (path / "cache.db").read_bytes()


@pytest.mark.parametrize("statements,names", [
    (["CREATE TABLE users (id INTEGER, email TEXT)", "INSERT INTO users VALUES (1, 'a@b')"],
     "'users'"),
    # another application that also keeps a table named Cache, with its own columns
    (["CREATE TABLE Cache (k TEXT, v TEXT)"], "'Cache'"),
    # a real cache, plus a table someone added
    (["CREATE TABLE Settings (key TEXT NOT NULL UNIQUE, value)", "CREATE TABLE Cache (rowid "
      "INTEGER PRIMARY KEY, key BLOB, raw INTEGER, store_time REAL, expire_time REAL, "
      "access_time REAL, access_count INTEGER DEFAULT 0, tag BLOB, size INTEGER DEFAULT 0, "
      "mode INTEGER DEFAULT 0, filename TEXT, value BLOB)", "CREATE VIEW report AS SELECT 1"],
     "'report'"),
])
@pytest.mark.parametrize("readonly", [False, True])
def test_another_applications_database_is_refused_untouched(tmp_path, statements, names,
                                                           readonly):
    # e83eada wrote the cache's tables (and a probe entry) into it
    path = tmp_path / "c"
    before = _sqlite(path, *statements)
    with pytest.raises(CacheError) as info:
        ResponseCache(path, readonly=readonly)
    message = str(info.value)
    assert message.startswith(f"{path / 'cache.db'}: another application's SQLite database, "
                              f"not an LLM response cache (table(s) {names}")
    assert "\n" not in message
    assert (path / "cache.db").read_bytes() == before
    assert sorted(p.name for p in path.iterdir()) == ["cache.db"]


def test_a_cache_diskcache_made_still_opens(tmp_path):
    import diskcache

    plain = diskcache.Cache(str(tmp_path / "plain"))  # diskcache's own defaults
    plain.set("k", "v")
    plain.close()
    ResponseCache(tmp_path / "plain").close()
    ours = ResponseCache(tmp_path / "ours")
    ours.put("k1", {"status": "answered", "text": "a"})
    ours.close()
    reopened = ResponseCache(tmp_path / "ours", readonly=True)
    assert reopened.get("k1")["text"] == "a"
    reopened.close()


def test_an_sqlite_file_without_tables_is_a_new_cache(tmp_path):
    _sqlite(tmp_path / "c", "CREATE TABLE t (x)", "DROP TABLE t")
    assert (tmp_path / "c" / "cache.db").stat().st_size > 0
    ResponseCache(tmp_path / "c").close()

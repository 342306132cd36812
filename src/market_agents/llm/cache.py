"""The response cache: the record of an experiment, and the recorded decision library.

A diskcache (sqlite) store in a directory, shared by every process of a design. Keys are
:meth:`LLMRequest.key` (sha256 of the canonical request minus transport settings). Values are
JSON text, never pickles: the request, the answer text, usage, timing, the priced cost and the
parsed decision, with a sha256 checksum over the entry. Every answer is stored the moment it
arrives, and a call that failed after its retries is stored too, so a replay makes zero calls.

Several processes share one cache without paying twice: before a call, a process *claims* the
request (a ``claim:<key>`` marker with owner and expiry, written in the same sqlite
transaction that checks for an answer). Another process that needs it waits for the answer; a
claim whose owner died (same host, pid gone) or whose lease expired is taken over.

The cache refuses to serve a damaged record: an entry that fails its checksum, a damaged sqlite
file, a ``cache.db`` that is another application's database (refused before anything is written
into it), a path that is not a cache directory, or a cache emptied or deleted after it held paid
answers (``paid.json`` says so) raise :class:`CacheError` naming the path and what is wrong. So
does a cache on a network filesystem, where SQLite's WAL mode does not work, unless its
rollback journal is opted in (:mod:`market_agents.llm.filesystem`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache

from market_agents.atomic import write_json_atomic, write_text_atomic
from market_agents.core import canonical_json
from market_agents.errors import MarketAgentsError

# The serving switches are read before any LLM code loads (`ma`'s flags); named here too.
from market_agents.inputs import NEW_CACHE_ENV as NEW_CACHE_ENV
from market_agents.inputs import REPLAY_ENV as REPLAY_ENV
from market_agents.inputs import env_flag as env_flag
from market_agents.layout import CACHE_DB
from market_agents.llm import filesystem

ENTRY_VERSION = 1
CLAIM_PREFIX = "claim:"
PAID_MARKER = "paid.json"  # written beside cache.db when the first paid answer is stored
# Answers the store could not take (a full disk), kept one file each beside cache.db and stored
# by the next process that opens the cache for writing: a paid answer is never dropped.
KEPT_DIR = "unstored"
ANSWER_FIELDS = ("status", "error_class", "text", "refusal", "truncated", "served_model",
                 "usage")
class CacheError(MarketAgentsError):
    """The cache cannot serve as the record: damaged, unreadable, unwritable or emptied."""


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def answer_sha256(body: dict[str, Any]) -> str:
    """The content hash of a stored answer: what the model said and what it cost (status,
    error class, text, refusal, truncation, served model id, usage), not how it was fetched
    (latency, attempts, time). A run records it per decision; a replay checks it."""
    return _checksum({k: body.get(k) for k in ANSWER_FIELDS})


# --- the state of a cache directory, read without opening it for writing ------------------------

def _db(path: Path) -> Path:
    return path / CACHE_DB


def _store_settings(path: Path) -> dict[str, Any]:
    """The diskcache settings for ``path`` (:func:`market_agents.llm.filesystem.store_settings`):
    a network filesystem without the journal opt-in raises :class:`CacheError`."""
    try:
        return filesystem.store_settings(path)
    except MarketAgentsError as exc:
        raise CacheError(str(exc)) from None


def check_path(path: str | Path, write: bool = True) -> Path:
    """``path`` as a cache directory this process can use, or :class:`CacheError` naming it:
    a regular file, a directory on a network filesystem (unless its journal is opted in), an
    unreadable directory, or (``write``) one it cannot create or write. Nothing is created
    before these checks pass."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CacheError(f"--cache {path}: is a regular file, not a cache directory "
                         "(a cache is a directory holding cache.db)")
    _store_settings(path)
    if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
        raise CacheError(f"--cache {path}: cannot read the directory (permission denied)")
    if not write:
        return path
    if not path.exists():
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"--cache {path}: cannot create the directory "
                             f"({exc.strerror})") from None
    if not os.access(path, os.W_OK):
        raise CacheError(f"--cache {path}: the directory is not writable (permission denied "
                         "or a read-only file system)")
    db = _db(path)
    if db.exists() and not os.access(db, os.R_OK | os.W_OK):
        raise CacheError(f"--cache {path}: {CACHE_DB} is not readable and writable")
    return path


def damage(path: str | Path) -> str | None:
    """What is wrong with the sqlite file of a cache (None: sound or absent). Opens it
    read-only and runs ``PRAGMA quick_check`` (truncation, flipped bytes in pages, random
    bytes), then checks that it is a cache's database (:func:`_foreign`): another
    application's database is refused before the cache's tables are written into it.
    Checksums of entries are checked when entries are read."""
    db = _db(Path(path))
    if not db.exists() or db.stat().st_size == 0:
        return None
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=120)
        try:
            rows = con.execute("PRAGMA quick_check(20)").fetchall()
            if rows != [("ok",)]:
                lines = [ln.strip() for r in rows for ln in str(r[0]).splitlines()
                         if ln.strip() and not ln.startswith("***")]
                return (f"damaged sqlite database (quick_check: {len(lines)} problem(s), e.g. "
                        f"{lines[0] if lines else rows[0][0]})")
            return _foreign(con)
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return f"damaged sqlite database ({exc})"


# The tables diskcache makes in cache.db and the columns the cache reads (diskcache 5's
# schema; its indexes and triggers hang off these). Anything else in the file is not ours.
_OWN_TABLES = {"Settings": {"key", "value"},
               "Cache": {"key", "raw", "store_time", "expire_time", "access_time",
                         "access_count", "tag", "size", "mode", "filename", "value"}}


def _foreign(con: sqlite3.Connection) -> str | None:
    """Why the sound sqlite database open in ``con`` is not a cache's (None: it is one, or it
    is still empty): a table or view diskcache does not make, or a table of a cache's name
    without the columns diskcache gives it. SQLite's own tables (``sqlite_*``) are ignored."""
    names = [n for (n,) in con.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")
        if not n.startswith("sqlite_")]
    other = [n for n in names if n not in _OWN_TABLES]
    if not other:
        other = [n for n in names if not _OWN_TABLES[n] <= {
            row[1] for row in con.execute(f'PRAGMA table_info("{n}")')}]
    if not other:
        return None
    listed = ", ".join(repr(n) for n in other[:5]) + (", ..." if len(other) > 5 else "")
    # the callers add what to do ("move it away ..."): the cache belongs in a directory of
    # its own
    return (f"another application's SQLite database, not an LLM response cache (table(s) "
            f"{listed} are not the cache's); nothing was written to it")


def stored_entries(path: str | Path) -> int | None:
    """Entries (claims excluded) in a sound cache; None when cache.db is missing or empty."""
    db = _db(Path(path))
    if not db.exists() or db.stat().st_size == 0:
        return None
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=120)
    try:
        (n,) = con.execute("SELECT count(*) FROM Cache WHERE key NOT LIKE 'claim:%'").fetchone()
    except sqlite3.DatabaseError:
        return None
    finally:
        con.close()
    return int(n)


def check_record(path: str | Path, new_cache: bool = False,
                 paid_runs: list[tuple[Path, float]] | None = None) -> None:
    """Refuse to start over silently: when the cache at ``path`` is missing or empty but its
    ``paid.json`` marker, or run directories (``paid_runs``: (path, USD of paid answers)),
    show that paid answers were recorded, raise :class:`CacheError` saying what was found,
    unless ``new_cache`` (then the marker is removed and the cache starts over)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return  # check_path names it
    marker = path / PAID_MARKER
    # The marker first: a writer stores its first paid answer, then writes the marker, so a
    # marker seen here means that answer is counted below (entries read first could miss an
    # answer another process stores meanwhile, then see its marker: a false "emptied" alarm).
    marked = marker.exists()
    n = stored_entries(path) if path.is_dir() else None
    if n:
        return
    found = []
    if marked:
        found.append(f"{marker} says paid answers were stored here since "
                     f"{_marker_date(marker)}")
    paid = [(p, usd) for p, usd in paid_runs or [] if usd > 0]
    if paid:
        found.append(f"{len(paid)} run(s) recorded {sum(u for _, u in paid):.4f} USD of paid "
                     f"answers (e.g. {paid[0][0]})")
    if not found:
        return
    state = ("is missing" if not path.exists() else f"has no {CACHE_DB}"
             if not _db(path).exists() else "is empty")
    if not new_cache:
        raise CacheError(f"--cache {path}: the cache {state}, but {'; '.join(found)}. "
                         "Restore the cache from a backup, or pass --new-cache to start a new "
                         "record (and pay for those answers again)")
    marker.unlink(missing_ok=True)


def _marker_date(marker: Path) -> str:
    try:
        return str(json.loads(marker.read_text()).get("first_paid_at", "?"))
    except (OSError, ValueError):
        return "?"


# --- claims --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Owner:
    """Who holds a claim: a random token per process, plus host, pid and process start time,
    so another process can tell a dead owner from a slow one."""

    token: str
    host: str
    pid: int
    started: str

    @classmethod
    def me(cls) -> Owner:
        """This process: a fresh token, the host, the pid and the process start time."""
        return cls(uuid.uuid4().hex, **process_identity())


def process_identity() -> dict[str, Any]:
    """This process as another process can recognize it later: ``host``, ``pid`` and
    ``started`` (its start time from /proc, so a reused pid is another process). A claim's
    owner, a paid answer's ``stored_by`` and a spend record's process are this same triple."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": _start_time(os.getpid())}


def process_alive(identity: dict[str, Any]) -> bool | None:
    """Whether the process ``identity`` (:func:`process_identity`) still runs: None when it
    ran on another host (this host cannot tell)."""
    if identity.get("host") != socket.gethostname():
        return None
    return _owner_alive(identity, Owner.me())


def _start_time(pid: int) -> str:
    """The process start time from /proc (empty where there is no /proc): a pid reused by a
    new process has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if fields[0] != "Z" else "zombie"


def _owner_alive(info: dict[str, Any], me: Owner) -> bool:
    if info.get("host") != me.host:
        return True  # another host: only the lease can tell
    pid = int(info.get("pid", 0))
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = _start_time(pid)
    return started != "zombie" and (not started or started == info.get("started", started))


class _Undecodable:
    """A stored value whose bytes are not UTF-8 text."""


# --- the store ---------------------------------------------------------------------------

class ResponseCache:
    """The response cache of one directory (docs/cache.md): the record of an experiment.

    Args:
        path: the cache directory (``--cache``; a design's is ``results/cache/<design>.sqlite``).
            Created when missing, unless ``readonly``.
        readonly: only read (``ma cache``, ``ma cache verify``, ``ma library``): the cache must
            exist and hold entries.

    Raises:
        CacheError: the path is not a cache directory, it is on a network filesystem without
            ``MARKET_AGENTS_CACHE_JOURNAL=delete`` (:mod:`market_agents.llm.filesystem`), the
            sqlite file is damaged, the cache was emptied or deleted after it held paid
            answers, it cannot be opened, or (not readonly) a test write fails (a full disk
            fails here, before any call), or an answer kept by :meth:`keep` fails its check.

    Opened for writing, it first stores the answers an earlier process kept beside it when
    the store could not take them (``unstored/``, :meth:`keep`).

    Protocol:
        Run protocol §1 (one cache per design, also the recorded decision library) and §6 (a
        replay from the cache reproduces every run at zero USD).
    """

    def __init__(self, path: str | Path, readonly: bool = False):
        # a regular file, an unreadable directory, a network filesystem
        self.path = check_path(path, write=False)
        settings = _store_settings(self.path)
        db = _db(self.path)
        problem = damage(self.path)
        if problem:
            raise CacheError(f"{db}: {problem}; move it away and restore a backup")
        check_record(self.path)  # before anything is created there
        check_path(self.path, write=not readonly)
        if readonly and (not db.exists() or db.stat().st_size == 0):
            what = "no" if not db.exists() else "an empty"
            raise CacheError(f"{self.path}: not an LLM response cache ({what} {CACHE_DB} "
                             "inside)")
        try:
            # no eviction: the cache is a record, not a best-effort memo
            self._store = diskcache.Cache(str(self.path), eviction_policy="none", timeout=120,
                                          size_limit=2**62, **settings)
        except (sqlite3.Error, OSError) as exc:
            raise CacheError(f"--cache {self.path}: cannot open {CACHE_DB} ({exc})") from None
        self.owner = Owner.me()
        self._paid_marked = (self.path / PAID_MARKER).exists()
        if not readonly:
            with self._guard("write a test entry"):  # a full disk fails here, before any call
                self._store.set("probe:" + self.owner.token, "", retry=True)
                self._store.delete("probe:" + self.owner.token, retry=True)
            self._store_kept()

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Sqlite and file errors as one CacheError naming the cache (a full disk, a file
        damaged while open)."""
        try:
            yield
        except sqlite3.Error as exc:
            raise CacheError(f"--cache {self.path}: cannot {what} ({exc})") from None
        except OSError as exc:
            raise CacheError(f"--cache {self.path}: cannot {what} "
                             f"({exc.strerror or exc})") from None

    # --- entries ----------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer of a request.

        Args:
            key: the request key, :meth:`LLMRequest.key` (64 hex characters).

        Returns:
            The stored body (request, answer text, usage, timing, priced cost, parsed
            decision), or None when the request has no entry.

        Raises:
            CacheError: the entry fails its checksum or cannot be read.
        """
        raw = self._raw(key)
        return None if raw is None else self._body(key, raw)

    def _raw(self, key: str) -> Any:
        """The stored value as-is; bytes that are not UTF-8 (flipped inside an answer) come
        back as :class:`_Undecodable`, which fails its check like any damaged entry."""
        with self._guard("read"):
            try:
                return self._store.get(key, default=None, retry=True)
            except sqlite3.OperationalError as exc:
                if "decode" not in str(exc):
                    raise
                return _Undecodable()

    def _body(self, key: str, raw: Any) -> dict[str, Any]:
        problem = self._verify(key, raw)
        if problem is not None:
            raise CacheError(f"--cache {self.path}: entry {key} fails its check ({problem}): "
                             "the stored answer was damaged or edited, so the record cannot "
                             f"be trusted; run `ma cache verify {self.path}`")
        return json.loads(raw)["body"]

    @staticmethod
    def _verify(key: str, raw: Any) -> str | None:
        if isinstance(raw, _Undecodable):
            return "not UTF-8 text"
        if not isinstance(raw, str):
            return f"not JSON text ({type(raw).__name__})"
        try:
            entry = json.loads(raw)
        except ValueError:
            return "unparseable JSON"
        if not isinstance(entry, dict) or not isinstance(entry.get("body"), dict):
            return "no body"
        if entry.get("v") != ENTRY_VERSION:
            return f"entry version {entry.get('v')!r}"
        if entry["body"].get("key") != key:
            return "stored under another key"
        if entry.get("sha256") != _checksum(entry["body"]):
            return "checksum mismatch"
        return None

    @staticmethod
    def _text(key: str, body: dict[str, Any]) -> str:
        body = {**body, "key": key}
        return canonical_json({"v": ENTRY_VERSION, "sha256": _checksum(body), "body": body})

    def put(self, key: str, body: dict[str, Any], paid: bool = False) -> dict[str, Any]:
        """Store an answer, first writer wins, and release this process's claim on it.

        Both happen in one transaction, and the run then uses what the record says.

        Args:
            key: the request key, :meth:`LLMRequest.key`.
            body: the answer to store (JSON-serializable; the checksum is added here).
            paid: the answer cost money: the cache is marked (``paid.json``), so that emptying
                or deleting it later is caught as a lost record.

        Returns:
            The body the cache now holds under ``key``: ``body``, or the entry another process
            stored first.

        Raises:
            CacheError: the store cannot be written (a full disk) or the earlier entry fails
                its check.
        """
        text = self._text(key, body)
        with self._guard("store an answer"), self._store.transact(retry=True):
            if not self._store.add(key, text, retry=True):
                stored = self._body(key, self._raw(key))
            else:
                stored = json.loads(text)["body"]
            self._release(key)
        if paid and not self._paid_marked:
            self._mark_paid()
        return stored

    def keep(self, key: str, body: dict[str, Any]) -> Path | None:
        """Keep an answer that :meth:`put` could not store (a full disk) in its own file,
        ``unstored/<key>.json`` beside cache.db, checksummed like an entry; the next process
        that opens the cache for writing stores it (:meth:`_store_kept`).

        Args:
            key: the request key.
            body: the answer, as it would have been stored.

        Returns:
            The file, or None when it could not be written either.
        """
        path = self.path / KEPT_DIR / f"{key}.json"
        try:
            path.parent.mkdir(exist_ok=True)
            write_text_atomic(path, self._text(key, body))
        except OSError:
            return None
        return path

    def _store_kept(self) -> None:
        """Store the answers an earlier process kept (:meth:`keep`), then remove their files;
        one that fails its check raises :class:`CacheError` naming its file."""
        folder = self.path / KEPT_DIR
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.json")):
            key = path.stem
            with self._guard(f"read {path}"):
                raw = path.read_text()
            problem = self._verify(key, raw)
            if problem is not None:
                raise CacheError(f"{path}: a kept answer fails its check ({problem}); move it "
                                 "away to open this cache")
            body = json.loads(raw)["body"]
            self.put(key, body, paid=float(body.get("usd") or 0.0) > 0)
            path.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()

    def put_raw(self, key: str, value: Any) -> None:
        """Overwrite a value as-is (tests use it to plant damaged entries)."""
        self._store.set(key, value, retry=True)

    def _mark_paid(self) -> None:
        marker = self.path / PAID_MARKER
        if not marker.exists():
            with self._guard("write " + PAID_MARKER):
                write_json_atomic(marker, {"first_paid_at": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "note": "this cache holds paid "
                    "answers: an empty or missing cache.db here means the record was lost"})
        self._paid_marked = True

    # --- claims -------------------------------------------------------------------------------

    def claim(self, key: str, lease_s: float) -> tuple[str, dict[str, Any] | None]:
        """Claim a request before calling the provider, so processes sharing a cache pay once.

        The answer check and the claim happen in one transaction.

        Args:
            key: the request key, :meth:`LLMRequest.key`.
            lease_s: seconds the claim holds before another process may take it over.

        Returns:
            ``("answer", body)`` when the request is answered; ``("mine", previous)`` when this
            process now holds the claim (``previous``: the stale or own claim it replaced, or
            None when it was free); ``("held", claim)`` when a live owner holds it.

        Raises:
            CacheError: the store cannot be read or written.
        """
        ck = CLAIM_PREFIX + key
        # a look without the write lock first: waiters poll, and most looks find the claim held
        raw = self._raw(key)
        if raw is not None:
            return "answer", self._body(key, raw)
        with self._guard("read a claim"):
            held = self._store.get(ck, default=None, retry=True)
        info = json.loads(held) if held else None
        if self._live_claim(info):
            return "held", info
        with self._guard("claim a request"), self._store.transact(retry=True):
            raw = self._raw(key)
            if raw is not None:
                return "answer", self._body(key, raw)
            held = self._store.get(ck, default=None, retry=True)
            info = json.loads(held) if held else None
            if self._live_claim(info):
                return "held", info
            self._store.set(ck, json.dumps({
                "token": self.owner.token, "host": self.owner.host, "pid": self.owner.pid,
                "started": self.owner.started, "expires": time.time() + lease_s,
                "took_over": bool(info and info.get("token") != self.owner.token)}),
                retry=True)
        return "mine", info

    def _live_claim(self, info: dict[str, Any] | None) -> bool:
        """Another owner's claim that still holds: lease not over, owner not known dead."""
        return bool(info) and info.get("token") != self.owner.token and time.time() < info.get(
            "expires", 0) and _owner_alive(info, self.owner)

    def release(self, key: str) -> None:
        """Give up this process's claim on ``key`` (the call stopped without an answer)."""
        with self._guard("release a claim"), self._store.transact(retry=True):
            self._release(key)

    def _release(self, key: str) -> None:
        ck = CLAIM_PREFIX + key
        held = self._store.get(ck, default=None, retry=True)
        if held and json.loads(held).get("token") == self.owner.token:
            self._store.delete(ck, retry=True)

    def claims(self) -> list[dict[str, Any]]:
        """Pending claims (requests some process was answering when it stopped or is now)."""
        out = []
        for key in self._all_keys():
            if key.startswith(CLAIM_PREFIX):
                raw = self._store.get(key, default=None, retry=True)
                if raw:
                    out.append({"key": key[len(CLAIM_PREFIX):]} | json.loads(raw))
        return out

    # --- whole-store views ----------------------------------------------------------------------

    def _all_keys(self) -> list[str]:
        with self._guard("list entries"):
            return sorted(k for k in self._store.iterkeys() if isinstance(k, str))

    def keys(self) -> list[str]:
        """The request keys of every stored entry, sorted (claims and probes left out)."""
        return [k for k in self._all_keys() if not k.startswith((CLAIM_PREFIX, "probe:"))]

    def scan(self) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
        """Every entry, verified and left in place: ([(key, body)], [keys that fail])."""
        good, bad = [], []
        for key in self.keys():
            raw = self._raw(key)
            if self._verify(key, raw) is None:
                good.append((key, json.loads(raw)["body"]))
            else:
                bad.append(key)
        return good, bad

    def delete(self, keys: list[str]) -> int:
        """Remove entries (``ma cache retry-failures``: a deliberate re-fetch)."""
        n = 0
        with self._guard("remove entries"), self._store.transact(retry=True):
            for key in keys:
                n += bool(self._store.delete(key, retry=True))
        return n

    def __len__(self) -> int:
        return len(self.keys())

    def close(self) -> None:
        """Close the sqlite store."""
        self._store.close()

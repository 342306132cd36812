"""The response cache, which is also the recorded decision library.

A diskcache (sqlite) store at a given path, safe for several processes at once. Keys are
:meth:`LLMRequest.key` (sha256 of the canonical request minus transport settings). Values are
JSON text, never pickles: the request, the answer text, usage, timing, the priced cost and the
parsed decision; a call that failed after its retries is stored too, so a replay makes zero
calls. Each entry carries a checksum; an entry that does not verify is reported, deleted and
re-fetched, never used.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from market_agents.core import canonical_json

log = logging.getLogger(__name__)
ENTRY_VERSION = 1


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        import diskcache

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # no eviction: the cache is a record, not a best-effort memo
        self._store = diskcache.Cache(str(self.path), eviction_policy="none", timeout=120,
                                      size_limit=2**62)
        self.corrupt: list[str] = []

    def get(self, key: str) -> dict[str, Any] | None:
        raw = self._store.get(key, default=None, retry=True)
        if raw is None:
            return None
        problem = self._verify(key, raw)
        if problem is None:
            return json.loads(raw)["body"]
        log.warning("cache %s: corrupt entry %s (%s); re-fetching", self.path, key[:12], problem)
        self.corrupt.append(key)
        self._store.delete(key, retry=True)
        return None

    @staticmethod
    def _verify(key: str, raw: Any) -> str | None:
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

    def put(self, key: str, body: dict[str, Any]) -> None:
        """First writer wins: if another process stored this key meanwhile, keep its entry."""
        body = {**body, "key": key}
        text = canonical_json({"v": ENTRY_VERSION, "sha256": _checksum(body), "body": body})
        self._store.add(key, text, retry=True)

    def put_raw(self, key: str, value: Any) -> None:
        """Overwrite a value as-is (tests use it to plant corrupt entries)."""
        self._store.set(key, value, retry=True)

    def scan(self) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
        """Every entry, verified but left in place: ([(key, body)], [corrupt keys])."""
        good, bad = [], []
        for key in self.keys():
            raw = self._store.get(key, default=None, retry=True)
            if self._verify(key, raw) is None:
                good.append((key, json.loads(raw)["body"]))
            else:
                bad.append(key)
        return good, bad

    def __len__(self) -> int:
        return len(self._store)

    def keys(self) -> list[str]:
        return sorted(self._store.iterkeys())

    def close(self) -> None:
        self._store.close()

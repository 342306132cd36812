"""The deviations log (protocol §6): ``<root>/manifests/deviations.jsonl``, one dated JSON line
per deviation from the pre-registration, appended and never rewritten.

An entry is written by ``--deviation "reason"`` on a command that would otherwise be refused
(a confirmatory live call whose design, code, commit or work tree no longer matches the
freeze) or that the user marks as deviating, and by ``ma deviations add "reason"`` for one
that is not tied to a run. Every run manifest the deviation touches carries the entry (its
``deviations`` key). The same reason for the same differences is logged once, however many
jobs of a workflow carry it; ``ma deviations`` prints the log.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from market_agents.core import canonical_json
from market_agents.errors import ConfigError
from market_agents.layout import ROOT, deviations_log


def log_path(root: Path | str = ROOT) -> Path:
    """The deviations log of a results root (``layout.deviations_log``)."""
    return deviations_log(root)


def read(root: Path | str = ROOT) -> list[dict[str, Any]]:
    """Every entry of the log, oldest first ([] when there is none)."""
    path = log_path(root)
    if not path.exists():
        return []
    entries = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: line {n} is not valid JSON ({exc.msg}); the log is "
                              "append-only: restore the line from a backup") from None
    return entries


def record(root: Path | str, reason: str, mismatches: list[str] | None = None,
           design: str | None = None, git: dict[str, Any] | None = None) -> dict[str, Any]:
    """Append a deviation to the log, or return the logged one with the same reason, design
    and differences (a workflow passes one reason to many jobs).

    Args:
        root: the results root (``results`` for live work).
        reason: why the pre-registration is departed from (non-empty).
        mismatches: what differs from the freeze (``freeze.mismatches``), if anything.
        design: the design the deviation concerns, if any.
        git: ``freeze.git_revision()`` now, recorded with the entry.

    Returns:
        The entry: id, date (UTC), reason, design, mismatches, git, command.
    """
    reason = reason.strip()
    if not reason:
        raise ConfigError("a deviation needs a reason, e.g. --deviation \"re-run share_25 "
                          "after the provider outage of 2025-06-01\" (or ma deviations add "
                          "\"...\")")
    mismatches = list(mismatches or [])
    ident = hashlib.sha256(canonical_json([reason, design, mismatches]).encode()).hexdigest()[:12]
    path = log_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One line appended with O_APPEND under an exclusive lock: concurrent jobs carrying the
    # same deviation log it once, and never interleave or truncate a line.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for entry in read(root):
            if entry.get("id") == ident:
                return entry
        entry = {"id": ident, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "reason": reason, "design": design, "mismatches": mismatches,
                 "git": git or {}, "command": " ".join(["ma", *sys.argv[1:]])}
        os.write(fd, (json.dumps(entry, sort_keys=True, allow_nan=False) + "\n").encode())
        os.fsync(fd)
        return entry
    finally:
        os.close(fd)


def render(entries: list[dict[str, Any]]) -> str:
    """The log as text, one block per entry."""
    if not entries:
        return "no deviations recorded"
    lines = []
    for e in entries:
        head = f"{e['date']}  {e['id']}  {e.get('design') or '-'}: {e['reason']}"
        lines.append(head)
        lines += [f"    {m}" for m in e.get("mismatches", [])]
    return "\n".join(lines)

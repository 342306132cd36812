"""Provenance of the contract's results (``.research/results/.provenance.json``): for each
results directory, the execution that produced it (``execution_id``, ``commit_hash``) and the
SHA-256 of every file in it, so a byte changed afterwards is found and named.

A local execution gets an id of its own (host, start time and process id, hashed); a CI or
cluster execution passes its own (``EXECUTION_ID=…``). A run id executed more than once keeps
every execution: the entry's ``execution_id`` is the one reported (the directory's top level),
``other_executions`` lists the others, kept under ``executions/<execution_id>/``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from market_agents.atomic import write_json_atomic
from market_agents.core import sha256_file

PROVENANCE_FILE = ".provenance.json"
EXECUTION_ENV = "EXECUTION_ID"


def execution_id(now: dt.datetime | None = None) -> str:
    """``$EXECUTION_ID`` when set (a platform's run id), else ``local-`` and 16 hex digits of
    the SHA-256 of host, start time and pid."""
    given = os.environ.get(EXECUTION_ENV, "").strip()
    if given:
        return given
    start = (now or dt.datetime.now(dt.UTC)).isoformat()
    digest = hashlib.sha256(f"{socket.gethostname()}|{start}|{os.getpid()}".encode())
    return f"local-{digest.hexdigest()[:16]}"


# A sanity run's working folder sits beside its results; it is not a result.
WORK = "work"


def file_hashes(directory: Path) -> dict[str, str]:
    """Relative POSIX path -> SHA-256 of every file under ``directory`` (a sanity run's
    working folder aside), sorted."""
    return {rel: sha256_file(p) for p in sorted(directory.rglob("*"))
            if p.is_file() and (rel := p.relative_to(directory).as_posix()).split("/")[0]
            != WORK}


def load(results_root: Path) -> dict[str, Any]:
    """The provenance file of a results root ({} when absent)."""
    path = results_root / PROVENANCE_FILE
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def record(results_root: Path, run_id: str, execution: str, commit: str | None,
           others: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Declare the results directory ``results_root/run_id`` as produced by ``execution`` at
    ``commit`` (the execution reported), with the hash of every file it holds now, the earlier
    executions kept there included; other directories' entries are kept.

    Args:
        results_root: ``.research/results`` (or a sanity run's root).
        run_id: the results directory's name.
        execution: the reported execution's id (its files are the directory's top level).
        commit: the commit it executed.
        others: the other executions of the run id kept in the directory
            (``contract.kept_executions``): ``execution_id``, ``commit_hash``, ``started``,
            ``path``; listed as ``other_executions``.

    Returns:
        The entry written.
    """
    entry = {"execution_id": execution, "commit_hash": commit,
             "files": file_hashes(results_root / run_id)}
    if others:
        entry["other_executions"] = others
    data = load(results_root)
    data[run_id] = entry
    write_json_atomic(results_root / PROVENANCE_FILE, data)
    return entry


def check(results_root: Path, run_id: str) -> list[tuple[bool, str]]:
    """(ok, line) per check of one results directory against its provenance entry: the entry
    exists, then every declared file exists with its hash, and no file is undeclared."""
    entry = load(results_root).get(run_id)
    where = results_root / PROVENANCE_FILE
    if not entry:
        return [(False, f"{where}: no entry for {run_id} (results that arrived any other way "
                        "fail verification)")]
    out = [(bool(entry.get("execution_id") and entry.get("commit_hash")),
            f"{where}: {run_id} produced by execution {entry.get('execution_id')} at commit "
            f"{str(entry.get('commit_hash'))[:12]}")]
    directory = results_root / run_id
    now = file_hashes(directory) if directory.is_dir() else {}
    for name, digest in sorted(entry.get("files", {}).items()):
        path = directory / name
        if name not in now:
            out.append((False, f"{path}: missing"))
        else:
            same = now[name] == digest
            out.append((same, f"{path}: sha256 {'matches' if same else 'differs from'} the "
                              "provenance"))
    for name in sorted(set(now) - set(entry.get("files", {}))):
        out.append((False, f"{directory / name}: not in the provenance"))
    return out

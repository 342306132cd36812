"""The declarations record (``.research/record.json``, run contract): one entry per pilot or full
run, declared before it is dispatched, append-only.

An entry holds the run id, its stage (``pilot`` or ``full``: the contract's MODE), the claim it
serves, the hashes of its run config and of the design files it runs, the commit that will
execute it (HEAD when declared), the date, and ``entry_sha256``: the SHA-256 of the entry's
other fields chained to the previous entry's, so an entry edited, reordered or dropped by hand no
longer matches and the next command refuses. The committed record (HEAD's) must be a prefix of
the working copy: rewriting history and re-chaining the hashes is refused too.

``ma record declare`` appends and commits nothing; a pilot or full run starts only when its
declaration is in the committed record (:func:`require_declared`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from market_agents.atomic import write_json_atomic
from market_agents.core import canonical_json
from market_agents.errors import MarketAgentsError

RECORD = Path(".research/record.json")
STAGES = ("pilot", "full")
FIELDS = ("run_id", "stage", "claim", "run_config", "config_hash", "design_hash", "commit",
          "date")


class RecordError(MarketAgentsError):
    """The record was edited by hand, or a run is not declared as it is about to run."""


def git(root: Path, *args: str) -> str | None:
    """Stdout of ``git args`` in ``root`` (stripped), None when git fails or is missing."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def head(root: Path) -> str | None:
    """The commit checked out in ``root`` (None outside a git work tree)."""
    return git(root, "rev-parse", "HEAD")


def entry_sha256(entry: dict[str, Any], previous: str) -> str:
    """The chained hash of an entry: its declared fields and the previous entry's hash."""
    fields = {k: entry.get(k) for k in FIELDS}
    return hashlib.sha256(f"{previous}\n{canonical_json(fields)}".encode()).hexdigest()


def _parse(text: str, where: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{where}: not valid JSON ({exc.msg}); restore it with "
                          f"`git checkout -- {RECORD}`") from None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not all(isinstance(e, dict) for e in runs):
        raise RecordError(f"{where}: expected {{\"runs\": [entries]}}; restore it with "
                          f"`git checkout -- {RECORD}`")
    return runs


def check_chain(runs: list[dict[str, Any]], where: str) -> None:
    """Every entry has exactly the declared fields and its chained hash; RecordError naming the
    first entry that does not (edited, reordered or dropped by hand)."""
    previous = ""
    for i, entry in enumerate(runs):
        extra = sorted(set(entry) - {*FIELDS, "entry_sha256"})
        if extra or entry.get("entry_sha256") != entry_sha256(entry, previous):
            raise RecordError(
                f"{where}: entry {i + 1} (run_id {entry.get('run_id')!r}) was edited by hand "
                f"({'unknown keys ' + ', '.join(extra) if extra else 'entry_sha256 does not match'}"
                f"): the record is append-only. Restore it with `git checkout -- {RECORD}` and "
                "declare changes as new runs with `ma record declare`")
        previous = entry["entry_sha256"]


def load(root: Path = Path(".")) -> list[dict[str, Any]]:
    """The working copy's entries, checked: the hash chain holds and the committed record is a
    prefix of it. An absent record is empty."""
    path = root / RECORD
    runs = _parse(path.read_text(), str(path)) if path.exists() else []
    check_chain(runs, str(path))
    committed = load_committed(root)
    if runs[:len(committed)] != committed:
        raise RecordError(f"{path}: an entry of the committed record was rewritten or dropped; "
                          f"the record is append-only. Restore it with `git checkout -- {RECORD}`")
    return runs


def load_committed(root: Path = Path(".")) -> list[dict[str, Any]]:
    """The entries of the record in HEAD (empty when none is committed)."""
    text = git(root, "show", f"HEAD:{RECORD.as_posix()}")
    if text is None:
        return []
    runs = _parse(text, f"{RECORD} in HEAD")
    check_chain(runs, f"{RECORD} in HEAD")
    return runs


def declare(run_id: str, stage: str, claim: str, run_config: str, config_hash: str,
            design_hash: str, root: Path = Path("."), date: str | None = None) -> dict[str, Any]:
    """Append a declaration (nothing is committed). RecordError when ``run_id`` is declared
    already (a run is declared once; declare a new id) or the record was edited by hand."""
    if stage not in STAGES:
        raise RecordError(f"--stage {stage!r}: a declaration is for a pilot or a full run")
    if not claim.strip():
        raise RecordError("--claim is empty: say which claim the run serves")
    runs = load(root)
    if any(e["run_id"] == run_id for e in runs):
        raise RecordError(f"{root / RECORD}: run {run_id!r} is declared already; entries are "
                          "never rewritten: declare the changed run under a new run id")
    commit = head(root)
    if commit is None:
        raise RecordError(f"{root}: not a git work tree with a commit: the declaration names "
                          "the commit that will execute the run")
    entry = {"run_id": run_id, "stage": stage, "claim": claim.strip(), "run_config": run_config,
             "config_hash": config_hash, "design_hash": design_hash, "commit": commit,
             "date": date or dt.date.today().isoformat()}
    entry["entry_sha256"] = entry_sha256(entry, runs[-1]["entry_sha256"] if runs else "")
    write_json_atomic(root / RECORD, {"runs": [*runs, entry]})
    return entry


def find(runs: list[dict[str, Any]], run_id: str) -> dict[str, Any] | None:
    """The entry of ``run_id`` in the record's runs, or None."""
    return next((e for e in runs if e["run_id"] == run_id), None)


def require_declared(run_id: str, stage: str, config_hash: str, design_hash: str,
                     root: Path = Path(".")) -> dict[str, Any]:
    """A pilot or full run starts only when it is declared, for this stage, in the committed
    record, with the run config and design files it has now, at a commit HEAD descends from.

    Returns the declaration; RecordError saying which run, which file and what to do otherwise.
    """
    path = root / RECORD
    runs = load(root)
    entry = find(load_committed(root), run_id)
    if entry is None:
        what = ("is declared but not committed: commit the record"
                if find(runs, run_id) else
                f"is not declared: run `ma record declare {run_id} --stage {stage} --claim \"…\"`"
                ", commit the record")
        raise RecordError(f"run {run_id!r} {what} in {path}, then `make run RUN_ID={run_id} "
                          f"MODE={stage}` (a sanity run needs no declaration)")
    if entry["stage"] != stage:
        raise RecordError(f"run {run_id!r} is declared in {path} for stage {entry['stage']!r}, "
                          f"not {stage!r}: run it with MODE={entry['stage']}, or declare a new "
                          "run id for this stage")
    changed = [name for name, now in (("config_hash", config_hash), ("design_hash", design_hash))
               if entry[name] != now]
    if changed:
        raise RecordError(f"run {run_id!r}: its {' and '.join(changed)} differ from the "
                          f"declaration in {path} (the run config or a design file changed "
                          "since): restore them, or declare the changed run under a new run id")
    if git(root, "merge-base", "--is-ancestor", entry["commit"], "HEAD") is None:
        raise RecordError(f"run {run_id!r} was declared at commit {entry['commit'][:12]}, which "
                          f"HEAD does not descend from: check out a commit after the "
                          f"declaration in {path}")
    return entry

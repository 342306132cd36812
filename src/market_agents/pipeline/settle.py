"""``ma spend settle``: release the reservation of a paid job that will not be resumed
(docs/guards.md, "Settling a job that will not be resumed").

A paid job killed before it ended stays in the spend ledger at its worst case (its
``usd_cap``) until the same output is run again: nobody knows it paid less. A run re-made under
another ``--out`` never settles the old record, and enough of them fill the project cap. This
settles one at what it can be shown to have paid, never less:

- the answers its process paid for and its response cache recorded: every entry of the cache
  named in its spend record (or ``--cache``) whose ``stored_by`` is the record's process
  (host, pid, start time) and recorded since it started, plus answers kept beside the cache
  (``unstored/``) when the store could not take them. A record without a process (written
  before records named one) counts every paid answer the cache recorded since it started;
- plus the worst case of the calls it had in flight when it stopped (sent, perhaps billed,
  never recorded): its ``in_flight`` (the most paid calls at once) times the largest worst
  case per call its budget reserved for a recorded answer; when either is unknown the
  settlement is refused, naming ``--in-flight-usd``;
- at most its worst case: a run's budget never pays past its ``usd_cap``.

It is refused while anything may still be running it: its process (when it ran on this host;
on another host it is refused, naming the host), a job of the Snakemake invocation it ran
under (``holder.jobs_of``), or, for a run under ``<results>/runs``, a workflow that holds the
project (``holder.held``) and may resume it. The record is kept, with ``spent_usd``,
``settled_at``, ``settled_by: "ma spend settle"`` and how the figure was made
(``settlement``); it is never deleted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from market_agents.atomic import write_json_atomic
from market_agents.errors import ConfigError
from market_agents.layout import runs_dir, spend_dir
from market_agents.pipeline import holder
from market_agents.protocol import ledger
from market_agents.sim.rundir import is_complete

SETTLED_BY = "ma spend settle"


@dataclass(frozen=True)
class Paid:
    """What a cache recorded of one process's paid calls."""

    usd: float  # the USD of its recorded answers (and failures whose attempts were billed)
    answers: int  # how many entries
    worst_call_usd: float | None  # the largest worst case reserved for one call (None: none)


def settle(root: Path | str, run_dir: Path | str, cache: Path | str | None = None,
           in_flight_usd: float | None = None) -> dict[str, Any]:
    """Settle the spend record of ``run_dir`` (see the module doc) and return it.

    Args:
        root: the results root whose ledger holds the record.
        run_dir: the job's output (a run directory, a Bazaar output folder), as ``ma spend``
            lists it.
        cache: its response cache, for a record that does not name one.
        in_flight_usd: the worst case of its calls in flight, for a record that cannot
            bound them (no ``in_flight``, or no recorded answer with its reservation).

    Returns:
        The settled record, as written.

    Raises:
        ConfigError: one line: no unsettled record for ``run_dir``, something may still be
            running it, its cache is unknown or cannot be read, or its calls in flight
            cannot be bounded; the message says what to pass or do.
    """
    root, out = Path(root), Path(run_dir)
    path = ledger.record_path(root, out)
    where = f"ma spend settle {run_dir}"
    if not path.exists():
        raise ConfigError(f"{where}: no spend record of {out.resolve()} in {spend_dir(root)}/ "
                          "(`ma spend` lists the unfinished jobs and their run directories)")
    rec = ledger.read_record(path)
    if rec.get("spent_usd") is not None:
        raise ConfigError(f"{where}: already settled at {ledger.usd(float(rec['spent_usd']))} "
                          f"USD ({rec.get('settled_by') or 'by the job'}, "
                          f"{rec.get('settled_at')}); nothing to do")
    if rec["kind"] == "run" and is_complete(Path(rec["out"])):
        raise ConfigError(f"{where}: the run finished (its manifest is its record, counted by "
                          "`ma spend`); nothing to settle")
    busy = running(rec, root)
    if busy:
        raise ConfigError(f"{where}: refused: {busy}")
    cache_dir = cache if cache is not None else rec.get("cache")
    if cache_dir is None:
        raise ConfigError(f"{where}: its spend record {path} does not name the run's response "
                          "cache (written before records did); pass --cache DIR, the --cache "
                          f"of `{rec.get('command')}`")
    paid = recorded(Path(cache_dir), rec)
    held = ledger.held_usd(rec)
    if in_flight_usd is not None:
        if in_flight_usd < 0:
            raise ConfigError(f"--in-flight-usd {in_flight_usd}: must be >= 0 USD")
        flying, basis = in_flight_usd, "--in-flight-usd"
    elif rec.get("in_flight") is not None and paid.worst_call_usd is not None:
        flying = rec["in_flight"] * paid.worst_call_usd
        basis = (f"{rec['in_flight']} calls in flight x {paid.worst_call_usd:.6f} USD, the "
                 "largest worst case per call its budget reserved")
    elif rec.get("in_flight") == 0:
        flying, basis = 0.0, "no paid route"
    else:
        why = ("it recorded no paid answer to bound a call by" if rec.get("in_flight")
               is not None else "its record does not say how many calls it had in flight")
        raise ConfigError(f"{where}: cannot bound the calls it had in flight ({why}); pass "
                          f"--in-flight-usd USD (at most its worst case {ledger.usd(held)} USD)")
    spent = paid.usd + flying
    if rec.get("worst_usd") is not None:
        spent = min(spent, float(rec["worst_usd"]))  # its budget never pays past its usd_cap
    rec.update(spent_usd=round(spent, 6), settled_at=ledger.utc_now(), settled_by=SETTLED_BY,
               settlement={"held_usd": round(held, 6), "cache": str(Path(cache_dir).resolve()),
                           "recorded_answers": paid.answers,
                           "recorded_usd": round(paid.usd, 6),
                           "in_flight_usd": round(flying, 6), "in_flight_basis": basis})
    write_json_atomic(path, rec)
    return rec


def running(rec: dict[str, Any], root: Path) -> str | None:
    """What may still be running the job of spend record ``rec`` (None: nothing): its
    process, a job of its Snakemake invocation, or a workflow holding the project of a run
    under ``<root>/runs``."""
    # why: the process check is the cache's (claims name their owner the same way)
    from market_agents.llm.cache import process_alive

    proc = rec.get("process")
    if proc:
        alive = process_alive(proc)
        if alive is None:
            return (f"it ran on host {proc.get('host')} (pid {proc.get('pid')}), and this host "
                    "cannot tell whether it still runs; settle it there")
        if alive:
            return (f"pid {proc.get('pid')} (`{rec.get('command')}`, started "
                    f"{rec.get('started_at')}) still runs it; settle once it has ended")
    token = rec.get("holder")
    jobs = holder.jobs_of(token) if token else []
    if jobs:
        return (f"jobs of the Snakemake invocation that ran it still run (pid "
                f"{', '.join(map(str, jobs))}); settle once they have ended")
    out = Path(rec["out"])
    runs = runs_dir(False, root).resolve()
    if runs in out.parents:
        state = root.resolve().parent / holder.STATE_DIR
        who = holder.held(state)
        if who is not None:
            name = who if isinstance(who, str) else who.describe()
            return f"{name} holds the project and may resume this run; settle once it has ended"
    return None


def recorded(cache: Path, rec: dict[str, Any]) -> Paid:
    """What ``cache`` recorded of the paid calls of the job of spend record ``rec``.

    Raises:
        ConfigError: the cache cannot be read, or holds entries that fail their check (a
            damaged answer may be one the job paid).
    """
    # why: the cache (diskcache, sqlite) loads only to settle, not when `ma` registers it
    from market_agents.llm.cache import KEPT_DIR, CacheError, ResponseCache

    try:
        store = ResponseCache(cache, readonly=True)
    except CacheError as exc:
        raise ConfigError(f"--cache {cache}: {exc}") from None
    try:
        good, bad = store.scan()
    finally:
        store.close()
    if bad:
        raise ConfigError(f"--cache {cache}: {len(bad)} entr(ies) fail their check, e.g. "
                          f"{bad[0]}; what the job paid cannot be counted: run `ma cache verify "
                          f"{cache}`")
    bodies = [body for _, body in good]
    for kept in sorted((cache / KEPT_DIR).glob("*.json")):  # answers the store could not take
        try:
            bodies.append(json.loads(kept.read_text())["body"])
        except (OSError, ValueError, KeyError, TypeError):
            raise ConfigError(f"{kept}: a kept answer cannot be read; what the job paid "
                              "cannot be counted") from None
    proc = rec.get("process")
    since = str(rec.get("started_at") or "")
    usd, answers, worst = 0.0, 0, None
    for body in bodies:
        if str(body.get("recorded_at") or "") < since:
            continue
        if proc is not None and not _same_process(body.get("stored_by"), proc):
            continue
        cost = float(body.get("usd") or 0.0)
        reserved = body.get("reserved_usd")
        if cost <= 0 and reserved is None:
            continue  # a free answer (mock, a free route), or nothing billed
        usd += cost
        answers += 1
        if reserved is not None:
            worst = max(worst or 0.0, float(reserved))
    return Paid(usd, answers, worst)


def _same_process(stored_by: Any, proc: dict[str, Any]) -> bool:
    return isinstance(stored_by, dict) and all(
        stored_by.get(k) == proc.get(k) for k in ("host", "pid", "started"))

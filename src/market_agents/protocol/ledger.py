"""The project's one spend ledger (protocol §1, §5.3): what every paying command (``ma run``,
``ma cell``, ``ma design``, ``ma bazaar eval``, the budget gate) reads before its first call.

Recorded spend is read from the records the project keeps under its results root, never from
a separate tally that could drift:

- every finished run under ``<root>/runs/<design>/<cell>/seed<NNNN>/``: the USD of the paid
  answers it used (:func:`recorded_usd`, from its manifest);
- every *spend record* under ``<root>/manifests/spend/``: written by a paying job before its
  first call (with its planned USD) and settled with what it paid when it ends. A job outside
  ``<root>/runs`` (``ma run --out`` elsewhere, a live Bazaar evaluation) is known to the
  ledger only through its record; a job that never settled (killed, or still running) counts
  at its worst case (what it can pay at most, its ``usd_cap``) until it is resumed and
  finishes; a record without a worst case, at its planned USD. A job that will not be
  resumed is settled by ``ma spend settle`` (:mod:`market_agents.pipeline.settle`) at what
  its cache recorded plus the worst case of its calls in flight; the record is kept, with
  ``settled_by``.

:func:`check` refuses a new job before any call when its worst case (a run's ``usd_cap``,
never its planning estimate) plus the recorded spend passes a cap, naming the ledger total,
the job's worst case and the cap. Rehearsals, sanity and smoke runs keep
their own results root, so they never count against (or change) the live ledger.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from market_agents.atomic import write_json_atomic
from market_agents.errors import BudgetExceeded, ConfigError
from market_agents.inputs import HOLDER_ENV
from market_agents.layout import ROOT, runs_dir, spend_dir
from market_agents.sim.rundir import MANIFEST_FILE, OUTCOMES_FILE, is_complete, paid_usd


@dataclass(frozen=True)
class Entry:
    """One paid job in the ledger: a finished run, or a spend record."""

    kind: str  # "run" (a simulation) or "bazaar" (a Bazaar evaluation)
    path: str  # the run directory or output folder
    design: str | None  # the design of a run under <root>/runs, else the record's
    usd: float  # recorded USD, or the planned USD of a job that has not settled
    settled: bool  # False: a job that started and never recorded what it paid
    record: str | None = None  # its spend record, when it has one
    command: str | None = None  # the command that started it (from its record)
    started_at: str | None = None  # when it started (from its record)
    settled_by: str | None = None  # "ma spend settle": settled by hand, not by the job


@dataclass(frozen=True)
class Spend:
    """The ledger of one results root."""

    entries: tuple[Entry, ...]

    @property
    def total_usd(self) -> float:
        """Every entry's USD: the project's recorded spend, unfinished jobs at their plan."""
        return sum(e.usd for e in self.entries)

    @property
    def unsettled_usd(self) -> float:
        """The worst case (else planned) USD of jobs that started and never recorded what
        they paid."""
        return sum(e.usd for e in self.entries if not e.settled)

    def design_usd(self, design: str) -> float:
        """The USD of one design's entries (e.g. the pilot's, against the pilot cap)."""
        return sum(e.usd for e in self.entries if e.design == design)

    def summary(self) -> dict[str, Any]:
        """The ledger in figures: total, unsettled, USD by kind and the number of entries."""
        by_kind: dict[str, float] = {}
        for e in self.entries:
            by_kind[e.kind] = by_kind.get(e.kind, 0.0) + e.usd
        return {"total_usd": round(self.total_usd, 6),
                "unsettled_usd": round(self.unsettled_usd, 6),
                "by_kind_usd": {k: round(v, 6) for k, v in sorted(by_kind.items())},
                "jobs": len(self.entries)}


def recorded_usd(run: Path) -> float | None:
    """USD of the paid answers a finished run used (protocol §5.3: sum(llm_usd) over its paid
    answers), from its manifest (``rundir.paid_usd``): every answer from a live provider at its
    priced cost, whether this execution paid for it or read it from the cache. So a run
    killed and resumed counts the answers paid before the kill, and mock answers count
    nothing. Else ``llm_usd`` of outcomes.json; None when the run has not finished. The ledger
    and the gate read a run's spend only through this function."""
    outcomes, manifest = run / OUTCOMES_FILE, run / MANIFEST_FILE
    if manifest.exists():
        return paid_usd(json.loads(manifest.read_text()))
    if outcomes.exists():
        return float(json.loads(outcomes.read_text()).get("llm_usd") or 0.0)
    return None


def spend(root: Path | str = ROOT) -> Spend:
    """Every paid job recorded under ``root`` (a results root: ``results`` for live work)."""
    root = Path(root)
    entries: list[Entry] = []
    runs: set[str] = set()
    for run in sorted(runs_dir(False, root).glob("*/*/seed*")):
        usd = recorded_usd(run)
        if usd is None:
            continue
        runs.add(str(run.resolve()))
        entries.append(Entry("run", str(run), run.parts[-3], usd, True))
    for path in sorted(spend_dir(root).glob("*.json")):
        rec = read_record(path)
        out = Path(rec["out"])
        facts = {"record": str(path), "command": rec.get("command"),
                 "started_at": rec.get("started_at")}
        # executions of this output settled by `ma spend settle` before it was run again:
        # what they paid stays counted, whatever the new execution records
        for old in rec.get("earlier") or []:
            entries.append(Entry(old["kind"], old["out"], old.get("design"),
                                 float(old["spent_usd"]), True, str(path), old.get("command"),
                                 old.get("started_at"), old.get("settled_by")))
        if str(out.resolve()) in runs:
            continue  # the run's manifest is its record
        if rec.get("spent_usd") is not None:
            entries.append(Entry(rec["kind"], rec["out"], rec.get("design"),
                                 float(rec["spent_usd"]), True, **facts,
                                 settled_by=rec.get("settled_by")))
        elif rec["kind"] == "run" and is_complete(out) and recorded_usd(out) is not None:
            entries.append(Entry("run", rec["out"], rec.get("design"), recorded_usd(out) or 0.0,
                                 True, **facts))
        else:  # it may have paid up to its worst case before it stopped
            entries.append(Entry(rec["kind"], rec["out"], rec.get("design"), held_usd(rec),
                                 False, **facts))
    return Spend(tuple(entries))


def keeps_ledger(root: Path | str, ledger: Spend | None = None) -> bool:
    """Whether the results root ``root`` keeps a spend ledger: a spend record (every paying
    job writes one before its first call) or a finished run that paid. Free runs alone (``make
    run`` on the mock) are no ledger, so they never send a live run elsewhere to be refused."""
    if any(spend_dir(root).glob("*.json")):
        return True
    return any(e.usd > 0 for e in (ledger or spend(root)).entries)


def held_usd(rec: dict[str, Any]) -> float:
    """What an unsettled spend record counts at: its worst case, else (a record written
    before worst cases were recorded) its plan."""
    held = rec.get("worst_usd")
    return float(rec["planned_usd"] if held is None else held)


def read_record(path: Path) -> dict[str, Any]:
    """The spend record at ``path``.

    Raises:
        ConfigError: it cannot be read or is not a spend record (one line naming it).
    """
    try:
        rec = json.loads(path.read_text())
        Path(rec["out"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{path}: not a spend record (malformed JSON or no 'out'); "
                          "restore it from a backup: the ledger cannot count it") from None
    return rec


def usd(x: float) -> str:
    """Cents for real amounts, four decimals below 1 USD so small plans stay readable."""
    return f"{x:.2f}" if x == 0 or abs(x) >= 1 else f"{x:.4f}"


def refuse(what: str, cap: float, plan: float, spent: float, where: str, advice: str,
           amount: str = "plan", note: str = "") -> None:
    """Raise :class:`BudgetExceeded` naming the cap, the job's amount (``plan``, or what
    ``amount`` says it is, with ``note`` after it) and the spent amount (the ledger total)."""
    raise BudgetExceeded(
        f"{where}: refused: {amount} {usd(plan)} USD{note} + spent {usd(spent)} USD = "
        f"{usd(plan + spent)} USD exceeds the {what} {usd(cap)} USD; no live call was made. "
        f"{advice}"
    )


@dataclass(frozen=True)
class Caps:
    """The caps a paying job is checked against (USD)."""

    project_cap_usd: float
    pilot_cap_usd: float | None = None  # set when the job belongs to the pilot design
    pilot: str | None = None  # the pilot design's name


def check(caps: Caps, planned_usd: float, where: str, design: str | None = None,
          root: Path | str = ROOT, worst_usd: float | None = None,
          home: Path | str | None = None) -> Spend:
    """Refuse (:class:`BudgetExceeded`) a job whose worst case (``worst_usd``; without one,
    ``planned_usd``) plus the recorded spend passes the project cap or, for the pilot design,
    the pilot cap. Returns the ledger read.

    Args:
        caps: the project cap and, for the pilot design, the pilot cap (USD).
        planned_usd: USD the job plans to spend (its planning estimate or its USD cap).
        where: what is checked, for the message (``ma cell pilot_openai/share_25 seed 1``).
        design: the design the job belongs to (None for jobs outside a design).
        root: the results root whose ledger is read.
        worst_usd: the most the job can pay (a run's ``usd_cap``:
            ``planning.worst_case_usd``); when given, the caps are checked against it and
            the message names it beside the plan.
        home: the results root of the project the job's config belongs to
            (``layout.project_root``): when ``root`` is another folder that keeps no ledger
            while ``home`` keeps one, the job is refused, so a cap is never stepped around by
            pointing ``--results`` (or the working directory) elsewhere.

    Raises:
        BudgetExceeded: one line naming the ledger total, the job's amount and the cap; or
            naming the project's ledger a results root without one would step around.
        ConfigError: a spend record cannot be read.
    """
    amount, admitted, note = "plan", planned_usd, ""
    if worst_usd is not None:
        amount, admitted = "worst case", worst_usd
        note = f" (its usd_cap; plan {usd(planned_usd)} USD)"
    ledger = spend(root)
    if (home is not None and not keeps_ledger(root, ledger)
            and Path(home).resolve() != Path(root).resolve()):
        theirs = spend(home)
        if keeps_ledger(home, theirs):
            raise BudgetExceeded(
                f"{where}: refused: results root {root} keeps no spend ledger, while the "
                f"project's {home} records {usd(theirs.total_usd)} USD; no live call was made. "
                f"Pass --results {home} so the project cap counts this run")
    advice = (f"Spend recorded in {Path(root)}/ (`ma spend` lists it); lower the plan or raise "
              "the cap in config/workflow.yaml.")
    if ledger.unsettled_usd:
        advice += (f" {usd(ledger.unsettled_usd)} USD of it is jobs that started and never "
                   "finished (counted at their worst case until resumed).")
    if caps.pilot_cap_usd is not None and design is not None and design == caps.pilot:
        spent = ledger.design_usd(design)
        if admitted + spent > caps.pilot_cap_usd + 1e-9:
            refuse("pilot cap", caps.pilot_cap_usd, admitted, spent, where, advice, amount,
                   note)
    if admitted + ledger.total_usd > caps.project_cap_usd + 1e-9:
        refuse("project cap", caps.project_cap_usd, admitted, ledger.total_usd, where, advice,
               amount, note)
    return ledger


def record_path(root: Path | str, out: Path | str) -> Path:
    """The spend record of the job writing ``out`` (one per output path)."""
    key = hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:16]
    return spend_dir(root) / f"{key}.json"


@contextlib.contextmanager
def paying(root: Path | str, out: Path | str, planned_usd: float, kind: str = "run",
           design: str | None = None, worst_usd: float | None = None,
           cache: Path | str | None = None, in_flight: int | None = None
           ) -> Iterator[dict[str, Any]]:
    """Record a paid job in the ledger before its first call and settle it when it ends.

    Args:
        root: the results root whose ledger records the job.
        out: the job's output (a run directory, a Bazaar output folder): one record each.
        planned_usd: its planning estimate (USD).
        kind: ``run`` or ``bazaar``.
        design: the design it belongs to, if any.
        worst_usd: the most it can pay (its ``usd_cap``); it counts at this until settled.
        cache: its response cache directory, where its paid answers are recorded (what
            ``ma spend settle`` counts if it never finishes).
        in_flight: the most paid calls it has in flight at once
            (``LLMConfig.paid_in_flight``).

    Yields:
        The record; the caller sets ``record["spent_usd"]`` to what the job paid (a run
        under ``<root>/runs`` need not: its manifest is its record).

    A job that raises (killed, interrupted) stays unsettled, counted at ``worst_usd`` (else
    ``planned_usd``) until a rerun of the same output settles it, or ``ma spend settle``
    does: until then nobody knows it paid less. The record names the process (host, pid,
    start time: whether it still runs, and which answers of the cache it paid), the
    Snakemake invocation it ran under (``inputs.HOLDER_ENV``) and the command. An earlier
    execution of the same output settled by ``ma spend settle`` is kept in ``earlier``.
    """
    # why: the process identity is the cache's (claims, stored answers); it loads only for
    # a paying job, which loads the LLM layer anyway
    from market_agents.llm.cache import process_identity

    path = record_path(root, out)
    earlier: list[dict[str, Any]] = []
    if path.exists():
        old = read_record(path)
        earlier = list(old.pop("earlier", None) or [])
        if old.get("settled_by"):  # settled by hand: what it paid is never overwritten
            earlier.append(old)
    rec: dict[str, Any] = {
        "kind": kind, "out": str(Path(out).resolve()), "design": design,
        "planned_usd": round(planned_usd, 6),
        "worst_usd": None if worst_usd is None else round(worst_usd, 6), "spent_usd": None,
        "command": " ".join(["ma", *sys.argv[1:]]) if sys.argv else "ma",
        "started_at": utc_now(), "settled_at": None,
        "cache": None if cache is None else str(Path(cache).resolve()),
        "in_flight": in_flight, "process": process_identity(),
        # the Snakemake invocation whose job this is (pipeline/holder.py), if any
        "holder": os.environ.get(HOLDER_ENV),
        **({"earlier": earlier} if earlier else {}),
    }
    write_json_atomic(path, rec)
    yield rec
    if rec["spent_usd"] is None and kind == "run":
        rec["spent_usd"] = recorded_usd(Path(out))
    rec["settled_at"] = utc_now()
    write_json_atomic(path, rec)


def utc_now() -> str:
    """UTC now, to the second, as the records write it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

"""Where a study stands (``ma status``): for a design, each cell × seed's run and its state,
the USD its finished runs paid, totals, and the next command to run; as text, JSON or one HTML
page.

A run is

- **present**: finished (its manifest.json) by the engine of today, from the cell's config;
- **stale**: finished, but by other code (its manifest's ``code_fingerprint`` differs from
  :func:`market_agents.sim.fingerprint.fingerprint`, or it has none: made before fingerprints)
  or from another config than the cell's now (``steps.is_fresh``);
- **failed**: not finished, and its ``<run>.failed.json`` says why (``rundir.failed_record``);
- **missing**: neither.

A cell is live when it calls a paid provider (``Design.is_live``); a run is paid when its
manifest counts paid answers (``rundir.paid_usd``). A rehearsal (the mock, under the results
root's rehearsal folder) is shown beside the design's runs when it exists, and is free.

Nothing here writes a run or removes one: it reads manifests and the failed records, and the
next command it proposes is the one that makes what is missing (a Snakemake target for a
design the workflow names, else ``ma design``). A stale free run is made again by that command
(a run made by other code always; one made from another config by the workflow's target,
which replaces it, while ``ma design`` stops on it); a stale paid run is never made again
silently: it is reported with what it cost, and the command stops on it.
"""

from __future__ import annotations

import html
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from market_agents.errors import MarketAgentsError
from market_agents.layout import design_dir, outcomes_path
from market_agents.protocol.design import Design
from market_agents.protocol.steps import is_fresh
from market_agents.sim import rundir
from market_agents.sim.fingerprint import fingerprint, short

STATES = ("present", "missing", "stale", "failed")
"""A run's states, in the order tables show them."""
BEFORE_FINGERPRINTS = "made before fingerprints"
FIGURE = "*.png"
"""The figures shown for a run or a design: the PNGs ``ma plot`` writes into a run directory
(``price.png``) and beside a design's outcomes (``volatility.png``)."""


@dataclass(frozen=True)
class RunStatus:
    """One cell × seed: its run directory, state, why (stale or failed), the USD its paid
    answers cost (0 for a free run) and its figures."""

    cell: str
    seed: int
    path: Path
    state: str
    why: str = ""
    usd: float = 0.0
    figures: tuple[Path, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """As JSON data (paths as strings)."""
        return {"cell": self.cell, "seed": self.seed, "path": str(self.path),
                "state": self.state, "why": self.why, "usd": self.usd, "paid": self.usd > 0,
                "figures": [str(f) for f in self.figures]}


@dataclass
class CellStatus:
    """A cell's runs, whether it calls a paid provider, and why it cannot run (if so)."""

    name: str
    live: bool
    runs: list[RunStatus] = field(default_factory=list)
    unavailable: str | None = None

    def counts(self) -> dict[str, int]:
        """State -> number of runs, every state of :data:`STATES` present."""
        return {s: sum(r.state == s for r in self.runs) for s in STATES}

    @property
    def usd(self) -> float:
        """USD paid by the cell's finished runs."""
        return sum(r.usd for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        """As JSON data."""
        return {"cell": self.name, "live": self.live, "unavailable": self.unavailable,
                "counts": self.counts(), "usd": self.usd,
                "runs": [r.to_dict() for r in self.runs]}


@dataclass
class DesignStatus:
    """The runs of one design under one results folder (its runs, or its rehearsal's)."""

    design: str
    file: Path
    mock: bool
    folder: Path
    code: str
    cells: list[CellStatus]
    figures: tuple[Path, ...]
    next: list[str]

    @property
    def runs(self) -> list[RunStatus]:
        """Every run of every cell, in design order."""
        return [r for c in self.cells for r in c.runs]

    def counts(self) -> dict[str, int]:
        """State -> number of runs over the design, every state present."""
        return {s: sum(c.counts()[s] for c in self.cells) for s in STATES}

    @property
    def usd(self) -> float:
        """USD paid by the design's finished runs."""
        return sum(c.usd for c in self.cells)

    @property
    def live(self) -> bool:
        """Whether any cell calls a paid provider."""
        return any(c.live for c in self.cells)

    def to_dict(self) -> dict[str, Any]:
        """As JSON data: ``ma status --json``'s entry of the design."""
        return {"design": self.design, "file": str(self.file), "mock": self.mock,
                "folder": str(self.folder), "code_fingerprint": self.code,
                "counts": {**self.counts(), "runs": len(self.runs)}, "usd": self.usd,
                "live": self.live, "figures": [str(f) for f in self.figures],
                "next": self.next, "cells": [c.to_dict() for c in self.cells]}


def run_status(design: Design, cell: str, seed: int, mock: bool = False,
               code: str | None = None) -> RunStatus:
    """The state of one run of ``design`` (see the module docstring).

    Args:
        design: the loaded design (its results root is where the run is looked for).
        cell: the cell's name.
        seed: the seed.
        mock: the rehearsal's run rather than the design's own.
        code: the current code fingerprint (default: this process's).

    Returns:
        The :class:`RunStatus`.
    """
    code = code or fingerprint()
    path = design.run_dir(cell, seed, mock)
    figures = tuple(sorted(path.glob(FIGURE))) if path.is_dir() else ()
    if rundir.is_complete(path):
        try:
            manifest = rundir.read_manifest(path)
        except rundir.RunDirError as exc:
            return RunStatus(cell, seed, path, "failed", str(exc), 0.0, figures)
        usd = rundir.paid_usd(manifest)
        why = []
        made_by = manifest.get("code_fingerprint")
        if not made_by:
            why.append(BEFORE_FINGERPRINTS)
        elif made_by != code:
            why.append(f"made by code {short(made_by)}")
        try:
            if not is_fresh(design, cell, mock, path, manifest):
                why.append("made from another config")
        except MarketAgentsError:
            pass  # the cell's config cannot be built now (an equal-USD cap): code alone says
        return RunStatus(cell, seed, path, "stale" if why else "present", "; ".join(why), usd,
                         figures)
    record = rundir.failed_record(path)
    if record.exists():
        try:
            why = str(rundir.read_json(record).get("error") or "failed")
        except rundir.RunDirError as exc:
            why = str(exc)
        return RunStatus(cell, seed, path, "failed", why, 0.0, figures)
    return RunStatus(cell, seed, path, "missing", "", 0.0, figures)


def design_status(design: Design, mock: bool = False, make: str | None = None,
                  code: str | None = None) -> DesignStatus:
    """Every run of a design (or of its rehearsal), and the next command.

    Args:
        design: the loaded design; its ``results`` root is read.
        mock: the rehearsal's runs (results root's rehearsal folder) rather than the design's.
        make: the command that makes the design's missing runs (a Snakemake target's command
            line, ``ma design …``); None: no command is proposed.
        code: the current code fingerprint (default: this process's).

    Returns:
        The :class:`DesignStatus`.
    """
    code = code or fingerprint()
    cells = []
    for c in design.cells.values():
        if c.unavailable:
            cells.append(CellStatus(c.name, False, unavailable=c.unavailable))
            continue
        cells.append(CellStatus(c.name, not mock and design.is_live(c.name),
                                [run_status(design, c.name, s, mock, code) for s in c.seeds]))
    folder = design_dir(design.name, mock, design.results)
    figures = tuple(sorted(folder.glob(FIGURE))) if folder.is_dir() else ()
    status = DesignStatus(design.name, design.path, mock, folder, code, cells, figures, [])
    status.next = next_steps(status, make, outcomes_path(design.name, mock, design.results))
    return status


def _seeds(runs: list[RunStatus], status: DesignStatus) -> str:
    """Runs named in one line: ``all 42 runs``, ``all of share_0, share_25`` for cells whose
    every run is there, ``share_5 seed 1, 3`` for the others."""
    if len(runs) == len(status.runs):
        return f"all {len(runs)} runs"
    by_cell: dict[str, list[str]] = {}
    for r in runs:
        by_cell.setdefault(r.cell, []).append(str(r.seed))
    sizes = {c.name: len(c.runs) for c in status.cells}
    whole = [c for c, s in by_cell.items() if len(s) == sizes[c] > 1]
    parts = [f"all of {', '.join(whole)}"] if whole else []
    parts += [f"{c} seed {', '.join(s)}" for c, s in by_cell.items() if c not in whole]
    return "; ".join(parts)


def named(status: DesignStatus) -> list[str]:
    """The runs that are not present, one line per state and reason: ``missing: share_5 seed
    2``, ``stale (made before fingerprints): all of share_0, share_25``, ``failed: …``."""
    lines = []
    for state in STATES[1:]:
        groups: dict[str, list[RunStatus]] = {}
        for r in status.runs:
            if r.state == state:
                groups.setdefault(r.why if state == "stale" else "", []).append(r)
        for why, runs in groups.items():
            lines.append(f"{state}{f' ({why})' if why else ''}: {_seeds(runs, status)}")
    return lines


def next_steps(status: DesignStatus, make: str | None, outcomes: Path) -> list[str]:
    """What to do next, one line each: the command that makes the missing and failed runs (or
    gathers the outcomes), what to do first about stale runs, or that nothing is left.

    Args:
        status: the design's runs.
        make: the command that makes them (None: none is proposed).
        outcomes: the design's gathered outcomes, which the command writes last.

    Returns:
        Lines such as ``.venv/bin/snakemake --cores 2 exploratory``.
    """
    runs = status.runs
    todo = [r for r in runs if r.state in ("missing", "failed")]
    stale = [r for r in runs if r.state == "stale"]
    paid = [r for r in stale if r.usd > 0]
    free = [r for r in stale if r.usd == 0]
    live = {c.name for c in status.cells if c.live}
    lines = []
    # a free run made by other code is made again by the command below (ma design, the
    # workflow's target); one made from another config only by the workflow's target, which
    # replaces it: ma design stops on it
    kept = [r for r in free if "another config" in r.why]
    if kept and not (make or "").startswith(".venv/bin/snakemake"):
        lines.append(f"move away the {len(kept)} free run(s) made from another config first "
                     "(ma design stops on them; the workflow's target replaces them)")
    if paid:
        lines.append(f"{len(paid)} stale paid run(s) ({sum(r.usd for r in paid):.4f} USD) are "
                     "kept: re-making one pays again, never silently (docs/guards.md)")
    if make and (todo or free or not outcomes.exists()):
        pays = any(r.cell in live for r in todo + free)
        lines.append(make + ("  # makes paid calls" if pays else ""))
    if not todo and not stale and outcomes.exists():
        lines.append(f"nothing to make: .venv/bin/ma summary {outcomes}")
    return lines


# --- text ---------------------------------------------------------------------------------


def _usd(usd: float, live: bool) -> str:
    return f"{usd:.4f}" if live or usd > 0 else "free"


def text(status: DesignStatus, seeds: bool = False) -> list[str]:
    """The design as text lines: a heading, one line per cell with its counts and USD (with
    ``seeds``, one line per run instead), the total, the runs not present, the next command.
    A design with no run made yet is one line and its next command."""
    where = "rehearsal " if status.mock else ""
    head = f"{status.design} {where}({status.file}): {status.folder}"
    counts = status.counts()
    n = len(status.runs)
    if counts["missing"] == n and not any(c.unavailable for c in status.cells):
        return [f"{head}: none of {n} runs made yet", *(f"  next: {s}" for s in status.next)]
    width = max(8, *(len(c.name) for c in status.cells))
    cols = (*STATES, "USD")
    lines = [head, f"  {'cell':<{width}} {'seeds':>5}" + "".join(f" {c:>8}" for c in cols)]
    for c in status.cells:
        if c.unavailable:
            lines.append(f"  {c.name:<{width}} unavailable: {c.unavailable}")
            continue
        if seeds:
            for r in c.runs:
                usd = _usd(r.usd, c.live) if r.state in ("present", "stale") else ""
                lines.append(f"  {c.name:<{width}} seed{r.seed:04d} {r.state:<8} {usd:>8}"
                             + (f"  {r.why}" if r.why else ""))
            continue
        k = c.counts()
        lines.append(f"  {c.name:<{width}} {len(c.runs):>5}" + "".join(f" {k[s]:>8}" for s in
                                                                      STATES)
                     + f" {_usd(c.usd, c.live):>8}")
    lines.append(f"  {'total':<{width}} {n:>5}" + "".join(f" {counts[s]:>8}" for s in STATES)
                 + f" {_usd(status.usd, status.live):>8}")
    lines += [f"  {line}" for line in named(status)]
    lines += [f"  next: {s}" for s in status.next]
    return lines


# --- one HTML page ------------------------------------------------------------------------

STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:1200px}"
         "table{border-collapse:collapse;font-size:13px;margin:.5em 0 1.5em;width:100%}"
         "td,th{border:1px solid #bbb;padding:3px 5px;text-align:right;vertical-align:top}"
         "th{background:#eef3fb}td.l,th.l{text-align:left}td.runs{text-align:left;"
         "white-space:normal}code{background:#f3f3f3;padding:0 3px;overflow-wrap:anywhere}"
         ".run{display:inline-block;margin:1px 3px 1px 0;padding:0 4px;border-radius:3px;"
         "text-decoration:none;color:#000}.present{background:#d9ead3}.missing{background:#eee;"
         "color:#777}.stale{background:#fce5cd}.failed{background:#f4cccc}"
         "img.thumb{height:90px;border:1px solid #ddd;margin:2px}"
         "img.figure{max-width:min(100%,900px);border:1px solid #ddd}"
         ".why{color:#555;font-size:12px}"
         "p,li{overflow-wrap:anywhere}")


def _href(target: Path, base: Path) -> str:
    """``target`` as a URL relative to the folder ``base`` (the page's)."""
    rel = os.path.relpath(target.resolve(), base.resolve())
    return urllib.parse.quote(Path(rel).as_posix() + ("/" if target.is_dir() else ""))


def _design_html(status: DesignStatus, base: Path) -> str:
    e = html.escape
    counts = status.counts()
    summary = ", ".join(f"{counts[s]} {s}" for s in STATES) + (
        f"; {status.usd:.4f} USD paid" if status.live or status.usd else "; free")
    folder = (f"<a href=\"{_href(status.folder, base)}\">{e(str(status.folder))}</a>"
              if status.folder.is_dir() else e(str(status.folder)))
    parts = [f"<h2 id=\"{e(status.design)}{'-rehearsal' if status.mock else ''}\">"
             f"{e(status.design)}{' (rehearsal)' if status.mock else ''}</h2>",
             f"<p>{e(str(status.file))}: {folder}. {len(status.runs)} runs: {e(summary)}.</p>"]
    lines = named(status)
    if lines:
        parts.append("<ul>" + "".join(f"<li>{e(s)}</li>" for s in lines) + "</ul>")
    parts.append("<p>Next:</p><ul>" + "".join(f"<li><code>{e(s)}</code></li>"
                                               for s in status.next) + "</ul>")
    rows = ["<tr><th class=\"l\">cell</th><th class=\"l\">runs (seed: state)</th>"
            + "".join(f"<th>{s}</th>" for s in STATES) + "<th>USD</th>"
            "<th class=\"l\">figures</th></tr>"]
    for c in status.cells:
        if c.unavailable:
            rows.append(f"<tr><td class=\"l\">{e(c.name)}</td><td class=\"runs\" colspan=\"7\">"
                        f"unavailable: {e(c.unavailable)}</td></tr>")
            continue
        runs, figs = [], []
        for r in c.runs:
            label = f"{r.seed}: {r.state}"
            title = f" title=\"{e(r.why)}\"" if r.why else ""
            if r.path.is_dir():
                runs.append(f"<a class=\"run {r.state}\" href=\"{_href(r.path, base)}\""
                            f"{title}>{e(label)}</a>")
            else:
                runs.append(f"<span class=\"run {r.state}\"{title}>{e(label)}</span>")
            figs += [f"<a href=\"{_href(f, base)}\"><img class=\"thumb\" src=\"{_href(f, base)}\""
                     f" alt=\"{e(f'{c.name} seed {r.seed} {f.name}')}\"></a>" for f in r.figures]
        whys = sorted({r.why for r in c.runs if r.why})
        k = c.counts()
        rows.append(f"<tr><td class=\"l\">{e(c.name)}</td><td class=\"runs\">{' '.join(runs)}"
                    + "".join(f"<div class=\"why\">{e(w)}</div>" for w in whys) + "</td>"
                    + "".join(f"<td>{k[s]}</td>" for s in STATES)
                    + f"<td>{_usd(c.usd, c.live)}</td><td class=\"l\">{''.join(figs)}</td></tr>")
    parts.append("<table>" + "".join(rows) + "</table>")
    for f in status.figures:  # the design's figures (``ma plot OUTCOMES``), below its table
        parts.append(f"<p><a href=\"{_href(f, base)}\"><img class=\"figure\" "
                     f"src=\"{_href(f, base)}\" alt=\"{e(f.name)}\"></a></p>")
    return "\n".join(parts)


def page(statuses: list[DesignStatus], base: Path, errors: list[str] | None = None) -> str:
    """One self-contained HTML page (its style inline, no script, nothing fetched from the
    network) showing every design of ``statuses``: its totals, the runs not present, the next
    command, its figures, and a row per cell whose runs link to their folders and whose
    figures show as thumbnails linking to the PNGs.

    Args:
        statuses: the designs to show.
        base: the folder the page is written to: every link is relative to it, so the page
            keeps working when the project moves as a whole.
        errors: one line per design that could not be read.

    Returns:
        The page's HTML text.
    """
    e = html.escape
    code = statuses[0].code if statuses else fingerprint()
    body = [f"<h1>Where the study stands</h1><p>Code fingerprint now: <code>{short(code)}"
            "</code>. A run is <span class=\"run present\">present</span> (finished by this "
            "code), <span class=\"run stale\">stale</span> (made by other code or from another "
            "config), <span class=\"run failed\">failed</span> or <span class=\"run missing\">"
            "missing</span>; hover a run for why.</p>"]
    if len(statuses) > 1:
        body.append("<p>" + " · ".join(
            f"<a href=\"#{e(s.design)}{'-rehearsal' if s.mock else ''}\">{e(s.design)}"
            f"{' (rehearsal)' if s.mock else ''}</a>" for s in statuses) + "</p>")
    body += [f"<p class=\"failed\">{e(line)}</p>" for line in errors or []]
    body += [_design_html(s, base) for s in statuses]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width\">"
            f"<title>Study status</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


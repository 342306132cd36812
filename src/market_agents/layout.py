"""The results layout: every path under ``results/``, named once.

Each function takes a results root (default :data:`ROOT`, ``results``; a test or a sanity run
passes its own) and returns a :class:`~pathlib.Path`; the rules (``rules/*.smk``, through
``pipeline/workflow.py``), the commands and the protocol take their paths from here, and
``tests/test_layout.py`` fails when any other module spells a ``results/`` path. Names given
as ``"{design}"`` (and so on) make a Snakemake pattern. Imports nothing from the package::

    results/
      runs/<design>/                  a live or free design (design_dir)
        <cell>/seed<NNNN>/            one run directory (run_dir; its files: sim/rundir.py)
        runs_<a>-<b>_<h>.json         a batch record of free or rehearsed runs (batch_record_path)
        outcomes.parquet              gathered outcomes (outcomes_path), outcomes_<tier>.parquet
        control_sd.parquet            the control SD of every outcome (control_sd_path)
        sensitivity.parquet           re-scored episodes over the grid (sensitivity_path)
      rehearsal/                      the mock rehearsal: never mistaken for a live result
        <design>/...                  as runs/<design>/
        cache/ manifests/ library/    as below, made from mock answers
      cache/<design>.sqlite           a design's LLM response cache (cache_path)
      cache/bazaar_<provider>.sqlite  a Bazaar provider's cache (bazaar_cache)
      manifests/                      the protocol's manifests (manifests_dir)
        pilot.json repilot.json       the pilot's (and re-pilot's) summary (pilot_path, ...)
        freeze.json                   the pre-registration (freeze_path)
        deviations.jsonl              the deviations log (deviations_log)
        budget/<design>_<tier>.json   the budget gate's approval (budget_manifest)
        budget/<d>_<t>_spent.json     a tier's reconciled spend (budget_spent)
        spend/<key>.json              the spend ledger's record of a paid job (spend_dir)
      library/<name>.npz              a frozen decision library (library_path)
      bazaar/                         Bazaar: anchors/, exploits/, eval/<provider>/<model>/<tier>/
      logs/<rule>/...                 the workflow's job logs (log_path)
      dag/                            the protocol's DAG figure (dag_dir)
      sanity/<run_id>/                a sanity run of the run contract (sanity_dir)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

ROOT = Path("results")
"""The results root of live work (every function's default)."""
RUNS = "runs"
"""A design's folder kind for live and free runs."""
REHEARSAL = "rehearsal"
"""The mock rehearsal's folder: its designs, and its own cache, manifests and library."""
KINDS = (RUNS, REHEARSAL)
"""The ``{kind}`` wildcard's values."""
LIVE_DIRS = ("runs", "cache", "manifests", "library")
"""What a sanity run must never touch: the live results, caches, manifests and libraries."""
# A batch of free or rehearsed runs made by one process (batch_record_path): first and last
# seed, and the first 12 hex digits of the batch key, so a changed cell or engine asks for a new
# record.
RUNS_FILE = "runs_{first}-{last}_{chash}.json"
RUNS_GLOB = "runs_*.json"
OUTCOMES_PARQUET = "outcomes.parquet"
OUTCOMES_PARQUETS = "outcomes*.parquet"
"""What ``ma gather`` writes in a design's folder (outcomes.parquet, outcomes_<tier>.parquet)."""
CONTROL_SD_FILE = "control_sd.parquet"
SENSITIVITY_FILE = "sensitivity.parquet"


CACHE_DB = "cache.db"
"""The file that makes a folder an LLM response cache (``llm/cache.py`` keeps its entries
there; a folder holding one is never an output folder: ``outputs.py``)."""
PROJECT_MARKERS = (".git", "pyproject.toml", "Snakefile", "config/workflow.yaml")
"""What makes a folder a project: a checkout, a Python project, a workflow, or a copy of the
project's config (the run contract's sanity work folder, nested inside a project, is its own)."""


def project_of(path: Path | str) -> Path | None:
    """The project ``path`` (a config, a design, a results root; need not exist) belongs to:
    the nearest folder at or above it holding one of :data:`PROJECT_MARKERS`, resolved; None
    when there is none."""
    here = Path(path).resolve()
    for folder in (here, *here.parents):
        if any((folder / m).exists() for m in PROJECT_MARKERS):
            return folder
    return None


def project_root(*anchors: Path | str | None) -> Path:
    """The results root of the project the first anchor with one belongs to (a config or
    design file, then the working directory): ``<project>/results``, relative to the working
    directory when inside it, so the ledger a paid call is checked against is the project's
    whatever the working directory (docs/guards.md). Without any project, :data:`ROOT`."""
    for anchor in (*anchors, Path.cwd()):
        if anchor is None or not str(anchor).strip():
            continue
        project = project_of(anchor)
        if project is not None:
            return Path(os.path.relpath(project / ROOT, Path.cwd()))
    return ROOT


def run_kind(mock: bool) -> str:
    """``rehearsal`` for a mock rehearsal, else ``runs``."""
    return REHEARSAL if mock else RUNS


def _apart(mock: bool, root: Path | str) -> Path:
    """The root of a rehearsal's own cache, manifests and library, or the root itself."""
    return Path(root) / REHEARSAL if mock else Path(root)


# --- designs and runs ---------------------------------------------------------------------


def runs_dir(mock: bool = False, root: Path | str = ROOT, kind: str | None = None) -> Path:
    """The folder of every design's runs: ``<root>/runs`` (``<root>/rehearsal`` for ``mock``;
    ``kind`` names it outright, e.g. the wildcard ``"{kind}"``)."""
    return Path(root) / (kind or run_kind(mock))


def design_dir(design: str, mock: bool = False, root: Path | str = ROOT,
               kind: str | None = None) -> Path:
    """Where a design's run directories and gathered files live: ``<root>/runs/<design>``
    (``rehearsal`` instead of ``runs`` for a mock rehearsal)."""
    return runs_dir(mock, root, kind) / design


def run_dir(design: str, cell: str, seed: int, mock: bool = False,
            root: Path | str = ROOT) -> Path:
    """The directory of one run: ``<root>/runs/<design>/<cell>/seed<NNNN>``."""
    return design_dir(design, mock, root) / cell / f"seed{seed:04d}"


def run_pattern(kind: str = "{kind}") -> str:
    """The run directory as a Snakemake pattern with the wildcards ``design``, ``cell`` and
    ``seed`` (and ``kind`` unless given)."""
    return str(design_dir("{design}", kind=kind) / "{cell}" / "seed{seed}")


def batch_record_path(design: str, seeds: Sequence[int], key: str, mock: bool = False,
                      root: Path | str = ROOT) -> Path:
    """The record of a batch of free or rehearsed runs, cells x seeds made by one process
    (``ma cell CELL… --seed S1 S2 … --runs-file``), the workflow's target for them:
    ``<root>/runs/<design>/runs_<first>-<last>_<key>.json`` (``rehearsal/`` for ``mock``)
    with the first and last of ``seeds`` (4 digits, as run directories) and the first 12 hex
    digits of ``key`` (``protocol.batches.batch_key``: the cells' config hashes and the
    code)."""
    first, last = f"{seeds[0]:04d}", f"{seeds[-1]:04d}"
    return design_dir(design, mock, root) / RUNS_FILE.format(first=first, last=last,
                                                             chash=key[:12])


def batch_record_pattern(kind: str = "{kind}") -> str:
    """The batch record as a Snakemake pattern (wildcards design, first, last, chash, and
    kind unless given)."""
    return str(design_dir("{design}", kind=kind) / RUNS_FILE)


def outcomes_path(design: str, mock: bool = False, root: Path | str = ROOT,
                  tier: str | None = None, kind: str | None = None) -> Path:
    """A design's gathered outcomes (``ma gather``): ``outcomes.parquet``, or
    ``outcomes_<tier>.parquet`` for the runs of one tier with the control cell's."""
    name = f"outcomes_{tier}.parquet" if tier else OUTCOMES_PARQUET
    return design_dir(design, mock, root, kind) / name


def control_sd_path(design: str, mock: bool = False, root: Path | str = ROOT) -> Path:
    """A design's control SD of every outcome (``ma sigma``; the free σ estimates)."""
    return design_dir(design, mock, root) / CONTROL_SD_FILE


def sensitivity_path(design: str, mock: bool = False, root: Path | str = ROOT) -> Path:
    """A design's episodes re-scored over the threshold grid (``ma sensitivity``)."""
    return design_dir(design, mock, root) / SENSITIVITY_FILE


# --- caches and libraries -----------------------------------------------------------------


def cache_path(design: str, mock: bool = False, root: Path | str = ROOT) -> Path:
    """A design's LLM response cache, ``<root>/cache/<design>.sqlite``; a rehearsal keeps its
    own (``<root>/rehearsal/cache``), so mock answers never reach a live run."""
    return _apart(mock, root) / "cache" / f"{design}.sqlite"


def bazaar_cache(provider: str, root: Path | str = ROOT) -> Path:
    """One response cache per Bazaar provider: ``<root>/cache/bazaar_<provider>.sqlite``."""
    return Path(root) / "cache" / f"bazaar_{provider}.sqlite"


def library_path(name: str, mock: bool = False, root: Path | str = ROOT) -> Path:
    """A frozen decision library (``ma library``): ``<root>/library/<name>.npz``; the
    rehearsal's, built from mock answers, under ``<root>/rehearsal/library``."""
    return _apart(mock, root) / "library" / f"{name}.npz"


def rehearsal_library(path: str) -> str:
    """The library a rehearsal replays in place of ``path``, kept apart like every rehearsal
    file: ``results/library/x.npz`` -> ``results/rehearsal/library/x.npz`` (a library outside
    the results root gets a ``rehearsal_`` name beside it)."""
    p = Path(path)
    if p.parts[:1] == (ROOT.name,):
        return str(ROOT / REHEARSAL / Path(*p.parts[1:]))
    return str(p.with_name(f"rehearsal_{p.name}"))


# --- manifests ----------------------------------------------------------------------------


def manifests_dir(mock: bool = False, root: Path | str = ROOT) -> Path:
    """Where the protocol's manifests live (pilot.json, freeze.json, the budget gate's, the
    spend ledger's records); a rehearsal keeps its own, made from rehearsed runs, under
    ``<root>/rehearsal/manifests``."""
    return _apart(mock, root) / "manifests"


def manifest_path(name: str, mock: bool = False, root: Path | str = ROOT) -> Path:
    """A protocol manifest by name (``pilot``, ``repilot``, ``freeze``):
    ``<root>/manifests/<name>.json``."""
    return manifests_dir(mock, root) / f"{name}.json"


def pilot_path(mock: bool = False, root: Path | str = ROOT) -> Path:
    """The pilot's manifest (``ma pilot``: cost, validity, σ̂_d table, pass/fail)."""
    return manifest_path("pilot", mock, root)


def repilot_path(mock: bool = False, root: Path | str = ROOT) -> Path:
    """The re-pilot's manifest (the failure path, §4)."""
    return manifest_path("repilot", mock, root)


def freeze_path(mock: bool = False, root: Path | str = ROOT) -> Path:
    """The freeze (§5.1), the pre-registration every confirmatory live call is checked
    against; the rehearsal's, made from the rehearsed pilot, for ``mock``."""
    return manifest_path("freeze", mock, root)


def deviations_log(root: Path | str = ROOT) -> Path:
    """The deviations log (§6): ``<root>/manifests/deviations.jsonl``, one dated JSON line per
    deviation, appended and never rewritten."""
    return manifests_dir(False, root) / "deviations.jsonl"


def budget_dir(root: Path | str = ROOT) -> Path:
    """The budget gate's manifests: ``<root>/manifests/budget``."""
    return manifests_dir(False, root) / "budget"


def budget_manifest(design: str, tier: str, root: Path | str = ROOT) -> Path:
    """The gate's approval of a design/tier (``ma gate approve --out``):
    ``<root>/manifests/budget/<design>_<tier>.json``."""
    return budget_dir(root) / f"{design}_{tier}.json"


def budget_spent(design: str, tier: str, root: Path | str = ROOT) -> Path:
    """The reconciled spend of a design/tier (``ma gate reconcile --out``):
    ``<root>/manifests/budget/<design>_<tier>_spent.json``."""
    return budget_dir(root) / f"{design}_{tier}_spent.json"


def spend_dir(root: Path | str = ROOT) -> Path:
    """The spend ledger's records of paid jobs other than runs under ``<root>/runs`` (one
    ``<key>.json`` per output path): ``<root>/manifests/spend``."""
    return manifests_dir(False, root) / "spend"


# --- Bazaar, logs, the DAG, sanity runs ---------------------------------------------------


def bazaar_dir(root: Path | str = ROOT) -> Path:
    """Bazaar's results: ``<root>/bazaar``: ``anchors/`` (the scripted anchors' scores, ``ma
    bazaar anchors``), ``exploits/`` (``exploits_<tier>.json``, ``ma bazaar exploits``) and
    ``eval/`` (:func:`bazaar_eval_dir`)."""
    return Path(root) / "bazaar"


def bazaar_eval_dir(provider: str, model: str, tier: str, root: Path | str = ROOT) -> Path:
    """One LLM evaluation's folder (``ma bazaar eval --out``):
    ``<root>/bazaar/eval/<provider>/<model>/<tier>``."""
    return bazaar_dir(root) / "eval" / provider / model / tier


def log_path(*parts: str, root: Path | str = ROOT) -> Path:
    """A workflow job's log: ``<root>/logs/<parts…>`` (e.g. ``log_path("gate",
    "{design}_{tier}.log")``)."""
    return Path(root, "logs", *parts)


def dag_dir(root: Path | str = ROOT) -> Path:
    """The protocol's DAG figure (``.venv/bin/snakemake dag``: .dot, .svg, .mmd)."""
    return Path(root) / "dag"


def sanity_dir(root: Path | str = ROOT) -> Path:
    """Where the run contract's sanity runs work and report, one folder per run id (never a
    live root)."""
    return Path(root) / "sanity"

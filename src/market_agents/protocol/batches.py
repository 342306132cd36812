"""The batches of free runs: the workflow makes a design's free runs (classical and mock cells),
and every run of a rehearsal (``--mock``), in batches of cells x seeds, one process each
(``ma cell CELL… --seed S1 S2 … --runs-file``), and a batch's record
(``runs_<first>-<last>_<key>.json`` in the design's folder, named by :func:`batch_key`) vouches
for the runs as they were made: each cell's config_hash and each run's outcomes.json sha256. A
record that no longer holds (a run deleted or changed) is dropped, and one that names a run
about to be made again is forgotten first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from market_agents.atomic import write_json_atomic
from market_agents.config import config_hash
from market_agents.core import sha256_file
from market_agents.errors import MarketAgentsError
from market_agents.layout import ROOT, RUNS_GLOB, run_dir
from market_agents.protocol.design import Design
from market_agents.protocol.planning import run_config
from market_agents.sim.fingerprint import fingerprint
from market_agents.sim.rundir import OUTCOMES_FILE, RunDirError, read_json

Batch = tuple[tuple[str, ...], tuple[int, ...]]
"""A batch of free runs: its cells and the seeds each of them runs (cells x seeds)."""


def plan_batches(seeds: Mapping[str, Sequence[int]], runs_per_job: int) -> list[Batch]:
    """Group a design's free runs into batches of at most ``runs_per_job`` runs, each made by
    one process: a cell's seeds in as few chunks as fit (sizes differing by one at most, so
    the jobs keep the cores equally busy), then the cells whose chunk is the same seeds
    together, likewise (issue 38: the exploratory design's 14 cells of 3 seeds are 14
    processes one cell a job, 4 at 12 runs a job).

    Args:
        seeds: each free cell's seeds, in design order.
        runs_per_job: the most runs in a batch (>= 1).

    Returns:
        The batches, cells in design order, in the order their seeds first come; every
        (cell, seed) is in exactly one.
    """
    chunks: dict[tuple[int, ...], list[str]] = {}  # same seeds, cells in design order
    for cell, cell_seeds in seeds.items():
        for chunk in _even(list(cell_seeds), runs_per_job):
            chunks.setdefault(tuple(chunk), []).append(cell)
    return [(tuple(group), chunk) for chunk, cells in chunks.items()
            for group in _even(cells, max(1, runs_per_job // len(chunk)))]


def _even(items: list, most: int) -> list[list]:
    """``items`` in as few consecutive parts of at most ``most`` as there can be, the sizes
    differing by one at most (the longer ones first)."""
    parts = -(-len(items) // most)
    size, longer = divmod(len(items), parts)
    bounds = [i * size + min(i, longer) for i in range(parts + 1)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def batch_key(config_hashes: Mapping[str, str]) -> str:
    """What a batch record's name carries (``runs_<first>-<last>_<key>.json``, its first 12
    hex digits): the SHA-256 of each cell's name and config_hash and the code fingerprint
    together, so a changed cell or a changed engine asks the workflow for new records, and
    their free runs are made again (issue 34; ``ma cell --replace-stale`` replaces the old
    ones; the unchanged cells' runs are kept)."""
    cells = ";".join(f"{cell}={chash}" for cell, chash in config_hashes.items())
    return hashlib.sha256(f"{cells}:{fingerprint()}".encode()).hexdigest()


class MissingRuns(MarketAgentsError):
    """A gather found runs of the design without outcomes."""


def forget_batch_records(run: Path) -> list[Path]:
    """Remove the records of batches of free runs (``write_batch_record``) that name the run
    directory ``run``, before it is made, replaced or scored again: a record vouches for the
    runs as they were, so one that outlived them would pass a changed run as made. Records are
    derived files (no answer, nothing paid); returns the ones removed."""
    gone = []
    name = f"{run.parent.name}/{run.name}"  # as a record names it: <cell>/seed<NNNN>
    for record in sorted(run.parent.parent.glob(RUNS_GLOB)):
        try:
            named = name in read_json(record).get("outcomes_sha256", {})
        except (OSError, ValueError, AttributeError):
            named = True  # an unreadable record vouches for nothing
        if named:
            record.unlink(missing_ok=True)
            gone.append(record)
    return gone


def broken_batch_record(record: Path) -> str | None:
    """Whether a batch record (``write_batch_record``) no longer holds: one of the run
    directories it vouches for has lost its outcomes.json (deleted by hand, say) or holds
    another one than the record's sha256.

    Args:
        record: a ``runs_<first>-<last>_<key>.json`` that exists.

    Returns:
        The first run directory that voids the record (the record itself when unreadable);
        None when every run it names is as it was.
    """
    try:
        vouched = read_json(record).get("outcomes_sha256")
    except (OSError, RunDirError, AttributeError):
        vouched = None
    if not isinstance(vouched, dict):
        return str(record)
    for name, digest in vouched.items():
        outcomes = record.parent / name / OUTCOMES_FILE
        if not outcomes.is_file() or sha256_file(outcomes) != digest:
            return str(record.parent / name)
    return None


def write_batch_record(design: Design, cells: Sequence[str], seeds: Sequence[int], mock: bool,
                       path: str | Path, root: Path | str = ROOT) -> Path:
    """Record that ``seeds`` of each of ``cells`` are run and scored: ``path`` (JSON, written
    atomically) names each cell's config_hash and each run directory (``<cell>/seed<NNNN>``)
    with the sha256 of its outcomes.json. Content only, so the same runs give the same bytes.

    Raises:
        MissingRuns: a run without outcomes.json (the record is then not written).
    """
    runs = {}
    for cell in cells:
        for seed in seeds:
            outcomes = run_dir(design.name, cell, seed, mock, root) / OUTCOMES_FILE
            if not outcomes.exists():
                raise MissingRuns(f"{outcomes}: missing; {path} is not written")
            runs[f"{cell}/seed{seed:04d}"] = sha256_file(outcomes)
    write_json_atomic(path, {"design": design.name, "mock": mock,
                             "config_hash": {cell: config_hash(run_config(design, cell, mock))
                                             for cell in cells},
                             "outcomes_sha256": runs})
    return Path(path)

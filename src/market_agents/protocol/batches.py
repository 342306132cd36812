"""The records of batches of free runs: the workflow makes the free runs of a cell in batches
of seeds, one process each (``ma cell --seed S1 S2 ... --runs-file``), and a batch's record
(``runs_<first>-<last>_<chash>.json``, named by :func:`batch_key`) vouches for the runs as
they were made: the cell's config_hash and each run's outcomes.json sha256. A record that no
longer holds (a run deleted or changed) is dropped, and one that names a run about to be made
again is forgotten first.
"""

from __future__ import annotations

import hashlib
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


def batch_key(config_hash: str) -> str:
    """What a batch record's name carries (``runs_<first>-<last>_<key>.json``, its first 12
    hex digits): the SHA-256 of the cell's config_hash and the code fingerprint together, so a
    changed cell or a changed engine asks the workflow for new records, and its free runs are
    made again (issue 34; ``ma cell --replace-stale`` replaces the old ones)."""
    return hashlib.sha256(f"{config_hash}:{fingerprint()}".encode()).hexdigest()


class MissingRuns(MarketAgentsError):
    """A gather found runs of the design without outcomes."""


def forget_cell_runs(run: Path) -> list[Path]:
    """Remove the records of batches of free runs (``write_cell_runs``) that name the run
    directory ``run``, before it is made, replaced or scored again: a record vouches for the
    runs as they were, so one that outlived them would pass a changed run as made. Records are
    derived files (no answer, nothing paid); returns the ones removed."""
    gone = []
    for record in sorted(run.parent.glob(RUNS_GLOB)):
        try:
            named = run.name in read_json(record).get("outcomes_sha256", {})
        except (OSError, ValueError, AttributeError):
            named = True  # an unreadable record vouches for nothing
        if named:
            record.unlink(missing_ok=True)
            gone.append(record)
    return gone


def broken_cell_runs(record: Path) -> str | None:
    """Whether a batch record (``write_cell_runs``) no longer holds: one of the run
    directories it vouches for has lost its outcomes.json (deleted by hand, say) or holds
    another one than the record's sha256.

    Args:
        record: a ``runs_<first>-<last>_<chash>.json`` that exists.

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


def write_cell_runs(design: Design, cell: str, seeds: list[int], mock: bool,
                    path: str | Path, root: Path | str = ROOT) -> Path:
    """Record that ``seeds`` of ``cell`` are run and scored: ``path`` (JSON, written
    atomically) names the cell's config_hash and each seed's run directory with the sha256 of
    its outcomes.json. Content only, so the same runs give the same bytes.

    Raises:
        MissingRuns: a seed without outcomes.json (the record is then not written).
    """
    runs = {}
    for seed in seeds:
        outcomes = run_dir(design.name, cell, seed, mock, root) / OUTCOMES_FILE
        if not outcomes.exists():
            raise MissingRuns(f"{outcomes}: missing; {path} is not written")
        runs[f"seed{seed:04d}"] = sha256_file(outcomes)
    write_json_atomic(path, {"design": design.name, "cell": cell, "mock": mock,
                             "config_hash": config_hash(run_config(design, cell, mock)),
                             "outcomes_sha256": runs})
    return Path(path)

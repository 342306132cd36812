"""Run one simulation into a run directory, atomically.

Files are written into a temporary sibling directory that is renamed into place only when
everything is written, so a run directory either is complete or does not exist. A run stopped
because too many LLM calls failed is never complete: it leaves ``<out>.failed.json`` instead. A
write that fails (a full disk) removes the temporary directory and raises ``OSError``
naming the run directory.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from market_agents.atomic import dir_mode, naming, write_json_atomic
from market_agents.config import Config, check_seed, config_hash, dump_yaml
from market_agents.errors import ConfigError, MarketAgentsError, RunFailed
from market_agents.outputs import check_dir, foreign
from market_agents.sim import rundir
from market_agents.sim.fingerprint import fingerprint
from market_agents.sim.simulation import simulate


@functools.cache
def git_revision() -> str:
    """The commit of the package's checkout (``git rev-parse HEAD``), or ``unknown``; asked
    once per process (a process of a batch ran a subprocess per run), as the fingerprint is."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.cache
def package_version() -> str:
    """The installed version of market_agents (its metadata's ``Version``), or ``unknown``."""
    try:
        text = distribution("market_agents").read_text("METADATA") or ""
    except PackageNotFoundError:
        return "unknown"
    # the header read as metadata.version() reads it, without the email parser it imports
    # (2-3 ms of every process that writes a run)
    for line in text.splitlines():
        if not line:  # the end of the headers
            break
        if line.startswith("Version:"):
            return line.removeprefix("Version:").strip()
    return "unknown"


def prepare_out(out: str | Path, config: Config | None = None, seed: int | None = None) -> Path:
    """Check early that ``out`` can be created and replaced, so a bad path fails before any
    work: the rule of :func:`market_agents.outputs.check_dir` (never the working directory, the
    project, a folder above them, a results root or a cache), and an existing folder with files
    in it only when it is a run directory this package wrote that :func:`replaceable` allows.

    Raises:
        ConfigError: one line naming ``--out``.
    """
    out = check_dir(out, "--out", ours=lambda path: replaceable(path, config, seed))
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create parent directory ({exc.strerror})") from None
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--out {out}: directory {parent} is not writable")
    return out


def replaceable(path: Path, config: Config | None = None, seed: int | None = None) -> str | None:
    """Why the folder ``path`` may not be replaced by a run, or None when it may: it must be a
    finished run directory (its manifest.json), and one that cost money only when this run
    reproduces it (same config and seed: its answers are checked against it and the files
    come out the same), since nothing paid is ever overwritten."""
    if not rundir.is_complete(path):
        return foreign(path) if any(path.iterdir()) else None
    manifest = rundir.read_manifest(path)
    paid = rundir.paid_usd(manifest)
    if paid > 0 and (config is None or manifest.get("config_hash") != config_hash(config)
                     or manifest.get("seed") != seed):
        made = f"config {str(manifest.get('config_hash'))[:12]}, seed {manifest.get('seed')}"
        return (f"holds a paid run ({paid:.4f} USD; {made}) that this run does not reproduce; "
                "a paid run is never replaced")
    return None


def prepare_cache(config: Config, cache: str | Path | None, out: Path,
                  new_cache: bool = False,
                  paid_runs: list[tuple[Path, float]] | None = None) -> None:
    """Check before any work that ``cache`` can serve as the record of this run: a usable
    directory with a sound sqlite file, not emptied or deleted after it held paid answers
    (``paid_runs``, ``out`` if it is a finished run, and the cache's own marker say so) unless
    ``new_cache``. Raises ``CacheError`` naming the path; replay mode needs a cache."""
    llm = config.population.llm
    if llm.replay and cache is None and config.population.n_llm and not llm.frozen_library:
        raise ConfigError("--replay: serving every answer from the record needs --cache")
    if cache is None:
        return
    # the response cache (sqlite3, the LLM layer) loads only for a run given one
    from market_agents.llm.cache import CacheError, check_path, check_record, damage

    runs = list(paid_runs or [])
    if rundir.is_complete(out):
        runs.append((out, rundir.paid_usd(rundir.read_manifest(out))))
    path = check_path(cache, write=False)  # a regular file, an unreadable directory
    problem = damage(path)
    if problem:
        raise CacheError(f"--cache {path}: cache.db: {problem}; move it away and restore a "
                         "backup")
    check_record(path, new_cache, runs)  # before anything is created there
    check_path(path)


def _same_run(path: Path, config: Config, seed: int) -> bool:
    """Whether ``path`` holds a finished run of ``config`` and ``seed`` (one to reproduce)."""
    if not rundir.is_complete(path):
        return False
    manifest = rundir.read_manifest(path)
    return manifest.get("config_hash") == config_hash(config) and manifest.get("seed") == seed


def check_valid_counts(summary: dict, llm_decisions) -> None:
    """Validity is counted once: the manifest's ``llm_usage.valid``, the valid rows of
    ``llm_decisions.parquet`` and the response cache's valid entries for the run's requests
    must agree; a run that disagrees with itself is not written (MarketAgentsError)."""
    usage = summary.get("llm_usage")
    if usage is None:
        return
    counts = {"manifest": usage["valid"],
              "llm_decisions.parquet": int(llm_decisions["valid"].sum() or 0)}
    if summary.get("cache_valid") is not None:
        counts["cache"] = summary["cache_valid"]
    if len(set(counts.values())) > 1:
        raise MarketAgentsError(f"valid LLM answers counted differently: {counts}")


def _write_run(out: Path, config_yaml: str, tables: dict, manifest: dict) -> None:
    """Write the run's files into a temporary sibling of ``out``, then rename it into place
    (replacing an earlier run there); a failed write removes it and names ``out``."""
    with naming(out):  # a failed write names the run directory, not its temp sibling
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.resolve().parent))
        os.chmod(tmp, dir_mode())  # mkdtemp makes it 0700: a colleague could not read the run
        try:
            rundir.write_files(tmp, config_yaml, tables, manifest)
            if out.exists():
                # checked before the run (prepare_out); checked again in case something was
                # put there while it ran: only an earlier run directory is ever removed
                if any(out.iterdir()) and not rundir.is_complete(out):
                    raise ConfigError(f"--out {out}: files appeared there during the run that "
                                      "are not a run directory; nothing was replaced")
                shutil.rmtree(out)
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def run_to_dir(config: Config, seed: int, out: str | Path, cache: str | Path | None = None,
               progress: bool | None = None, new_cache: bool = False,
               expect: str | Path | None = None,
               paid_runs: list[tuple[Path, float]] | None = None,
               record: dict | None = None,
               paying: AbstractContextManager[dict] | None = None) -> Path:
    """Simulate ``config`` with ``seed`` into the run directory ``out`` (complete or absent).

    The files are written to a temporary sibling of ``out`` and renamed into place, so a run
    directory is either complete or absent (docs/market.md, "Run directory"; the format is
    :mod:`market_agents.sim.rundir`).

    Args:
        config: the validated simulation config (:class:`~market_agents.config.Config`).
        seed: the run seed, 0 .. 2**32 - 1; it spawns every random stream of the run.
        out: the run directory to write (its parent must be writable).
        cache: the response cache directory (the record of every LLM answer), checked first
            by :func:`prepare_cache`; None for a classical run or an uncached mock run.
        progress: show a progress bar (None: only on a terminal).
        new_cache: allow starting an empty cache where a live run expects answers.
        expect: a finished run this one must reproduce decision by decision (default: ``out``
            itself when it exists).
        paid_runs: (run directory, USD paid) of the finished runs sharing the cache, for the
            cache check.
        record: keys added to manifest.json (the guards' freeze and deviation record of a
            live run, docs/guards.md).
        paying: the job's spend-ledger record (``Guard.paying``), entered once the run
            directory, the seed and the cache have passed their checks: a run refused before
            any call leaves no ledger record counted at its planned USD.

    Returns:
        The run directory ``out``: config.yaml, manifest.json and the ticks, trades, orders,
        agents and llm_decisions parquet files.

    Raises:
        ConfigError: a bad seed, or ``expect`` is not a finished run of this config and seed.
        ReplayMismatch: a stored answer differs from the one the expected run used.
        RunFailed: too many LLM calls failed (after writing ``<out>.failed.json``).
        OSError: the files cannot be written (the message names ``out``).

    Protocol:
        Run protocol §1 (the run directory and its files) and §6 (every manifest carries
        config_hash, git_revision, shocks and final_conservation_ok); design principle 14
        (``code_fingerprint``: :mod:`market_agents.sim.fingerprint`).
    """
    check_seed(seed)
    # read before the run, once per process: the source as the engine was loaded, not as it
    # may be edited while a batch runs
    code = fingerprint()
    if paying is not None and config.population.n_llm > 0:
        # a missing key, price or cap stops a paying run here, before its run directory,
        # cache and spend-ledger record exist; the LLM client loads only for such a run
        from market_agents.llm.client import LLMClient
        from market_agents.prices import run_prices

        llm = config.population.llm
        if llm.free_models():
            # the same checks, on the table with the free routes' zero rows (the client
            # builds its providers and makes no call)
            LLMClient.from_settings(llm, prices=run_prices(llm)).close()
        else:
            LLMClient.check_settings(llm)
    out = prepare_out(out, config, seed)
    prepare_cache(config, cache, out, new_cache, paid_runs)
    reference = Path(expect) if expect is not None else out
    expected = rundir.answer_hashes(reference) if _same_run(reference, config, seed) else None
    if expect is not None and expected is None:
        raise ConfigError(f"--expect {expect}: not a finished run of this config and seed with "
                          "answer hashes in llm_decisions.parquet")
    with paying if paying is not None else nullcontext():
        started = time.perf_counter()
        try:
            tables = simulate(config, seed, cache, progress, expected, str(reference))
        except RunFailed as exc:
            write_json_atomic(rundir.failed_record(out), {
                **exc.record, "error": str(exc), "config_hash": config_hash(config), "seed": seed,
                "cache": str(cache) if cache else None})
            raise
        summary = tables.pop("summary")
        check_valid_counts(summary, tables["llm_decisions"])
        manifest = {
            "config_hash": config_hash(config),
            "git_revision": git_revision(),
            "code_fingerprint": code,  # the engine's source (sim/fingerprint.py)
            "package_version": package_version(),
            "seed": seed,
            "shocks": [s.model_dump(mode="json") for s in config.shocks],
            "treatment": config.treatment,
            "wall_time_s": round(time.perf_counter() - started, 4),
            **summary,
            **(record or {}),
        }
        _write_run(out, dump_yaml(config), tables, manifest)
        # an earlier failed attempt is superseded
        rundir.failed_record(out).unlink(missing_ok=True)
    return out

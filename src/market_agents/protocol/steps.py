"""The steps of a design, one implementation each, shared by ``ma cell``/``ma outcomes``/
``ma gather``/``ma sensitivity``, by ``ma design`` and by the Snakemake rules.

simulate (one cell x seed into its run_dir) -> score (outcomes.json) -> gather
(outcomes.parquet) -> sensitivity (re-scored episodes, no re-simulation).
"""

from __future__ import annotations

from dataclasses import asdict
from itertools import product
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from market_agents.analysis.outcomes import (
    EPISODE_KEYS,
    SENSITIVITY_BUBBLE_GAPS,
    SENSITIVITY_CRASH_DROPS,
    Thresholds,
)
from market_agents.analysis.scoring import THRESHOLDS_KEY, episodes_at, load_run, write_outcomes
from market_agents.analysis.stats import control_sd
from market_agents.atomic import write_parquet_atomic
from market_agents.config import config_hash
from market_agents.errors import ConfigError
from market_agents.layout import (
    ROOT,
    cache_path,
    control_sd_path,
    design_dir,
    outcomes_path,
    run_dir,
    sensitivity_path,
)
from market_agents.protocol.batches import MissingRuns, forget_batch_records
from market_agents.protocol.design import Design, load_design
from market_agents.protocol.planning import require_freeze, run_config
from market_agents.protocol.tiers import TIERS
from market_agents.sim.fingerprint import short
from market_agents.sim.rundir import (
    OUTCOMES_FILE,
    StaleRun,
    is_complete,
    llm_did,
    made_by_other_code,
    paid_by_other_code,
    paid_usd,
    read_json,
    read_manifest,
)

if TYPE_CHECKING:  # the guard imports nothing of this module; only its type is named here
    from market_agents.protocol.guard import Guard


def run_cache(design: Design, cell: str, cache: str | Path | None, mock: bool,
              root: Path | str = ROOT) -> Path | None:
    """Live cells always go through a cache (default: the design's), so no answer is bought
    twice; mock cells use one only when asked."""
    if cache is not None:
        return Path(cache)
    if not mock and design.is_live(cell):
        return cache_path(design.name, mock, root)
    return None


def paid_runs(design: Design, mock: bool = False,
              root: Path | str = ROOT) -> list[tuple[Path, float]]:
    """(run directory, USD of its paid answers) for every finished run of the design: the
    record a cache must not silently lose (see ``llm.cache.check_record``)."""
    out = []
    for run in sorted(design_dir(design.name, mock, root).glob("*/seed*")):
        if is_complete(run) and (usd := paid_usd(read_manifest(run))) > 0:
            out.append((run, usd))
    return out


class PaidRuns:
    """:func:`paid_runs` of one design for one command: every finished manifest is read once,
    when first asked, and each run the command finishes is added as it finishes (instead of
    reading every manifest of the design again before each run)."""

    def __init__(self, design: Design, mock: bool = False, root: Path | str = ROOT):
        self.design, self.mock, self.root = design, mock, root
        self._runs: dict[Path, float] | None = None

    def runs(self) -> list[tuple[Path, float]]:
        """What :func:`paid_runs` returns now (the same runs, in the same order)."""
        if self._runs is None:
            self._runs = dict(paid_runs(self.design, self.mock, self.root))
        return sorted(self._runs.items())

    def finished(self, run: Path) -> None:
        """Count ``run``, which this command has just made, if it is finished and paid."""
        if self._runs is not None and is_complete(run) and (
                usd := paid_usd(read_manifest(run))) > 0:
            self._runs[run] = usd


def simulate(design: Design, cell: str, seed: int, mock: bool = False,
             cache: str | Path | None = None, root: Path | str = ROOT,
             progress: bool | None = False, replay: bool = False,
             new_cache: bool = False, guard: Guard | None = None,
             paid: PaidRuns | None = None) -> Path:
    """One run into its run_dir (atomic, via runner.run_to_dir). ``replay``: serve every
    answer from the cache (a miss stops the run); ``new_cache``: allow an empty or missing
    cache although the design's runs recorded paid answers. A live run with a ``guard``
    passes its freeze and spend checks first, is recorded in the spend ledger while it runs,
    and carries the guard's record (freeze, deviation) in its manifest. ``paid``: the
    command's record of the design's paid runs (default: read now, for this run alone).

    An equal-USD cell runs only under the freeze, with the frozen cap passed into its config
    (``planning.require_freeze``, ``planning.run_config``)."""
    # why: the engine (sim.runner: the market, the traders) loads only to run; the workflow
    # imports this module at DAG time
    from market_agents.sim.runner import run_to_dir

    require_freeze(design, cell, mock)
    config = run_config(design, cell, mock=mock)
    if replay:
        config = config.model_copy(deep=True)
        config.population.llm.replay = True
    cache = run_cache(design, cell, cache, mock, root)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
    out = run_dir(design.name, cell, seed, mock, root)
    if cache is not None and paid is None:
        paid = PaidRuns(design, mock, root)
    record, paying = None, None
    if guard is not None and not mock and design.is_live(cell):
        record, planned, worst = guard.design_runs(design, [(cell, seed)],
                                                   f"ma cell {design.name}/{cell} seed {seed}")
        paying = guard.paying(out, planned, design=design.name, worst_usd=worst, cache=cache,
                              in_flight=config.population.llm.paid_in_flight())
    made = run_to_dir(config, seed, out, cache, progress=progress, new_cache=new_cache,
                      paid_runs=paid.runs() if cache is not None and paid is not None else None,
                      record=record, paying=paying)
    if paid is not None:
        paid.finished(out)
    return made


def is_fresh(design: Design, cell: str, mock: bool, path: Path,
             manifest: dict[str, Any] | None = None) -> bool:
    """Whether the finished run at ``path`` was made from the cell's current config (its
    manifest's config_hash; ``manifest``: the one already read)."""
    saved = (manifest if manifest is not None else read_manifest(path)).get("config_hash")
    return saved == config_hash(run_config(design, cell, mock))


def check_fresh(design: Design, cell: str, seed: int, mock: bool, path: Path,
                manifest: dict[str, Any] | None = None) -> None:
    """A saved run is reused only if it was made from the cell's current config."""
    manifest = manifest if manifest is not None else read_manifest(path)
    if not is_fresh(design, cell, mock, path, manifest):
        saved = manifest.get("config_hash")
        raise StaleRun(f"{path}: made from another config than {design.where(cell)} now gives "
                       f"(config_hash {str(saved)[:12]}…); restore the design or move the run "
                       "directory away, then resume")


def run_and_score(design: Design, cell: str, seed: int, mock: bool = False,
                  cache: str | Path | None = None, root: Path | str = ROOT,
                  th: Thresholds | None = None, replay: bool = False,
                  new_cache: bool = False, guard: Guard | None = None,
                  replace_stale: bool = False, paid: PaidRuns | None = None) -> str:
    """Simulate and score one run unless already done; returns what was done: ``ran``,
    ``scored`` (a finished run without outcomes.json), ``reused`` or ``replaced``.

    A finished run made by other code than today's (its manifest's ``code_fingerprint``) that
    paid for nothing is made again (``replaced``): results are tied to the code that made
    them (issue 34); one that paid stops with :class:`StaleRun`, since a paid run is never
    re-made silently. ``replace_stale``: a finished run made from another config than the
    cell's now that paid for nothing is run again, as Snakemake re-runs a changed free cell;
    without it, or when it paid, it stops with :class:`StaleRun`. ``paid``: the command's
    record of the design's paid runs (:class:`PaidRuns`).
    """
    path = run_dir(design.name, cell, seed, mock, root)
    did = "ran"
    if is_complete(path):
        manifest = read_manifest(path)
        other_code, usd = made_by_other_code(manifest), paid_usd(manifest)
        stop = paid_by_other_code(path, manifest)
        try:
            check_fresh(design, cell, seed, mock, path, manifest)
        except StaleRun:
            if not replace_stale or usd > 0:
                raise
            did = "replaced"
        else:
            if stop is not None:
                raise StaleRun(stop)
            if other_code is not None:
                did = "replaced"
            else:
                did = "reused" if (path / OUTCOMES_FILE).exists() else "scored"
    if did != "reused":
        forget_batch_records(path)
    if did in ("ran", "replaced"):
        simulate(design, cell, seed, mock, cache, root, replay=replay, new_cache=new_cache,
                 guard=guard, paid=paid)
    if did != "reused":
        write_outcomes(path, th)
    return did


def gather(design: Design, mock: bool = False, root: Path | str = ROOT,
           allow_missing: bool = False, tier: str | None = None,
           control: str | None = None) -> pl.DataFrame:
    """Every run's outcomes.json with design, cell, tier, seed, labels and config_hash; with
    ``tier`` only the runs of that tier's cells and of the ``control`` cell (whatever its tier:
    the share_0 of T1 is every tier's control)."""
    rows, missing = [], []
    protocol = asdict(Thresholds())
    cells = None
    if tier is not None:
        if tier not in TIERS:
            raise ConfigError(f"--tier {tier!r}: not a tier ({', '.join(TIERS)})")
        cells = [c.name for c in design.cells.values()
                 if c.tier == tier or (c.name == control and not c.unavailable)]
        if not cells:
            return pl.DataFrame()
    stale, codes = [], {}
    for cell, seed in design.runs(cells):
        path = run_dir(design.name, cell, seed, mock, root)
        if not (path / OUTCOMES_FILE).exists():
            missing.append(str(path))
            forget_batch_records(path)  # so the workflow makes its batch again
            continue
        manifest = read_manifest(path)
        if not is_fresh(design, cell, mock, path, manifest):
            stale.append(str(path))
            continue
        codes.setdefault(manifest.get("code_fingerprint"), str(path))
        config = run_config(design, cell, mock)
        labels = {f"treatment_{k}": v for k, v in config.treatment.items()}
        out = read_json(path / OUTCOMES_FILE)
        scored_at = out.pop(THRESHOLDS_KEY, None)  # None: written before it was recorded
        if scored_at is not None and scored_at != protocol:
            raise ConfigError(
                f"{path / OUTCOMES_FILE}: scored at other thresholds than the protocol's "
                f"({_differ(scored_at, protocol)}): one outcomes.parquet never mixes "
                f"thresholds; score it again (`ma outcomes {path}`)")
        rows.append({"design": design.name, "cell": cell, "tier": design.cell(cell).tier,
                     "seed": seed, "mock": mock, "llm_share": config.population.llm_share,
                     **labels, **out})
    if stale:  # never gathered, --allow-missing or not: they are not this design's runs
        raise StaleRun(f"{design.path}: {len(stale)} run(s) were made from another config than "
                       f"the design now gives, e.g. {stale[0]}; restore the design, or re-run "
                       "its free runs (`.venv/bin/snakemake TARGET` or `ma cell ... --score "
                       "--replace-stale`) and move paid ones away")
    if len(codes) > 1:  # one table, one engine: a paper never mixes runs of two
        made = ", ".join(f"{short(c) if c else 'made before fingerprints'} ({p})"
                         for c, p in codes.items())
        raise StaleRun(f"{design.path}: its runs were made by {len(codes)} versions of the "
                       f"engine: {made}; one outcomes.parquet never mixes them: make the "
                       "stale ones again (`ma status` names them; free runs: the workflow's "
                       "target or `ma design`)")
    if missing and not allow_missing:
        raise MissingRuns(f"{design.path}: {len(missing)} run(s) have no {OUTCOMES_FILE}, e.g. "
                          f"{missing[0]} (run `ma design` or the workflow's target again to "
                          "make them, or pass --allow-missing)")
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows, infer_schema_length=None).sort("cell", "seed")


def _differ(a: dict[str, Any], b: dict[str, Any]) -> str:
    return ", ".join(f"{k} {a.get(k)} not {b[k]}" for k in b if a.get(k) != b[k])


def write_gather(design: Design, mock: bool = False, root: Path | str = ROOT,
                 allow_missing: bool = False, tier: str | None = None,
                 control: str | None = None) -> Path:
    out = outcomes_path(design.name, mock, root, tier)
    write_parquet_atomic(out, gather(design, mock, root, allow_missing, tier, control))
    return out


def sensitivity_grid(bubble_gaps=SENSITIVITY_BUBBLE_GAPS, crash_drops=SENSITIVITY_CRASH_DROPS,
                     base: Thresholds | None = None) -> list[Thresholds]:
    base = base or Thresholds()
    return [Thresholds(b, base.bubble_ticks, c, base.crash_ticks, base.var_order, base.horizon)
            for b, c in product(bubble_gaps, crash_drops)]


def sensitivity(design: Design, grid: list[Thresholds], mock: bool = False,
                root: Path | str = ROOT, allow_missing: bool = False) -> pl.DataFrame:
    """Episode outcomes of every saved run at every grid point, from the saved ticks."""
    rows: list[dict[str, Any]] = []
    missing = []
    for cell, seed in design.runs():
        path = run_dir(design.name, cell, seed, mock, root)
        if not is_complete(path):
            missing.append(str(path))
            continue
        rows += [{"design": design.name, "cell": cell, "seed": seed, **row}
                 for row in episodes_at(load_run(path), grid)]
    if missing and not allow_missing:
        raise MissingRuns(f"{design.path}: {len(missing)} run(s) not simulated, e.g. "
                          f"{missing[0]} (run `ma design` first, or pass --allow-missing)")
    cols = ["design", "cell", "seed", "bubble_gap", "bubble_ticks", "crash_drop", "crash_ticks",
            *EPISODE_KEYS]
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame(
        schema=dict.fromkeys(cols, pl.Utf8))


def write_sensitivity(design: Design, grid: list[Thresholds], mock: bool = False,
                      root: Path | str = ROOT, allow_missing: bool = False) -> Path:
    out = sensitivity_path(design.name, mock, root)
    write_parquet_atomic(out, sensitivity(design, grid, mock, root, allow_missing))
    return out


def _worker(design_path: str, cell: str, seed: int, mock: bool, cache: str | None,
            root: str, th: Thresholds | None, replay: bool) -> tuple[str, int, str]:
    return cell, seed, run_and_score(load_design(design_path, root), cell, seed, mock, cache,
                                     root, th, replay)


def run_design(design: Design, cells: list[str] | None = None, max_seeds: int | None = None,
               workers: int = 1, cache: str | Path | None = None, mock: bool = False,
               root: Path | str = ROOT, th: Thresholds | None = None,
               progress: bool | None = None, replay: bool = False,
               new_cache: bool = False, guard: Guard | None = None) -> dict[str, Any]:
    """Run and score every (cell, seed) not yet scored: cells served by the mock in parallel
    processes, live cells one at a time in this process through the shared cache. With a
    ``guard``, the live runs still to make are checked as a whole before anything runs (the
    freeze, the caps for their total plan), and each again before its first call.

    Returns:
        How many runs were ``ran``, ``scored`` and ``reused``, and ``llm``: what the LLM layer
        did in the runs made (:func:`market_agents.sim.rundir.llm_did`)."""
    for name in cells or []:
        if design.cell(name).unavailable:
            run_config(design, name)  # raises with the cell's message
    todo = design.runs(cells, max_seeds)
    live = [(c, s) for c, s in todo if not mock and design.is_live(c)]
    free = [(c, s) for c, s in todo if (c, s) not in set(live)]
    if guard is not None:
        unfinished = [(c, s) for c, s in live if not is_complete(run_dir(design.name, c, s,
                                                                         root=root))]
        # all its runs at their plan first; each again at its worst case as it starts
        guard.design_runs(design, unfinished, f"ma design {design.name}", worst=False)
    counts = {"ran": 0, "scored": 0, "reused": 0}
    usages: list[dict[str, Any]] = []  # the LLM usage of the runs this command made
    # why here: a workflow job (`ma cell`, `ma gather`) imports this module and needs neither
    # the progress bar nor the process pool (about 20 ms of each job's start-up)
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    from tqdm import tqdm

    bar = tqdm(total=len(todo), desc=design.name, unit="run", disable=progress is False)

    def done(cell: str, seed: int, what: str) -> None:
        what = "ran" if what == "replaced" else what  # a free run of other code, made again
        counts[what] += 1
        if what == "ran":
            usages.append(read_manifest(run_dir(design.name, cell, seed, mock, root))
                          ["llm_usage"])
        bar.set_postfix_str(f"{cell} seed {seed} {what}")
        bar.update()

    free_cache = None if cache is None else str(cache)
    paid = PaidRuns(design, mock, root)  # the design's paid runs, read once for this command
    if workers > 1 and len(free) > 1:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_worker, str(design.path), c, s, mock, free_cache, str(root),
                                   th, replay) for c, s in free]
            for fut in as_completed(futures):
                done(*fut.result())
    else:
        for c, s in free:
            done(c, s, run_and_score(design, c, s, mock, free_cache, root, th, replay,
                                     paid=paid))
    for c, s in live:
        done(c, s, run_and_score(design, c, s, mock, cache, root, th, replay, new_cache, guard,
                                 paid=paid))
    bar.close()
    return {**counts, "llm": llm_did(usages)}


def write_control_sd(design: Design, control: str, mock: bool = False,
                     root: Path | str = ROOT) -> Path:
    """The free σ estimates (§3): the control SD of every outcome, from the design's gathered
    outcomes.parquet, into ``control_sd.parquet`` beside it (analysis.stats.control_sd)."""
    src = outcomes_path(design.name, mock, root)
    if not src.exists():
        raise ConfigError(f"{src} does not exist: run `.venv/bin/snakemake {design.name}` "
                          "(or `ma gather`) first")
    try:
        table = control_sd(pl.read_parquet(src), control)
    except ValueError as exc:
        raise ConfigError(f"{src}: {exc}") from None
    out = control_sd_path(design.name, mock, root)
    write_parquet_atomic(out, table)
    return out

"""The freeze (protocol §5.1, §6): one file, written before the first confirmatory call, that
pins the code (the project's git commit, SHA-256 of the frozen files), the confirmatory design
as a whole (its :func:`fingerprint`: base config, every cell's tier, seeds, treatment and
resolved config, the budgets and caps, the planning rates and the prices of the models it
uses), thresholds, the sensitivity grid, the pilot's σ̂_d table and the minimum detectable
effect per cell.

:func:`mismatches` lists everything that differs now: a frozen file, any part of the design,
a HEAD other than the frozen commit ("git log -1 matches freeze.json") or uncommitted changes
in the work tree. ``protocol.guard`` runs it on every path to a confirmatory live call.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from market_agents.analysis.outcomes import SENSITIVITY_BUBBLE_GAPS, SENSITIVITY_CRASH_DROPS
from market_agents.analysis.stats import ALPHA, POWER
from market_agents.core import sha256_file
from market_agents.errors import MarketAgentsError
from market_agents.layout import deviations_log, freeze_path, pilot_path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
FROZEN_FILES = ("llm/prompting.py", "llm/schema.py", "analysis/outcomes.py")
# Protocol §5.1 sensitivity grid, as the frozen outcomes module defines it.
SENSITIVITY_GRID = {"bubble_gap": list(SENSITIVITY_BUBBLE_GAPS),
                    "crash_drop": list(SENSITIVITY_CRASH_DROPS)}


class FreezeError(MarketAgentsError):
    """No freeze, or the code or design no longer matches it."""


def frozen_hashes(package_root: Path = PACKAGE_ROOT) -> dict[str, str]:
    """The SHA-256 of every frozen file (``FROZEN_FILES``, paths under the package root):
    the prompt, the answer schema and the outcome definitions (Run protocol §5.1).
    """
    return {name: sha256_file(package_root / name) for name in FROZEN_FILES}


def git_revision(repo: Path | None = None) -> dict[str, Any]:
    """HEAD of the project's git repository (the one holding ``repo``, default the working
    directory: where config/ and results/ live) and whether its tracked files differ from it
    (``ma freeze create`` refuses a dirty tree). ``commit`` is None outside a repository."""
    repo = Path.cwd() if repo is None else repo

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                                 timeout=30, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    rev = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": rev, "dirty": bool(status) if status is not None else None}


def build(
    design: dict[str, Any],
    pilot: dict[str, Any],
    prices: dict[str, Any],
    thresholds: dict[str, Any],
    package_root: Path = PACKAGE_ROOT,
    repo: Path | None = None,
) -> dict[str, Any]:
    """The freeze's content.

    Args:
        design: :func:`design_facts` (name, path, config_hash, fingerprint, cells {name:
            {tier, overrides, seeds, models, live_decisions}}, budgets {tier: usd}, families,
            smallest_effect).
        pilot: the pilot manifest (its ``sigma_d`` table).
        prices: the price table.
        thresholds: the outcome thresholds.
        package_root: where the frozen files are read.
        repo: the project's git repository.

    Raises: FreezeError when a live model has no price or the pilot has no σ̂_d table.
    """
    from market_agents.protocol import estimability

    models = sorted({m for c in design["cells"].values() for m in c.get("models", [])})
    table = prices.get("models", {})
    missing = [m for m in models if m not in table]
    if missing:
        raise FreezeError(f"config/prices.yaml has no price for {', '.join(missing)}: add it "
                          "before freezing")
    sigma_d = pilot.get("sigma_d")
    if not sigma_d:
        raise FreezeError(f"{pilot_path()} has no sigma_d table: run "
                          "`.venv/bin/snakemake pilot` first")
    return {
        "git": git_revision(repo),
        "frozen_files": frozen_hashes(package_root),
        "design": design["name"],
        "design_file": design["path"],
        "config_hash": design["config_hash"],
        "fingerprint": design.get("fingerprint"),
        "cells": design["cells"],
        "thresholds": thresholds,
        "sensitivity_grid": SENSITIVITY_GRID,
        "sigma_d": sigma_d,
        "pilot_pass": pilot.get("pass"),
        "tier_budget_usd": design["budgets"],
        "models": {m: table[m] for m in models},
        "families": design["families"],
        "mde": (mde := estimability.mde_table(design["cells"], sigma_d, design["families"])),
        "mde_settings": {"alpha": ALPHA, "power": POWER,
                         "test": "two-sided paired t test, n - 1 df (noncentral t power); "
                                 "primary outcomes at alpha / family size (Holm's first step)"},
        "smallest_effect": design.get("smallest_effect", {}),
        "underpowered": estimability.underpowered(mde, design.get("smallest_effect", {})),
    }


def load(path: Path) -> dict[str, Any]:
    """Read a freeze file.

    Raises:
        FreezeError: it does not exist (confirmatory live runs need one) or is malformed.
    """
    if not path.exists():
        raise FreezeError(f"{path} does not exist: confirmatory live runs need a freeze; review "
                          "the pilot, then run `.venv/bin/snakemake freeze`")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise FreezeError(f"{path}: not valid JSON ({exc.msg}); restore it from the record "
                          "or re-freeze") from None


def mismatches(freeze: dict[str, Any], facts: dict[str, Any], git: dict[str, Any],
               package_root: Path = PACKAGE_ROOT) -> list[str]:
    """Everything that differs from the freeze, one phrase each (empty: it holds).

    Args:
        freeze: the freeze file's content (:func:`build`).
        facts: :func:`design_facts` of the confirmatory design now.
        git: :func:`git_revision` of the project now.
        package_root: where the frozen files are read.
    """
    changed = []
    now = frozen_hashes(package_root)
    for name, digest in freeze.get("frozen_files", {}).items():
        if now.get(name) != digest:
            changed.append(f"{name} (sha256 {digest[:12]}… frozen, {now.get(name, '?')[:12]}… now)")
    if freeze.get("config_hash") != facts["config_hash"]:
        changed.append(f"confirmatory config_hash ({str(freeze.get('config_hash'))[:12]}… frozen, "
                       f"{facts['config_hash'][:12]}… now)")
    if freeze.get("fingerprint") is None:
        changed.append("the freeze has no design fingerprint (written before whole-design "
                       "freezes): re-freeze")
    else:
        changed += _design_changes(freeze["fingerprint"], facts["fingerprint"])
    frozen_git = freeze.get("git") or {}
    if frozen_git.get("commit") != git.get("commit"):
        changed.append(f"HEAD {_short(git.get('commit'))} is not the frozen commit "
                       f"{_short(frozen_git.get('commit'))} (protocol §6: git log -1 matches "
                       "freeze.json)")
    if git.get("dirty"):
        changed.append("the work tree has uncommitted changes to tracked files (git status)")
    return changed


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "(no git repository)"


def _design_changes(frozen: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between two :func:`fingerprint` s, named by cell and key."""
    out = []
    cells_f, cells_n = frozen.get("cells", {}), now.get("cells", {})
    for cell in sorted(set(cells_n) - set(cells_f)):
        out.append(f"cell {cell} added (tier {cells_n[cell].get('tier')})")
    for cell in sorted(set(cells_f) - set(cells_n)):
        out.append(f"cell {cell} removed")
    for cell in sorted(set(cells_f) & set(cells_n)):
        for key in sorted(set(cells_f[cell]) | set(cells_n[cell])):
            a, b = cells_f[cell].get(key), cells_n[cell].get(key)
            if a != b:
                out.append(f"cell {cell}: {key} changed ({_brief(a)} frozen, {_brief(b)} now)")
    for part in ("base_config_hash", "budget", "planning", "prices", "analysis"):
        out += [f"design {k} changed ({_brief(a)} frozen, {_brief(b)} now)"
                for k, a, b in _leaf_diff(part, frozen.get(part), now.get(part))]
    return out


def _leaf_diff(key: str, a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b))
                for d in _leaf_diff(f"{key}.{k}", a.get(k), b.get(k))]
    return [] if a == b else [(key, a, b)]


def _brief(x: Any) -> str:
    text = x if isinstance(x, str) else json.dumps(x, sort_keys=True)
    if isinstance(x, str) and len(x) == 64:  # a hash
        return text[:12] + "…"
    return text if len(text) <= 60 else text[:57] + "…"


def verify(freeze: dict[str, Any], facts: dict[str, Any], git: dict[str, Any],
           package_root: Path = PACKAGE_ROOT,
           where: str = str(freeze_path())) -> None:
    """Raise :class:`FreezeError` naming everything :func:`mismatches` finds."""
    changed = mismatches(freeze, facts, git, package_root)
    if changed:
        raise FreezeError(refusal(where, changed))


def refusal(where: str, changed: list[str]) -> str:
    """The message that refuses a confirmatory run whose frozen inputs changed, with what to do."""
    return (f"{where} no longer matches: {'; '.join(changed)}. Confirmatory runs refuse to "
            "start: restore the frozen code/design and commit, or pass --deviation \"reason\" "
            f"to run anyway (logged in {deviations_log()} and in every run manifest)")


# --- from a design ----------------------------------------------------------------------------


def base_config(design):
    """The confirmatory base: the design's base config with its design-level overrides (cells'
    own overrides excluded), validated."""
    from market_agents.config import apply_overrides, validate

    data = apply_overrides(design.base, design.overrides, str(design.path))
    return validate(data, f"{design.path}: base")


def base_config_hash(design) -> str:
    """config_hash of the confirmatory base (:func:`base_config`)."""
    from market_agents.config import config_hash

    return config_hash(base_config(design))


def market_fundamentals(config) -> dict[str, Any]:
    """The fundamentals block and shocks of a config: what SD(V^pub/V − 1) depends on."""
    return {"fundamentals": config.fundamentals.model_dump(mode="json"),
            "shocks": [s.model_dump(mode="json") for s in config.shocks]}


def fingerprint(design) -> dict[str, Any]:
    """The confirmatory design as a whole, as data: what a changed design changes.

    ``base_config_hash``, per cell its tier, seeds, treatment, unavailable reason, the
    SHA-256 of the prompt and answer schema its LLM traders get (``prompt_identity``) and the
    config_hash of its resolved config (overrides, caps such as ``usd_cap``, the base; an
    equal-USD cell's cap is the freeze's ``equal_usd`` record, so its rule is hashed), the
    budget block (cap, reserves, tier budgets), the planning rates, the price-table rows of
    every live model (the prices used), and the analysis declared: each tier's primary outcomes
    (its Holm family) and the smallest effects of interest.
    """
    from market_agents.agents.llm_trader import prompt_identity
    from market_agents.config import config_hash
    from market_agents.llm.pricing import load_prices

    cells: dict[str, Any] = {}
    models: set[str] = set()
    for name, c in design.cells.items():
        entry = {"tier": c.tier, "seeds": list(c.seeds), "treatment": c.treatment,
                 "unavailable": c.unavailable}
        if not c.unavailable:
            config = design.cell_config(name)
            if c.equal_usd_of:
                # Its usd_cap is the freeze's own equal_usd record (planned spend before the
                # freeze, the pilot's measured spend after): the rule is frozen, not the number,
                # so freezing does not change the design it froze.
                config = config.model_copy(deep=True)
                config.population.llm.usd_cap = 0.0
                entry["equal_usd_of"] = c.equal_usd_of
            entry["config_hash"] = config_hash(config)
            if config.population.n_llm and not config.population.llm.frozen_library:
                # the prompt and schema as sent, not their labels: an edit that keeps
                # prompt_version changes these
                entry.update(prompt_identity(config))
            if design.is_live(name):
                llm = config.population.llm
                models |= {m for r in llm.paid_routes() for m in llm.model_ids(r)}
        cells[name] = entry
    table = load_prices(design.prices_path)
    return {"base_config_hash": base_config_hash(design), "cells": cells,
            "budget": design.budget.model_dump(mode="json"),
            "planning": design.planning.model_dump(mode="json"),
            "prices": {m: table.price(m).model_dump(mode="json") for m in sorted(models)},
            "analysis": {"primary_outcomes": {t: list(v)
                                              for t, v in design.primary_by_tier.items()},
                         "smallest_effect": dict(design.smallest_effect)}}


def design_facts(design) -> dict[str, Any]:
    """What the freeze records of a design: its base config hash, fingerprint, budgets, per
    cell the tier, overrides, seeds, models, live decisions and planned USD (Run protocol §5.1),
    each tier's Holm family (``estimability.families``) and the smallest effects of interest.
    """
    from market_agents.protocol.estimability import families
    from market_agents.protocol.planning import plan_design

    cells = {}
    for p in plan_design(design):
        if p.unavailable:
            continue
        c = design.cell(p.cell)
        cells[p.cell] = {"tier": p.tier, "overrides": c.overrides, "seeds": p.seeds,
                         "models": sorted(p.by_model), "live_decisions": p.decisions,
                         "planned_usd": round(p.usd, 6)}
    return {"name": design.name, "path": str(design.path), "config_hash": base_config_hash(design),
            "fingerprint": fingerprint(design), "cells": cells,
            "budgets": dict(design.budget.tiers),
            "families": families(cells, design.primary_by_tier),
            "smallest_effect": dict(design.smallest_effect)}


def default_thresholds() -> dict[str, Any]:
    """The outcome thresholds the freeze records by default (bubble, crash, VAR order, horizon)."""
    from dataclasses import asdict

    from market_agents.analysis.outcomes import Thresholds

    return asdict(Thresholds())


# --- what the pilot and the sigma runs fill in (§5.1, §5.2: the protocol's TBDs) -------------
# Kept apart from build(): each is its own field of freeze.json.

# §5.1: the confirmatory fundamentals are chosen so that SD(V^pub/V - 1) ≈ 0.5 %; the freeze
# confirms it on the sigma seeds, within this relative tolerance.
FUNDAMENTALS_TARGET_SD = 0.005
FUNDAMENTALS_TOLERANCE = 0.25


def equal_usd(pilot: dict[str, Any], cells: list[str]) -> dict[str, dict[str, Any]]:
    """``freeze.json``'s ``equal_usd``: for each reference cell (``equal_usd_of`` of the
    design's equal-USD cells, e.g. ``share_25``), the measured mean spend per pilot run that
    becomes the equal-USD cell's ``llm.usd_cap`` (§5.2 T5, TBD ≈ 0.34).

    Args:
        pilot: the pilot manifest (``usd_per_run`` by cell: mean_usd, runs, models).
        cells: the reference cells.

    Raises: FreezeError when the pilot has no spend for a reference cell.
    """
    per_run = pilot.get("usd_per_run") or {}
    out = {}
    for cell in sorted(set(cells)):
        row = per_run.get(cell)
        if not row or not row.get("runs") or not row.get("mean_usd"):
            raise FreezeError(f"the pilot manifest has no measured spend per {cell!r} run "
                              "(usd_per_run): the equal-USD cap cannot be frozen; re-run "
                              "`ma pilot` on a pilot with that live cell")
        out[cell] = {"usd_cap": float(row["mean_usd"]), "runs": row["runs"],
                     "models": row.get("models", []),
                     "measured_as": "mean llm_usd per pilot run of this cell"}
    return out


def frozen_equal_usd(path: Path, cell: str) -> float:
    """The equal-USD cap a design reads: ``equal_usd[cell].usd_cap`` of the freeze at ``path``;
    FreezeError when the freeze does not hold one."""
    entry = (load(path).get("equal_usd") or {}).get(cell)
    if not entry or entry.get("usd_cap") is None:
        raise FreezeError(f"{path} has no equal_usd entry for {cell!r}: the freeze predates the "
                          "equal-USD cap; record a deviation and re-freeze")
    return float(entry["usd_cap"])


def public_value_gap_sd(ticks: Any) -> float:
    """SD (ddof 1) over a run's ticks of V^pub/V − 1 (``ticks.parquet``: public_value,
    fundamental; the first asset)."""
    t = ticks.filter(ticks["asset"] == 0)
    return float((t["public_value"] / t["fundamental"] - 1.0).std(ddof=1))


def fundamentals_check(run_dirs: dict[int, Path], fundamentals: dict[str, Any],
                       confirmatory: dict[str, Any], target: float = FUNDAMENTALS_TARGET_SD,
                       tolerance: float = FUNDAMENTALS_TOLERANCE) -> dict[str, Any]:
    """``freeze.json``'s ``fundamentals_check`` (§5.1): SD(V^pub/V − 1) measured on each sigma
    seed, their mean, and whether it lies within ``tolerance`` (relative) of ``target``.

    Args:
        run_dirs: sigma seed -> its run directory.
        fundamentals: the sigma runs' fundamentals block and shocks (``{"fundamentals": …,
            "shocks": …}``); they must be the confirmatory base's (``confirmatory``), or the
            measurement confirms nothing.
        confirmatory: the confirmatory base's fundamentals block and shocks.
        target: the target SD of V^pub/V − 1 (default 0.005: the protocol's ≈ 0.5 %).
        tolerance: the relative tolerance around ``target`` (default 0.25: 25 %).

    Raises: FreezeError when the blocks differ or a run's ticks are missing.
    """
    import polars as pl

    from market_agents.sim.rundir import table_file

    if fundamentals != confirmatory:
        raise FreezeError("the sigma design's fundamentals and shocks differ from the "
                          "confirmatory base's: the check would measure another market; give "
                          "them the same overrides")
    per_seed = {}
    for seed, path in sorted(run_dirs.items()):
        f = Path(path) / table_file("ticks")
        if not f.exists():
            raise FreezeError(f"{f} does not exist: run `.venv/bin/snakemake sigma` before "
                              "the freeze")
        per_seed[str(seed)] = public_value_gap_sd(pl.read_parquet(f))
    if not per_seed:
        raise FreezeError("no sigma runs to measure SD(V^pub/V - 1) on")
    mean = sum(per_seed.values()) / len(per_seed)
    return {"measure": "SD(V^pub/V - 1) over the ticks of each sigma run", "target": target,
            "tolerance": tolerance, "mean_sd": mean, "per_seed": per_seed,
            "confirmed": abs(mean / target - 1.0) <= tolerance, **confirmatory}


def token_profiles(pilot: dict[str, Any], models: list[str],
                   measured: list[str]) -> dict[str, dict[str, Any]]:
    """``freeze.json``'s ``token_profiles``: tokens per decision in force for each model of the
    design. The pilot's models (``measured``) carry the pilot's measured means; any other model
    (gpt-5.4-mini) is assumed equal to the first measured one until it is measured (§5.2)."""
    tokens = pilot.get("tokens_per_decision") or {}
    profile = {k: tokens.get(k) for k in ("in", "out", "reasoning")}
    source = sorted(measured)[0] if measured else None
    out = {}
    for m in sorted(set(models)):
        if m in measured:
            out[m] = {**profile, "source": "measured in the pilot"}
        else:
            out[m] = {**profile, "source": f"assumed equal to {source} (not measured)"
                      if source else "unmeasured"}
    return out


def sigma_runs(sigma, gathered: Path | None = None) -> list[tuple[str, int]]:
    """The sigma runs the freeze measures: those of the stage's gathered ``outcomes.parquet``
    (every seed, or the first ``max_seeds`` of a small stage), else every run of the design.
    Each one's ticks.parquet must exist (:func:`fundamentals_check`)."""
    import polars as pl

    if gathered is None or not gathered.exists():
        return sigma.runs()
    frame = pl.read_parquet(gathered, columns=["cell", "seed"])
    return sorted((str(c), int(s)) for c, s in frame.iter_rows()) or sigma.runs()


def pilot_and_sigma_records(facts: dict[str, Any], design, sigma, pilot: dict[str, Any],
                            accept_unconfirmed: bool = False, sigma_mock: bool = False,
                            sigma_gathered: Path | None = None) -> dict[str, Any]:
    """The freeze's fields that the pilot and the sigma runs fill in (the protocol's TBDs):
    ``equal_usd`` (§5.2 T5), ``fundamentals_check`` (§5.1) and ``token_profiles`` (§5.2).

    Args:
        facts: :func:`design_facts` of the confirmatory design (its live models).
        design: the confirmatory design (its base, its equal-USD cells).
        sigma: the sigma design, whose runs (under its results root) are measured.
        pilot: the pilot manifest.
        accept_unconfirmed: freeze although the fundamentals miss their target (recorded).
        sigma_mock: read the sigma runs of the rehearsal (a rehearsal's freeze never reads the
            live roots).
        sigma_gathered: the sigma design's gathered outcomes.parquet: which runs to measure.

    Raises: FreezeError when a measurement is missing or the fundamentals are unconfirmed.
    """
    runs = sigma_runs(sigma, sigma_gathered)
    check = fundamentals_check(
        {seed: sigma.run_dir(cell, seed, sigma_mock) for cell, seed in runs},
        market_fundamentals(sigma.cell_config(runs[0][0])),
        market_fundamentals(base_config(design)))
    if not check["confirmed"]:
        if not accept_unconfirmed:
            raise FreezeError(
                f"SD(V^pub/V - 1) on the sigma seeds is {check['mean_sd']:.4%}, not within "
                f"{check['tolerance']:.0%} of {check['target']:.2%} (§5.1): adjust "
                "fundamentals.jump_sigma, or freeze anyway with "
                "--accept-unconfirmed-fundamentals and record the deviation")
        check["accepted_unconfirmed"] = True
    models = sorted({m for c in facts["cells"].values() for m in c.get("models", [])})
    measured = sorted({m for row in (pilot.get("usd_per_run") or {}).values()
                       for m in row.get("models", [])})
    refs = [c.equal_usd_of for c in design.cells.values() if c.equal_usd_of]
    return {"equal_usd": equal_usd(pilot, refs), "fundamentals_check": check,
            "token_profiles": token_profiles(pilot, models, measured)}

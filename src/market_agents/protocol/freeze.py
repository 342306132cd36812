"""The freeze (protocol §5.1, §6): one file, written before the first confirmatory call, that
pins the code (the project's git commit, SHA-256 of the frozen files), the confirmatory design
as a whole (its fingerprint, ``facts.fingerprint``: base config, every cell's tier, seeds,
treatment and resolved config, the budgets and caps, the planning rates and the prices of the
models it uses), thresholds, the sensitivity grid, the pilot's σ̂_d table and the minimum detectable
effect per cell.

:func:`mismatches` lists everything that differs now: a frozen file, any part of the design,
a HEAD other than the frozen commit ("git log -1 matches freeze.json") or uncommitted changes
in the work tree. ``protocol.guard`` runs it on every path to a confirmatory live call.

This module is the freeze file: what it holds (:func:`build`), reading it (:func:`load`), what
no longer matches it, and the one function a run's equal-USD cap comes from
(:func:`frozen_equal_usd`). It knows nothing of a design object: what the freeze records of a
design is :mod:`market_agents.protocol.facts`, what the pilot and the sigma runs fill in is
:mod:`market_agents.protocol.measured`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from market_agents.analysis.stats import ALPHA, POWER, SIGMA_LEVEL
from market_agents.core import sha256_file
from market_agents.errors import MarketAgentsError
from market_agents.layout import deviations_log, freeze_path, pilot_path
from market_agents.protocol import estimability

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
# The prompt (its code and the persona sets it reads), the answer schema and the outcome
# definitions (protocol §5.1).
FROZEN_FILES = ("llm/prompting.py", "llm/prompt_sets.yaml", "llm/schema.py",
                "analysis/outcomes.py")


def sensitivity_grid() -> dict[str, list[float]]:
    """The protocol §5.1 sensitivity grid a freeze records (``bubble_gap`` and ``crash_drop``
    thresholds), as the frozen outcomes module defines it."""
    # why: the outcome definitions load polars; the Snakefile's process imports this module
    from market_agents.analysis.outcomes import SENSITIVITY_BUBBLE_GAPS, SENSITIVITY_CRASH_DROPS

    return {"bubble_gap": list(SENSITIVITY_BUBBLE_GAPS),
            "crash_drop": list(SENSITIVITY_CRASH_DROPS)}


class FreezeError(MarketAgentsError):
    """No freeze, or the code or design no longer matches it."""


def frozen_hashes(package_root: Path = PACKAGE_ROOT) -> dict[str, str]:
    """The SHA-256 of every frozen file (``FROZEN_FILES``, paths under the package root):
    the prompt and its persona sets, the answer schema and the outcome definitions (Run
    protocol §5.1).
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
        design: ``facts.design_facts`` (name, path, config_hash, fingerprint, cells {name:
            {tier, overrides, seeds, models, live_decisions}}, budgets {tier: usd}, families,
            smallest_effect, power: the σ_d bound's level and exchangeable cells,
            interactions).
        pilot: the pilot manifest (its ``sigma_d`` table).
        prices: the price table.
        thresholds: the outcome thresholds.
        package_root: where the frozen files are read.
        repo: the project's git repository.

    Raises: FreezeError when a live model has no price or the pilot has no σ̂_d table.
    """
    models = sorted({m for c in design["cells"].values() for m in c.get("models", [])})
    table = prices.get("models", {})
    missing = [m for m in models if m not in table]
    if missing:
        raise FreezeError(f"config/prices.yaml has no price for {', '.join(missing)}: add it "
                          "before freezing")
    sigma_d = pilot.get("sigma_d")
    power = {"sigma_level": SIGMA_LEVEL, "exchangeable": {}, **(design.get("power") or {})}
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
        "sensitivity_grid": sensitivity_grid(),
        "sigma_d": sigma_d,
        "pilot_pass": pilot.get("pass"),
        "tier_budget_usd": design["budgets"],
        "models": {m: table[m] for m in models},
        "families": design["families"],
        "interactions": design.get("interactions", []),
        "mde": (mde := estimability.mde_table(design["cells"], sigma_d, design["families"],
                                              power, design.get("interactions", ()))),
        "mde_settings": {"alpha": ALPHA, "power": POWER,
                         "test": "two-sided paired t test, n - 1 df (noncentral t power); "
                                 "primary outcomes at alpha / family size (Holm's first step)",
                         "sigma": f"mde: at the one-sided {power['sigma_level']:.0%} upper "
                                  "confidence bound of sigma_d, sigma_hat * sqrt(df / "
                                  "chi2_{1-level, df}) on the pilot's df (pairs - 1; summed "
                                  "over cells pooled as exchangeable); mde_point: at "
                                  "sigma_hat itself",
                         "sigma_level": power["sigma_level"],
                         "exchangeable": power.get("exchangeable", {})},
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
        facts: ``facts.design_facts`` of the confirmatory design now.
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
    """What differs between two fingerprints (``facts.fingerprint``), named by cell and key."""
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


def frozen_equal_usd(path: Path, cell: str) -> float:
    """The equal-USD cap of the cells whose reference cell is ``cell``:
    ``equal_usd[cell].usd_cap`` of the freeze at ``path``; the one function a run's frozen cap
    comes from (``planning.equal_usd_cap`` asks it); FreezeError when the freeze does not
    hold one."""
    entry = (load(path).get("equal_usd") or {}).get(cell)
    if not entry or entry.get("usd_cap") is None:
        raise FreezeError(f"{path} has no equal_usd entry for {cell!r}: the freeze predates the "
                          "equal-USD cap; record a deviation and re-freeze")
    return float(entry["usd_cap"])

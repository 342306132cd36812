"""The freeze (protocol §5.1): one file, written before the first confirmatory call, that pins
the code (git revision, SHA-256 of the frozen files), the confirmatory design (config_hash, cells,
seeds, thresholds, sensitivity grid, tier budgets, model ids and prices), the pilot's σ̂_d table
and the minimum detectable effect per cell. :func:`verify` is what confirmatory live jobs run:
no freeze, or a frozen file or the confirmatory config_hash that changed since, refuses.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from pathlib import Path
from statistics import NormalDist
from typing import Any

from market_agents.analysis.outcomes import SENSITIVITY_BUBBLE_GAPS, SENSITIVITY_CRASH_DROPS
from market_agents.errors import MarketAgentsError

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
FROZEN_FILES = ("llm/prompting.py", "llm/schema.py", "analysis/outcomes.py")
# Protocol §5.1 sensitivity grid, as the frozen outcomes module defines it.
SENSITIVITY_GRID = {"bubble_gap": list(SENSITIVITY_BUBBLE_GAPS),
                    "crash_drop": list(SENSITIVITY_CRASH_DROPS)}
ALPHA, POWER = 0.05, 0.80


class FreezeError(MarketAgentsError):
    """No freeze, or the code or design no longer matches it."""


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def frozen_hashes(package_root: Path = PACKAGE_ROOT) -> dict[str, str]:
    return {name: sha256_file(package_root / name) for name in FROZEN_FILES}


def git_revision(repo: Path = PACKAGE_ROOT) -> dict[str, Any]:
    """HEAD and whether the work tree differs from it (a dirty freeze is allowed but recorded)."""
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


def mde(sigma_d: float | None, n: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Two-sided paired minimum detectable effect: (z_{1-α/2} + z_{power}) · σ̂_d / √n."""
    if sigma_d is None or n < 1 or not math.isfinite(sigma_d):
        return None
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return z * sigma_d / math.sqrt(n)


def mde_table(cells: dict[str, dict[str, Any]], sigma_d: dict[str, dict[str, Any]]) -> dict:
    """MDE per LLM cell and outcome. A cell the pilot ran uses its own σ̂_d; any other cell
    uses the largest σ̂_d the pilot saw for that outcome (conservative), and says so."""
    outcomes = sorted({k for row in sigma_d.values() for k in row if k != "n_pairs"})
    worst = {
        y: max((r[y] for r in sigma_d.values() if r.get(y) is not None), default=None)
        for y in outcomes
    }
    table = {}
    for cell, facts in cells.items():
        if not facts.get("live_decisions"):
            continue
        own = sigma_d.get(cell)
        n = len(facts["seeds"])
        table[cell] = {
            "seeds": n,
            "sigma_from": cell if own else "max over pilot cells",
            "mde": {y: mde((own or {}).get(y, worst[y]) if own else worst[y], n) for y in outcomes},
        }
    return table


def build(
    design: dict[str, Any],
    pilot: dict[str, Any],
    prices: dict[str, Any],
    thresholds: dict[str, Any],
    package_root: Path = PACKAGE_ROOT,
    repo: Path = PACKAGE_ROOT,
) -> dict[str, Any]:
    """``design``: name, path, config_hash, cells {name: {tier, overrides, seeds, models,
    live_decisions}}, budgets {tier: usd}."""
    models = sorted({m for c in design["cells"].values() for m in c.get("models", [])})
    table = prices.get("models", {})
    missing = [m for m in models if m not in table]
    if missing:
        raise FreezeError(f"config/prices.yaml has no price for {', '.join(missing)}: add it "
                          "before freezing")
    sigma_d = pilot.get("sigma_d")
    if not sigma_d:
        raise FreezeError("results/manifests/pilot.json has no sigma_d table: run "
                          "`snakemake pilot` first")
    return {
        "git": git_revision(repo),
        "frozen_files": frozen_hashes(package_root),
        "design": design["name"],
        "design_file": design["path"],
        "config_hash": design["config_hash"],
        "cells": design["cells"],
        "thresholds": thresholds,
        "sensitivity_grid": SENSITIVITY_GRID,
        "sigma_d": sigma_d,
        "pilot_pass": pilot.get("pass"),
        "tier_budget_usd": design["budgets"],
        "models": {m: table[m] for m in models},
        "mde": mde_table(design["cells"], sigma_d),
        "mde_settings": {"alpha": ALPHA, "power": POWER, "test": "two-sided paired"},
    }


def load(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise FreezeError(f"{path} does not exist: confirmatory live runs need a freeze; review "
                          "the pilot, then run `snakemake freeze`")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise FreezeError(f"{path}: not valid JSON ({exc.msg}); restore it from the record "
                          "or re-freeze") from None


def verify(freeze: dict[str, Any], config_hash: str, package_root: Path = PACKAGE_ROOT,
           where: str = "results/manifests/freeze.json") -> None:
    """Raise :class:`FreezeError` naming every frozen file or hash that changed."""
    changed = []
    now = frozen_hashes(package_root)
    for name, digest in freeze.get("frozen_files", {}).items():
        if now.get(name) != digest:
            changed.append(f"{name} (sha256 {digest[:12]}… frozen, {now.get(name, '?')[:12]}… now)")
    if freeze.get("config_hash") != config_hash:
        changed.append(f"confirmatory config_hash ({str(freeze.get('config_hash'))[:12]}… frozen, "
                       f"{config_hash[:12]}… now)")
    if changed:
        raise FreezeError(f"{where} no longer matches: {'; '.join(changed)}. Confirmatory runs "
                          "refuse to start: restore the frozen code/design, or record a "
                          "deviation and re-freeze (`snakemake freeze` after removing the file)")


# --- from a design ----------------------------------------------------------------------------


def base_config_hash(design) -> str:
    """config_hash of the confirmatory base: the design's base config with its design-level
    overrides (cells' own overrides excluded)."""
    from market_agents.config import apply_overrides, config_hash, validate

    data = apply_overrides(design.base, design.overrides, str(design.path))
    return config_hash(validate(data, f"{design.path}: base"))


def design_facts(design) -> dict[str, Any]:
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
            "cells": cells, "budgets": dict(design.budget.tiers)}


def default_thresholds() -> dict[str, Any]:
    from dataclasses import asdict

    from market_agents.analysis.outcomes import Thresholds

    return asdict(Thresholds())

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
    repo: Path | None = None,
) -> dict[str, Any]:
    """``design``: :func:`design_facts` (name, path, config_hash, fingerprint, cells {name:
    {tier, overrides, seeds, models, live_decisions}}, budgets {tier: usd})."""
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
        "fingerprint": design.get("fingerprint"),
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
    for part in ("base_config_hash", "budget", "planning", "prices"):
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
           where: str = "results/manifests/freeze.json") -> None:
    """Raise :class:`FreezeError` naming everything :func:`mismatches` finds."""
    changed = mismatches(freeze, facts, git, package_root)
    if changed:
        raise FreezeError(refusal(where, changed))


def refusal(where: str, changed: list[str]) -> str:
    return (f"{where} no longer matches: {'; '.join(changed)}. Confirmatory runs refuse to "
            "start: restore the frozen code/design and commit, or pass --deviation \"reason\" "
            "to run anyway (logged in results/manifests/deviations.jsonl and in every run "
            "manifest)")


# --- from a design ----------------------------------------------------------------------------


def base_config_hash(design) -> str:
    """config_hash of the confirmatory base: the design's base config with its design-level
    overrides (cells' own overrides excluded)."""
    from market_agents.config import apply_overrides, config_hash, validate

    data = apply_overrides(design.base, design.overrides, str(design.path))
    return config_hash(validate(data, f"{design.path}: base"))


def fingerprint(design) -> dict[str, Any]:
    """The confirmatory design as a whole, as data: what a changed design changes.

    ``base_config_hash``, per cell its tier, seeds, treatment, unavailable reason and the
    config_hash of its resolved config (overrides, caps such as ``usd_cap``, the base), the
    budget block (cap, reserves, tier budgets), the planning rates, and the price-table rows of
    every live model (the prices used).
    """
    from market_agents.config import config_hash
    from market_agents.llm.pricing import load_prices

    cells: dict[str, Any] = {}
    models: set[str] = set()
    for name, c in design.cells.items():
        entry = {"tier": c.tier, "seeds": list(c.seeds), "treatment": c.treatment,
                 "unavailable": c.unavailable}
        if not c.unavailable:
            config = design.cell_config(name)
            entry["config_hash"] = config_hash(config)
            if design.is_live(name):
                llm = config.population.llm
                models |= {m for r in llm.paid_routes() for m in llm.model_ids(r)}
        cells[name] = entry
    table = load_prices(design.prices_path)
    return {"base_config_hash": base_config_hash(design), "cells": cells,
            "budget": design.budget.model_dump(mode="json"),
            "planning": design.planning.model_dump(mode="json"),
            "prices": {m: table.price(m).model_dump(mode="json") for m in sorted(models)}}


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
            "fingerprint": fingerprint(design), "cells": cells,
            "budgets": dict(design.budget.tiers)}


def default_thresholds() -> dict[str, Any]:
    from dataclasses import asdict

    from market_agents.analysis.outcomes import Thresholds

    return asdict(Thresholds())

"""The budget gate: before any live job of a design/tier, compare planned plus recorded spend with
the tier budget, the pilot cap and the project cap; reconcile spend after earlier tiers and, when
it overran the plan, cut seeds of the tiers not yet run in the protocol's order of sacrifice.

Pure functions over :class:`RunPlan` rows; ``ma gate`` builds the rows from a design and the
run directories and writes the tier's budget manifest (``layout.budget_manifest``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from market_agents.errors import ConfigError
from market_agents.layout import ROOT, budget_manifest, run_dir
from market_agents.protocol.tiers import SACRIFICE_ORDER, tier_key

if TYPE_CHECKING:
    from market_agents.protocol.design import Design
    from market_agents.protocol.planning import RunPlan

# The spend ledger, the planning and the run directories (polars, the config models) are
# imported in the functions that read them: every live job's `ma gate check` only reads its
# manifest (is_approved), and importing them took half of its ~0.28 CPU s.


@dataclass(frozen=True)
class Caps:
    """The caps a budget gate checks, in USD: the tier's budget, the pilot cap (only when
    gating the pilot), the project cap and what the project has spent, the tolerance over
    plan that triggers the order of sacrifice, and T1's seed floor (Run protocol §5.3).
    """

    tier_budget_usd: float | None  # None: the design sets no budget for this tier
    pilot_cap_usd: float | None  # set only when gating the pilot design
    project_cap_usd: float
    project_spent_usd: float  # recorded live spend of every design, finished runs
    tolerance: float  # spend over plan that triggers the order of sacrifice
    t1_min_seeds: int  # T1 cells are never cut below this


def reconcile(runs: Sequence[RunPlan], tier: str) -> dict:
    """Spend vs plan over the finished runs of the tiers before ``tier``."""
    earlier = [r for r in runs if r.done and tier_key(r.tier) < tier_key(tier)]
    planned = sum(r.usd for r in earlier)
    spent = sum(r.spent_usd or 0.0 for r in earlier)
    return {
        "tiers": sorted({r.tier for r in earlier}),
        "planned_usd": round(planned, 6),
        "spent_usd": round(spent, 6),
        "overrun_usd": round(spent - planned, 6),
    }


def sacrifice(
    runs: Sequence[RunPlan], from_tier: str, deficit_usd: float, t1_min_seeds: int
) -> list[RunPlan]:
    """Unfinished paid runs to cut, in the order of sacrifice, until their planned USD covers
    ``deficit_usd``. Within a group the highest seed goes first, cells in turn, so a cell keeps
    its lowest (pre-registered, used-in-order) seeds. Only tiers from ``from_tier`` on are cut."""
    if deficit_usd <= 0:
        return []
    first = tier_key(from_tier)
    seeds_left: dict[tuple[str, str], int] = defaultdict(int)
    for r in runs:
        seeds_left[(r.tier, r.cell)] += 1
    cut: list[RunPlan] = []
    saved = 0.0
    taken: set[tuple[str, str, int]] = set()
    for tier, cells in SACRIFICE_ORDER:
        if tier_key(tier) < first:
            continue
        floor = t1_min_seeds if tier == "T1" else 0
        pool = [
            r
            for r in runs
            if r.tier == tier
            and not r.done
            and r.usd > 0
            and (cells is None or r.cell in cells)
            and (r.tier, r.cell, r.seed) not in taken
        ]
        pool.sort(key=lambda r: (-r.seed, r.cell))
        for r in pool:
            if saved >= deficit_usd:
                return cut
            if seeds_left[(r.tier, r.cell)] <= floor:
                continue
            seeds_left[(r.tier, r.cell)] -= 1
            taken.add((r.tier, r.cell, r.seed))
            cut.append(r)
            saved += r.usd
    return cut


def _refuse(what: str, cap: float, plan: float, spent: float, where: str, advice: str) -> None:
    # why: heavy (polars, the config models); `ma gate check` needs none of it
    from market_agents.protocol import ledger

    ledger.refuse(what, cap, plan, spent, f"budget gate {where}", advice)


def approve(design: str, tier: str, runs: Sequence[RunPlan], caps: Caps) -> dict:
    """Decide the live runs of ``tier`` and return the budget manifest; raise
    :class:`BudgetExceeded` (naming the cap, the plan and the spent amount) over any cap."""
    where = f"{design}/{tier}"
    rec = reconcile(runs, tier)
    triggered = rec["spent_usd"] > (1 + caps.tolerance) * rec["planned_usd"] and rec[
        "overrun_usd"
    ] > 0
    cut = sacrifice(runs, tier, rec["overrun_usd"], caps.t1_min_seeds) if triggered else []
    cut_keys = {(r.tier, r.cell, r.seed) for r in cut}
    mine = [r for r in runs if r.tier == tier]
    todo = [r for r in mine if not r.done and (r.tier, r.cell, r.seed) not in cut_keys]
    plan_usd = sum(r.usd for r in todo)
    plan_decisions = sum(r.decisions for r in todo)
    tier_spent = sum(r.spent_usd or 0.0 for r in mine)
    design_spent = sum(r.spent_usd or 0.0 for r in runs)
    fix = f"Lower the seeds or cells of {design}, or raise the cap in the config, then re-run."
    if caps.tier_budget_usd is not None and plan_usd + tier_spent > caps.tier_budget_usd + 1e-9:
        _refuse(f"tier {tier} budget", caps.tier_budget_usd, plan_usd, tier_spent, where, fix)
    if caps.pilot_cap_usd is not None and plan_usd + design_spent > caps.pilot_cap_usd + 1e-9:
        _refuse("pilot cap", caps.pilot_cap_usd, plan_usd, design_spent, where, fix)
    if plan_usd + caps.project_spent_usd > caps.project_cap_usd + 1e-9:
        _refuse("project cap", caps.project_cap_usd, plan_usd, caps.project_spent_usd, where, fix)
    return {
        "design": design,
        "tier": tier,
        "approved": _by_cell(r for r in mine if (r.tier, r.cell, r.seed) not in cut_keys),
        "plan": {
            "live_runs": sum(1 for r in todo if r.decisions > 0),
            "decisions": plan_decisions,
            "usd": round(plan_usd, 6),
        },
        "spent_usd": {
            "tier": round(tier_spent, 6),
            "design": round(design_spent, 6),
            "project": round(caps.project_spent_usd, 6),
        },
        "caps_usd": {
            "tier": caps.tier_budget_usd,
            "pilot": caps.pilot_cap_usd,
            "project": caps.project_cap_usd,
        },
        "reconciliation": {**rec, "tolerance": caps.tolerance, "cut_applied": triggered},
        "cut": [
            {"tier": r.tier, "cell": r.cell, "seed": r.seed, "usd": round(r.usd, 6)} for r in cut
        ],
    }


def _by_cell(runs: Iterable[RunPlan]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for r in runs:
        out[r.cell].append(r.seed)
    return {cell: sorted(seeds) for cell, seeds in sorted(out.items())}


def is_approved(manifest: dict, cell: str, seed: int) -> bool:
    """Whether a gate manifest approves ``seed`` of ``cell`` (a cut seed is not approved)."""
    return seed in manifest.get("approved", {}).get(cell, [])


# --- reading designs and run directories ------------------------------------------------------


def cut_runs(design: str, tier: str, root: Path | str = ROOT) -> set[tuple[str, int]]:
    """(cell, seed) the gate of a design/tier cut in the order of sacrifice; empty before the
    gate has run."""
    path = budget_manifest(design, tier, root)
    if not path.exists():
        return set()
    return {(c["cell"], c["seed"]) for c in json.loads(path.read_text()).get("cut", [])}


def design_runs(design: Design, results: Path = ROOT) -> list[RunPlan]:
    """The design's planned runs with what each finished one paid (from its run directory)."""
    # why: heavy (polars, the config models); `ma gate check` needs none of it
    from market_agents.protocol.ledger import recorded_usd
    from market_agents.protocol.planning import run_plans

    return [replace(r, spent_usd=recorded_usd(run_dir(design.name, r.cell, r.seed,
                                                      root=results)))
            for r in run_plans(design)]


def project_spent(results: Path = ROOT) -> float:
    """Recorded live spend of the project: the ledger's total (rehearsals live apart)."""
    # why: heavy (polars, the config models); `ma gate check` needs none of it
    from market_agents.protocol import ledger

    return ledger.spend(results).total_usd


def missing_keys(design: Design, cells: list[str]) -> list[tuple[str, str]]:
    """(cell, what is missing) for every paid route of ``cells`` whose API key is not set
    (``.env`` is read first); empty when every key is there."""
    # why: the provider registry is the LLM layer; the workflow imports this module at DAG time
    # and only a live tier's key check needs it
    from market_agents.llm.providers.registry import api_key, load_env
    from market_agents.protocol.planning import run_config  # why: the config models: heavy

    load_env()
    missing = []
    for cell in cells:
        llm = run_config(design, cell).population.llm
        for route in llm.paid_routes():
            try:
                api_key(llm.kind(route), route, llm.settings(route))
            except ConfigError as exc:
                missing.append((cell, str(exc)))
    return missing


def check_keys(design: Design, cells: list[str], where: str) -> None:
    """A live tier needs its provider keys before the gate approves anything: ConfigError
    naming the first missing one."""
    for cell, problem in missing_keys(design, cells)[:1]:
        raise ConfigError(
            f"budget gate {where}: cell {cell!r}: {problem}. Or rehearse the same cells on "
            "the mock first (`.venv/bin/snakemake rehearse_<tier>`)"
        )


def reconcile_tier(design: Design, tier: str, results: Path = ROOT) -> dict:
    """A tier's paid USD (the priced cost of every paid answer its finished runs used, which
    survives a kill) against the plan of those runs, and sum(llm_usd) over their outcomes
    (equal unless a run mixes paid and mock routes: llm_usd prices mock answers too)."""
    # why: heavy (polars, the config models); `ma gate check` needs none of it
    from market_agents.sim.rundir import OUTCOMES_FILE

    runs = [r for r in design_runs(design, results) if r.tier == tier]
    planned = sum(r.usd for r in runs if r.done)
    spent = sum(r.spent_usd or 0.0 for r in runs)
    llm_usd = 0.0
    for r in runs:
        path = run_dir(design.name, r.cell, r.seed, root=results) / OUTCOMES_FILE
        if path.exists():
            llm_usd += float(json.loads(path.read_text()).get("llm_usd") or 0.0)
    return {
        "design": design.name,
        "tier": tier,
        "runs_done": sum(r.done for r in runs),
        "runs_planned": len(runs),
        "planned_usd": round(planned, 6),
        "spent_usd": round(spent, 6),
        "llm_usd": round(llm_usd, 6),
        "spent_over_plan": round(spent / planned, 4) if planned else None,
    }

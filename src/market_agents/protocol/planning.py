"""Planned live decisions and USD of a design, per run, cell and tier (protocol §4, §5.2).

Two rates are reported side by side:
- the *planning* rate of the design (``planning.usd_per_decision``: 0.0005 USD per nano decision,
  0.0016 per mini decision), the protocol's convention;
- the *price-table* rate, ``llm.pricing.planned_cost(model, tokens_in, tokens_out)`` from
  ``config/prices.yaml`` (0.00044 for nano at 760/230).
Tier budgets and the project/pilot cap are checked against the planning rate, as the protocol's
tables are. A per-run ``usd_cap`` below the planned run cost stops decisions at the cap
(equal-USD cells such as mini_25_equalusd); the decisions are counted at the planning rate.

This is the step that computes from a design (which is data: ``protocol/design.py``): the
checks a design must pass before anything runs (:func:`check`, :func:`load_checked`: live
models priced, tier budgets and the cap adding up) and an equal-USD cell's cap
(:func:`equal_usd_cap`: the freeze's, through ``freeze.frozen_equal_usd``, else its
reference cell's planned spend), which :func:`run_config` passes into the cell's config.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from market_agents.config import Config
from market_agents.config_llm import TokenProfile
from market_agents.errors import ConfigError
from market_agents.layout import ROOT, freeze_path
from market_agents.prices import load_prices, run_prices
from market_agents.protocol.design import Design, load_design
from market_agents.protocol.freeze import frozen_equal_usd
from market_agents.protocol.tiers import label

_TOKENS = TokenProfile()  # the planned tokens per decision (760 in, 230 out)


@dataclass(frozen=True)
class RunPlan:
    """One run of a design: its planned live decisions and USD (planning rate) and, once it has
    finished, what it paid. The one row type the gate, the workflow and ``ma budget`` share."""

    tier: str  # tiers.label(): NO_TIER for a design without tiers
    cell: str
    seed: int
    decisions: int  # planned live decisions of this run
    usd: float  # planned USD of this run, at the planning rate
    spent_usd: float | None = None  # None: not finished yet

    @property
    def done(self) -> bool:
        """Whether the run has finished (its paid USD is known)."""
        return self.spent_usd is not None


@dataclass
class CellPlan:
    """The plan of one cell: per run, its live decisions (by model), planned USD at the
    planning rate and at the price-table rate, and its per-run cap; ``decisions`` and ``usd``
    are over the cell's seeds.
    """

    cell: str
    tier: str | None
    seeds: list[int]
    live: bool
    n_llm: int
    decisions_per_agent: int
    run_decisions: float  # live decisions of one run
    run_usd: float  # planning rate, one run
    run_cap_usd: float
    by_model: dict[str, float] = field(default_factory=dict)  # live decisions per run
    table_rate: dict[str, float] = field(default_factory=dict)  # USD per decision, price table
    unavailable: str | None = None

    @property
    def decisions(self) -> int:
        """Planned live decisions over the cell's seeds."""
        return round(self.run_decisions * len(self.seeds))

    @property
    def usd(self) -> float:
        """Planned USD over the cell's seeds, at the planning rate."""
        return self.run_usd * len(self.seeds)

    @property
    def table_usd(self) -> float:
        """Planned USD over the cell's seeds, at the price-table rate."""
        per_run = sum(d * self.table_rate.get(m, 0.0) for m, d in self.by_model.items())
        return per_run * len(self.seeds)

    def model_decisions(self) -> dict[str, int]:
        """Planned live decisions over the cell's seeds, per model."""
        return {m: round(d * len(self.seeds)) for m, d in self.by_model.items()}

    def to_dict(self) -> dict:
        """The plan as a JSON-ready dict, totals included (``ma budget --json``)."""
        return {**asdict(self), "n_seeds": len(self.seeds), "decisions": self.decisions,
                "usd": round(self.usd, 6), "table_usd": round(self.table_usd, 6),
                "model_decisions": self.model_decisions()}


def equal_usd_cap(design: Design, cell: str, mock: bool = False) -> float | None:
    """The ``llm.usd_cap`` of an equal-USD cell (None for any other cell): ``freeze.json``'s
    ``equal_usd`` entry for its reference cell, read through ``freeze.frozen_equal_usd`` (the
    rehearsal's freeze for ``mock``), or, before the freeze, the reference cell's planned
    spend per run in this design (planning rate). Computed once per loaded design.

    Raises:
        FreezeError: the freeze exists but holds no cap for the reference cell.
    """
    c = design.cell(cell)
    if c.equal_usd_of is None:
        return None
    key = ("equal_usd_cap", cell, mock)
    if key not in design.memo:
        path = freeze_path(mock, design.results)
        design.memo[key] = (frozen_equal_usd(path, c.equal_usd_of) if path.exists()
                            else plan_cell(design, c.equal_usd_of).run_usd)
    return design.memo[key]


def run_config(design: Design, cell: str, mock: bool = False) -> Config:
    """The config a run of ``cell`` gets: the design's cell config, with an equal-USD cell's
    cap (:func:`equal_usd_cap`) passed in. Every step that runs, plans, hashes or checks a
    cell's config asks this function.

    Raises:
        ConfigError: no such cell, or it is unavailable.
    """
    return design.cell_config(cell, mock, equal_usd_cap(design, cell, mock))


def require_freeze(design: Design, cell: str, mock: bool = False) -> None:
    """An equal-USD cell runs only with its cap read from the freeze (never the planned
    stand-in): ConfigError naming the missing file otherwise."""
    c = design.cell(cell)
    path = freeze_path(mock, design.results)
    if c.equal_usd_of and not path.exists():
        raise ConfigError(
            f"{design.where(cell)}: its usd_cap is the pilot's measured spend per "
            f"{c.equal_usd_of} run, read from {path}, which does not exist: freeze first "
            f"(`.venv/bin/snakemake {'rehearse_freeze' if mock else 'freeze'}`)")


def decisions_per_agent(design: Design, cell: str) -> int:
    """Decisions each LLM agent of ``cell`` makes in one run: ⌊(ticks − burn_in) /
    decision_interval⌋ (27 on the protocol's base) unless the design's planning fixes it, capped
    at the cell's ``decision_cap``.
    """
    config = run_config(design, cell)
    return config_decisions_per_agent(config, design.planning.decisions_per_agent)


def config_decisions_per_agent(config: Config, per: int | None = None) -> int:
    """The planning convention: floor((ticks - burn_in) / decision_interval) unless ``per``
    is given, capped at the config's ``decision_cap``."""
    if not per:
        sim = config.simulation
        per = (sim.ticks - sim.burn_in) // sim.decision_interval
    cap = config.population.llm.decision_cap
    return min(per, cap) if cap else per


def live_decisions(config: Config, per_agent: int) -> dict[str, float]:
    """Planned live decisions of one run by model id: LLM slots x decisions per agent, split
    over the paid routes by their share and over a route's model ids evenly."""
    llm = config.population.llm
    n_llm = config.population.n_llm
    by_model: dict[str, float] = {}
    if n_llm > 0:
        for route in llm.paid_routes():
            ids = llm.model_ids(route)
            for model in ids:
                share = llm.provider_mix[route] / len(ids)
                by_model[model] = by_model.get(model, 0.0) + n_llm * per_agent * share
    return by_model


def capped(by_model: dict[str, float], rates: dict[str, float],
           usd_cap: float) -> dict[str, float]:
    """Decisions stop at a per-run ``usd_cap`` below the planned run cost: the run buys
    floor(cap / mean rate) decisions."""
    run_usd = sum(d * rates[m] for m, d in by_model.items())
    if not 0 < usd_cap < run_usd:
        return by_model
    mean_rate = run_usd / sum(by_model.values())
    kept = math.floor(usd_cap / mean_rate + 1e-9)
    scale = kept / sum(by_model.values())
    return {m: d * scale for m, d in by_model.items()}


def plan_config(config: Config, tokens_in: int = _TOKENS.tokens_in,
                tokens_out: int = _TOKENS.tokens_out) -> float:
    """Planned USD of one run of a bare config (``ma run``): its live decisions priced by the
    price table at the planned tokens per decision, stopped at its ``usd_cap``; 0.0 when it
    makes no paid call (also in replay, which serves every answer from the cache)."""
    if config.population.llm.replay:
        return 0.0
    by_model = live_decisions(config, config_decisions_per_agent(config))
    if not by_model:
        return 0.0
    # the run's table, checked against its routes: a row priced for another provider than
    # its route's is refused here, before the guards admit the run to the spend ledger
    table = run_prices(config.population.llm)
    rates = {m: table.planned_cost(m, tokens_in, tokens_out) for m in by_model}
    by_model = capped(by_model, rates, config.population.llm.usd_cap)
    return sum(d * rates[m] for m, d in by_model.items())


def worst_case_usd(config: Config) -> float:
    """The most one run of ``config`` can pay: what the spend ledger admits it at.

    The run's budget reserves each call's worst case before sending it and refuses a call
    that could take the priced spend past ``usd_cap`` (or past a route's own ``usd_cap``), so
    a run never pays more than its ``usd_cap``, or the sum of its paid routes' caps when every
    paid route has one and they are lower. Its planning estimate can be far below (a run
    billed at its worst case is), which is why no cap is checked against the plan alone.

    Args:
        config: the run's validated config.

    Returns:
        USD; 0.0 when the run makes no paid call (no live decision, or a replay); ``inf`` for
        a live run without a cap (refused before any call by ``LLMClient.check_settings``).
    """
    return _capped(config) if plan_config(config) > 0 else 0.0


def cell_worst_case_usd(design: Design, cell: str) -> float:
    """The most one run of a design's ``cell`` can pay (see :func:`worst_case_usd`); 0.0 for
    a cell that makes no paid call."""
    return _capped(run_config(design, cell)) if design.is_live(cell) else 0.0


def _capped(config: Config) -> float:
    llm = config.population.llm
    worst = llm.usd_cap if llm.usd_cap > 0 else math.inf
    route_caps = [llm.settings(r).usd_cap for r in llm.paid_routes()]
    if route_caps and all(c is not None for c in route_caps):
        worst = min(worst, sum(route_caps))
    return worst


def plan_cell(design: Design, cell: str, tokens_in: int = _TOKENS.tokens_in,
              tokens_out: int = _TOKENS.tokens_out,
              max_seeds: int | None = None) -> CellPlan:
    """Plan one cell (Run protocol §4 and §5.2).

    Args:
        design: the loaded design.
        cell: the cell's name.
        tokens_in: planned input tokens per decision (the price-table rate).
        tokens_out: planned output tokens per decision.
        max_seeds: plan only the first seeds of the cell.

    Returns:
        The :class:`CellPlan` (all zero for an unavailable cell).

    Raises:
        ConfigError: a live model without a planning price, or a bad cell config.
    """
    c = design.cell(cell)
    seeds = c.seeds[:max_seeds]
    if c.unavailable:
        return CellPlan(cell, c.tier, seeds, False, 0, 0, 0.0, 0.0, 0.0, unavailable=c.unavailable)
    config = run_config(design, cell)
    llm = config.population.llm
    per_agent = decisions_per_agent(design, cell)
    n_llm = config.population.n_llm
    live = design.is_live(cell)
    by_model = live_decisions(config, per_agent) if live else {}
    rates = design.planning.usd_per_decision
    for model in by_model:
        if model not in rates:
            raise ConfigError(f"{design.where(cell)}: live model {model!r} has no planning "
                              f"price (planning.usd_per_decision) in {design.path}")
    if live:
        by_model = capped(by_model, rates, llm.usd_cap)
    run_usd = sum(d * rates[m] for m, d in by_model.items())
    table_rate = {}
    if by_model:
        table = load_prices(design.prices_path)
        table_rate = {m: table.planned_cost(m, tokens_in, tokens_out) for m in by_model}
    return CellPlan(cell, c.tier, seeds, live, n_llm, per_agent, sum(by_model.values()),
                    run_usd, llm.usd_cap, by_model, table_rate)


def plan_design(design: Design, tokens_in: int = _TOKENS.tokens_in,
                tokens_out: int = _TOKENS.tokens_out,
                cells: list[str] | None = None, max_seeds: int | None = None) -> list[CellPlan]:
    """Plan every cell of a design (or ``cells``), in design order (see :func:`plan_cell`)."""
    return [plan_cell(design, c, tokens_in, tokens_out, max_seeds) for c in cells or design.cells]


def run_plans(design: Design, cells: list[str] | None = None,
              max_seeds: int | None = None) -> list[RunPlan]:
    """One :class:`RunPlan` per run of the available cells, none finished yet."""
    return [RunPlan(label(p.tier), p.cell, s, round(p.run_decisions), p.run_usd)
            for p in plan_design(design, cells=cells, max_seeds=max_seeds)
            if not p.unavailable for s in p.seeds]


def tier_totals(plans: list[CellPlan]) -> dict[str, dict[str, float]]:
    """Tier label -> planned decisions, USD at the planning rate and USD at the table rate."""
    out: dict[str, dict[str, float]] = {}
    for p in plans:
        t = out.setdefault(label(p.tier), {"decisions": 0, "usd": 0.0, "table_usd": 0.0})
        t["decisions"] += p.decisions
        t["usd"] += p.usd
        t["table_usd"] += p.table_usd
    return out


def check_budgets(design: Design) -> None:
    """Each tier's planned USD fits its budget; budgets plus reserves fit the cap."""
    b = design.budget
    if not b.tiers and b.cap_usd is None:
        return
    plans = [plan_cell(design, c) for c in design.cells]
    totals = tier_totals(plans)
    for tier, budget in b.tiers.items():
        planned = totals.get(tier, {}).get("usd", 0.0)
        if round(planned, 2) > budget + 1e-9:
            raise ConfigError(f"{design.path}: budget.tiers.{tier}: {budget:.2f} USD does not "
                              f"cover the {planned:.4f} USD planned for its cells "
                              f"({', '.join(design.tiers.get(tier, []))})")
    if b.cap_usd is not None:
        committed = sum(b.tiers.values()) + sum(b.reserved_usd.values())
        if not b.tiers:
            committed += sum(p.usd for p in plans)
        if committed > b.cap_usd + 1e-9:
            raise ConfigError(
                f"{design.path}: budget does not add up: tier budgets {sum(b.tiers.values()):.2f}"
                f" + reserved {sum(b.reserved_usd.values()):.2f}"
                + ("" if b.tiers else f" + planned {sum(p.usd for p in plans):.2f}")
                + f" USD exceed cap_usd {b.cap_usd:.2f}")


def check_prices(design: Design) -> None:
    """Every model a live cell calls has a row in the design's price table, priced for its
    route's provider (``PriceTable.check_routes``), and a planning price
    (``planning.usd_per_decision``)."""
    table = None
    for name, c in design.cells.items():
        if c.unavailable or not design.is_live(name):
            continue
        table = table or load_prices(design.prices_path)
        llm = run_config(design, name).population.llm
        for route in llm.paid_routes():
            for model in llm.model_ids(route):
                if model not in table.models:
                    raise ConfigError(f"{design.where(name)}: live model {model!r} (route "
                                      f"{route}) has no price in {design.prices_path}")
                if model not in design.planning.usd_per_decision:
                    raise ConfigError(f"{design.where(name)}: live model {model!r} has no "
                                      f"planning price (planning.usd_per_decision) in "
                                      f"{design.path}")
        table.check_routes(llm)


def check(design: Design) -> None:
    """What the planning step checks of a design before anything runs: live models priced
    (:func:`check_prices`), then each tier's planned USD within its budget and budgets plus
    reserves within the cap (:func:`check_budgets`)."""
    check_prices(design)
    check_budgets(design)


def load_checked(path: str | Path, results: Path | str = ROOT) -> Design:
    """A design as every command uses it: loaded and validated (``design.load_design``),
    then checked by the planning step (:func:`check`).

    Raises:
        ConfigError: what either finds wrong, naming the file and key.
        FreezeError: an equal-USD cell whose freeze holds no cap.
    """
    design = load_design(path, results)
    check(design)
    return design

"""Designs as data: a base config, design-level overrides, cells (overrides + seeds), tiers and
budgets, loaded from ``config/designs/<name>.yaml`` and validated in full before anything runs.

Loading a design parses and validates it, nothing more: what is computed from a design (its
planned decisions and USD, the budget checks, an equal-USD cell's cap) is the planning step's
(:mod:`market_agents.protocol.planning`), and the frozen cap comes from the freeze file
(:mod:`market_agents.protocol.freeze`). This module reads no result file.

Where a design's runs, caches and manifests live is :mod:`market_agents.layout`; a ``--mock``
rehearsal (every live route served by the mock with the same model ids) lives apart from the
live results there, so it can never be mistaken for, or overwrite, one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from market_agents.analysis.estimands import CONTROL
from market_agents.analysis.stats import DEFAULT_PRIMARY, PRIMARY_OUTCOMES, SIGMA_LEVEL, Contrast
from market_agents.config import MAX_SEED, MAX_SEEDS, Config, apply_overrides, validate
from market_agents.config_llm import PromptSets, check_prompt_sets
from market_agents.core import Strict, validation_message
from market_agents.errors import ConfigError
from market_agents.inputs import read_yaml
from market_agents.layout import ROOT, rehearsal_library, run_dir
from market_agents.protocol.comparisons import NAME, Comparison, TableSpec, declared
from market_agents.protocol.tiers import label

USD = Annotated[float, Field(ge=0)]
NO_CONTRAST = "none"  # a cell's ``against``: a control, no contrast of its own


class CellSpec(Strict):
    """A cell as written in a design file: name, tier, seeds (a list, a range string or the
    first ``n_seeds`` of the design's seed pool), dotted overrides and treatment labels, and the
    paper's comparison table it joins (``table``, ``compare_with``: design metadata, never part
    of its config).
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")
    tier: str | None = None
    seeds: list[int] | str | None = None
    n_seeds: int | None = Field(default=None, ge=1, le=MAX_SEEDS,
                                description="the first n of the seed pool")
    overrides: dict[str, Any] = Field(default_factory=dict)
    treatment: dict[str, str | float | int | bool] = Field(default_factory=dict)
    unavailable: str | None = Field(default=None, description="why the cell cannot run yet")
    equal_usd_of: str | None = Field(
        default=None, description="equal-USD fairness (§5.2 T5): llm.usd_cap is the measured "
        "mean spend per run of this pilot cell, read from freeze.json (before the freeze: the "
        "cell's planned spend per run in this design)")
    table: str | None = Field(default=None, pattern=NAME, description="the paper's "
                              "comparison table it is a row of (a name under the design's "
                              "tables:)")
    compare_with: str | None = Field(
        default=None, description="the cell it is compared with in its table, paired by seed "
        "(default share_0); its tier's Holm family pairs it with the cell `against` names")
    against: str | None = Field(
        default=None, pattern=NAME, description="the cell its pre-registered contrast "
        "subtracts in its tier's Holm family, paired by seed (default share_0): the cell it "
        "differs from by its treatment alone; 'none': a control with no contrast of its own")
    note: str | None = None


class InteractionSpec(Strict):
    """A pre-registered interaction contrast (e.g. the protocol's E5): signed sums of cells,
    each evaluated per seed; its Holm family is the tier of its first treated cell."""

    treated: dict[str, int] = Field(min_length=1, description="cell -> +1 or -1")
    control: dict[str, int] = Field(min_length=1, description="cell -> +1 or -1")


class PowerSpec(Strict):
    """How the freeze sizes its MDEs from the pilot's σ̂_d (§4, §5.1)."""

    sigma_level: float = Field(default=SIGMA_LEVEL, gt=0, lt=1, description="one-sided level "
                               "of the upper confidence bound of σ_d each MDE is computed from")
    exchangeable: dict[str, list[str]] = Field(
        default_factory=dict, description="outcome -> cells whose σ_d of that outcome the "
        "design declares equal: their pilot σ̂_d are pooled (more degrees of freedom)")


class Planning(Strict):
    """The protocol's planning convention: USD per decision by model (§4, §5.2) and, unless
    set, decisions per agent = floor((ticks - burn_in) / decision_interval) (= 27)."""

    usd_per_decision: dict[str, USD] = Field(default_factory=dict)
    decisions_per_agent: int | None = Field(default=None, ge=1)


class BudgetSpec(Strict):
    """A design's ``budget``: the project or pilot cap, USD per tier, and reserved USD."""

    cap_usd: float | None = Field(default=None, ge=0, description="project or pilot cap")
    tiers: dict[str, USD] = Field(default_factory=dict, description="USD per tier")
    reserved_usd: dict[str, USD] = Field(default_factory=dict, description="e.g. pilot")


class DesignSpec(Strict):
    """A design file as written (``config/designs/*.yaml``): base config, price table,
    design-level overrides, treatment, cells, planning, budget and the paper's comparison
    tables. :func:`load_design` turns it
    into a :class:`Design`.
    """

    name: str | None = None
    description: str = ""
    base: str = "../baseline.yaml"
    prices: str = "../prices.yaml"
    overrides: dict[str, Any] = Field(default_factory=dict)
    treatment: dict[str, str | float | int | bool] = Field(default_factory=dict)
    seeds: list[int] | str | None = None
    seed_pool: list[int] | str | None = None
    planning: Planning = Field(default_factory=Planning)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    primary_outcomes: list[str] | dict[str, list[str]] | None = Field(
        default=None, description="the outcomes of each tier's Holm family: one list for every "
        "tier, or tier -> list (key 'default' for the others); default volatility, mispricing")
    smallest_effect: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict, description="outcome -> the smallest effect of interest (its "
        "units): a cell whose MDE exceeds it is named at the freeze")
    prompt_sets: str | dict[str, Any] | None = Field(
        default=None, description="persona sets of the design's own: a YAML file beside the "
        "design (set -> persona -> text, as llm/prompt_sets.yaml) or the sets inline; a cell "
        "whose prompt_set names one carries that set in its config "
        "(population.llm.prompt_sets)")
    tables: dict[str, TableSpec] = Field(
        default_factory=dict, description="the paper's comparison tables, in the order it "
        "shows them: name -> title, caption, kind; a cell joins one with table: <name> "
        "(protocol/comparisons.py)")
    interactions: dict[str, InteractionSpec] = Field(
        default_factory=dict, description="label -> an interaction contrast counted once in "
        "its tier's Holm family (E5: (leverage_25 - share_25) - (leverage_0 - share_0))")
    power: PowerSpec = Field(default_factory=PowerSpec)
    cells: list[CellSpec]

    @model_validator(mode="after")
    def _has_cells(self) -> DesignSpec:
        if not self.cells:
            raise ValueError("cells: empty")
        declared = self.primary_outcomes
        lists = (declared if isinstance(declared, dict)
                 else {None: DEFAULT_PRIMARY if declared is None else declared})
        for key, names in lists.items():
            where = "primary_outcomes" + (f".{key}" if key else "")
            if not names:
                raise ValueError(f"{where}: empty (name at least one outcome)")
            unknown = [y for y in names if y not in PRIMARY_OUTCOMES]
            if unknown:
                raise ValueError(f"{where}: {unknown[0]!r} is not an outcome with a pilot "
                                 f"σ̂_d (one of {', '.join(PRIMARY_OUTCOMES)})")
        for y in [*self.smallest_effect, *self.power.exchangeable]:
            if y not in PRIMARY_OUTCOMES:
                key = "smallest_effect" if y in self.smallest_effect else "power.exchangeable"
                raise ValueError(f"{key}.{y}: not an outcome with a pilot σ̂_d "
                                 f"(one of {', '.join(PRIMARY_OUTCOMES)})")
        return self


def parse_seeds(value: list[int] | str, where: str) -> list[int]:
    """A list of ints, or a string such as ``"101-130"`` or ``"1-3,7"``: at most
    :data:`MAX_SEEDS` seeds, each in 0..MAX_SEED (a range is checked before it is expanded)."""
    seeds = list(value) if isinstance(value, list) else []
    for part in [] if isinstance(value, list) else str(value).split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ConfigError(f"{where}: seeds {value!r}: expected e.g. '1-3,7'") from None
        if not 0 <= first <= last <= MAX_SEED:
            raise ConfigError(f"{where}: seeds {part.strip()!r}: expected an upward range "
                              f"within 0..{MAX_SEED}")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise ConfigError(f"{where}: seeds {value!r}: more than {MAX_SEEDS:,} seeds")
        seeds += range(first, last + 1)
    if not seeds:
        raise ConfigError(f"{where}: empty seed list")
    if len(seeds) > MAX_SEEDS:
        raise ConfigError(f"{where}: {len(seeds):,} seeds, more than {MAX_SEEDS:,}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{where}: seed list {value!r} repeats a seed")
    if any(not 0 <= s <= MAX_SEED for s in seeds):
        raise ConfigError(f"{where}: seeds must be in 0..{MAX_SEED}")
    return seeds


@dataclass
class Cell:
    """A validated cell: its name, tier, seeds (in order of use), overrides and treatment, and
    why it cannot run (``unavailable``) when it cannot.
    """

    name: str
    tier: str | None
    seeds: list[int]
    overrides: dict[str, Any]
    treatment: dict[str, Any]
    unavailable: str | None = None
    equal_usd_of: str | None = None
    table: str | None = None  # the comparison table it is a row of
    compare_with: str | None = None  # as given: None is share_0 in its table
    against: str | None = None  # its contrast's other cell as given: None is share_0


@dataclass
class Design:
    """A loaded, validated design (:func:`load_design`): its cells, base config, overrides,
    planning settings and budget.
    """

    name: str
    path: Path
    cells: dict[str, Cell]
    base: dict[str, Any]
    overrides: dict[str, Any]
    planning: Planning
    budget: BudgetSpec
    prices_path: Path
    results: Path = ROOT  # the results root its runs (and the freeze its caps come from) live in
    primary_outcomes: list[str] | dict[str, list[str]] | None = None
    smallest_effect: dict[str, float] = field(default_factory=dict)
    sources: tuple[Path, ...] = ()  # the files its configs are built from: design, base, prices
    comparisons: tuple[Comparison, ...] = ()  # the paper's comparison tables it declares
    prompt_sets: dict[str, dict[str, str]] = field(default_factory=dict)  # its own persona sets
    interactions: dict[str, InteractionSpec] = field(default_factory=dict)
    power: PowerSpec = field(default_factory=PowerSpec)
    _configs: dict[tuple[str, bool, float | None], Config] = field(default_factory=dict,
                                                                   repr=False)
    # what later steps computed from the design, once per loaded design (the planning step's
    # equal-USD caps): a cache, not data
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def tiers(self) -> dict[str, list[str]]:
        """Tier label -> its cells, in design order (cells without a tier under the no-tier
        label)."""
        out: dict[str, list[str]] = {}
        for cell in self.cells.values():
            out.setdefault(label(cell.tier), []).append(cell.name)
        return out

    def primary(self, tier: str | None) -> tuple[str, ...]:
        """The primary outcomes of a tier's Holm family, as the design declares them
        (``primary_outcomes``; a tier it does not name takes its ``default`` entry), else
        :data:`~market_agents.analysis.stats.DEFAULT_PRIMARY`."""
        declared = self.primary_outcomes
        if isinstance(declared, dict):
            declared = declared.get(label(tier), declared.get("default"))
        return tuple(declared or DEFAULT_PRIMARY)

    @property
    def primary_by_tier(self) -> dict[str, tuple[str, ...]]:
        """Tier label -> its primary outcomes (:meth:`primary`), for every tier of the
        design."""
        return {t: self.primary(t) for t in self.tiers}

    @property
    def against(self) -> dict[str, str | None]:
        """Cell -> the cell its pre-registered contrast subtracts (None: a control, no contrast
        of its own); ``analysis.estimands.tier_contrasts`` reads it."""
        return {c.name: None if c.against == NO_CONTRAST else (c.against or CONTROL)
                for c in self.cells.values()}

    @property
    def interaction_contrasts(self) -> tuple[Contrast, ...]:
        """The declared interactions as contrasts (their family: the first treated cell's
        tier)."""
        return tuple(Contrast(name, label(self.cells[next(iter(i.treated))].tier),
                              dict(i.treated), dict(i.control))
                     for name, i in self.interactions.items())

    def cell(self, name: str) -> Cell:
        """The cell ``name``.

        Raises:
            ConfigError: the design has no such cell.
        """
        if name not in self.cells:
            raise ConfigError(f"{self.path}: no cell {name!r} (cells: {', '.join(self.cells)})")
        return self.cells[name]

    def where(self, cell: str) -> str:
        """``<design file>: cell '<cell>'``, the prefix of every message about a cell."""
        return f"{self.path}: cell {cell!r}"

    def cell_config(self, cell: str, mock: bool = False,
                    usd_cap: float | None = None) -> Config:
        """The validated config of a cell; ``mock`` serves every live route by the mock.

        Args:
            cell: the cell's name.
            mock: serve every live route by the mock (a rehearsal).
            usd_cap: an equal-USD cell's ``llm.usd_cap``, which the design does not hold (it
                is the pilot's measured spend, read from the freeze): given by the step that
                runs or plans the cell (``planning.run_config``); required for such a cell,
                refused for any other.

        Raises:
            ConfigError: no such cell, or it is unavailable.
        """
        c = self.cell(cell)
        if c.unavailable:
            raise ConfigError(f"{self.where(cell)} is unavailable: {c.unavailable}")
        if (usd_cap is None) != (c.equal_usd_of is None):
            raise ValueError(f"{self.where(cell)}: usd_cap is given for, and only for, an "
                             "equal-USD cell (planning.run_config gives it)")
        return self._config(c, mock, usd_cap)

    def _config(self, c: Cell, mock: bool, usd_cap: float | None) -> Config:
        key = (c.name, mock, usd_cap)
        if key not in self._configs:
            self._configs[key] = self._build(c, mock, usd_cap)
        return self._configs[key]

    def _build(self, c: Cell, mock: bool, usd_cap: float | None) -> Config:
        where = self.where(c.name)
        data = apply_overrides(self.base, self.overrides, str(self.path))
        data = apply_overrides(data, c.overrides, where)
        chosen = data.get("population", {}).get("llm", {}).get("prompt_set")
        if chosen in self.prompt_sets:  # the run's config carries the prompts it is given
            own = data["population"]["llm"].get("prompt_sets") or {}
            if own.get(chosen, self.prompt_sets[chosen]) != self.prompt_sets[chosen]:
                raise ConfigError(f"{where}: prompt set {chosen!r} is both the design's "
                                  "(prompt_sets) and the cell's (population.llm.prompt_sets)")
            data = apply_overrides(data, {"population.llm.prompt_sets": {
                **own, chosen: self.prompt_sets[chosen]}}, where)
        if c.equal_usd_of:
            ref = c.equal_usd_of
            if ref not in self.cells or self.cells[ref].equal_usd_of:
                raise ConfigError(f"{where}: equal_usd_of {ref!r} must name a cell of "
                                  "the design without equal_usd_of of its own")
            if usd_cap is not None:
                data = apply_overrides(data, {"population.llm.usd_cap": usd_cap}, where)
        data["treatment"] = {**(data.get("treatment") or {}), **c.treatment}
        config = validate(data, where)
        return mock_config(config) if mock else config

    def run_dir(self, cell: str, seed: int, mock: bool = False) -> Path:
        """The run directory of one of the design's runs under its results root."""
        return run_dir(self.name, cell, seed, mock, self.results)

    def is_live(self, cell: str) -> bool:
        """True when the cell would call a paid provider: LLM slots and a non-mock route (an
        equal-USD cell's cap does not change it)."""
        c = self.cell(cell)
        if c.unavailable:
            raise ConfigError(f"{self.where(cell)} is unavailable: {c.unavailable}")
        config = self._config(c, False, None)
        llm = config.population.llm
        return config.population.n_llm > 0 and bool(llm.paid_routes())

    def runs(self, cells: list[str] | None = None, max_seeds: int | None = None,
             include_unavailable: bool = False) -> list[tuple[str, int]]:
        """The (cell, seed) pairs to run, in design order.

        Args:
            cells: only these cells (default: every cell).
            max_seeds: only the first seeds of each cell (its seeds are used in order).
            include_unavailable: include cells that cannot run.

        Returns:
            ``[(cell, seed), ...]``.
        """
        names = cells or list(self.cells)
        out = []
        for name in names:
            c = self.cell(name)
            if c.unavailable and not include_unavailable:
                continue
            out += [(name, s) for s in c.seeds[:max_seeds]]
        return out


def mock_config(config: Config) -> Config:
    """Serve every live route by the mock: same routes, shares and model ids, so slots, prompts
    and the price table are exercised exactly as live; only the transport changes."""
    llm = config.population.llm
    providers = {r: s.model_dump(mode="json") for r, s in llm.providers.items()}
    for route in llm.served_routes():  # the frozen library makes no calls: it stays as it is
        providers.setdefault(route, {})["kind"] = "mock"
        providers[route].pop("free", None)  # the mock prices by the table (or 0 without a row)
    data = config.model_dump(mode="json")
    data["population"]["llm"]["providers"] = providers
    if llm.frozen_library:
        data["population"]["llm"]["frozen_library"] = rehearsal_library(llm.frozen_library)
    return validate(data, "mock rehearsal")


def load_design(path: str | Path, results: Path | str = ROOT) -> Design:
    """Load a design file and validate it in full before anything runs.

    Args:
        path: the design YAML (``config/designs/*.yaml``): a base config, design-level
            overrides, cells (dotted overrides + seeds, optionally a tier) and a budget.
        results: the results root its runs live in (and the freeze its equal-USD cells'
            caps are read from, by the planning step).

    Returns:
        The :class:`Design`: its cells in file order, each with its seeds and tier.

    Raises:
        ConfigError: a malformed file, an unknown override key, a duplicated cell, an empty
            seed list, a tier without a budget, an equal-USD cell whose reference is not a
            cell, a comparison table or ``compare_with`` that names nothing of the design
            (``protocol.comparisons.declared``); the message names the file and key.
            Budgets, prices and caps are checked by the planning step
            (``planning.load_checked``).

    Protocol:
        Run protocol §3 (Phase 5a exploratory, sigma), §4 (pilot) and §5.1-§5.2 (the
        confirmatory base, cells, tiers and budget).
    """
    path = Path(path)
    raw = read_yaml(path)
    try:
        spec = DesignSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {validation_message(exc, raw, DesignSpec)}") from None
    base_path = (path.parent / spec.base).resolve()
    sets, sets_from = own_prompt_sets(spec.prompt_sets, path)
    design = Design(
        name=spec.name or path.stem, path=path, cells={},
        base=read_yaml(base_path), overrides=spec.overrides, planning=spec.planning,
        budget=spec.budget, prices_path=(path.parent / spec.prices).resolve(),
        results=Path(results), primary_outcomes=spec.primary_outcomes,
        smallest_effect=dict(spec.smallest_effect),
        sources=(path, base_path, (path.parent / spec.prices).resolve(), *sets_from),
        prompt_sets=sets,
    )
    default_seeds = parse_seeds(spec.seeds, f"{path}: seeds") if spec.seeds else None
    pool = parse_seeds(spec.seed_pool, f"{path}: seed_pool") if spec.seed_pool else None
    for c in spec.cells:
        where = design.where(c.name)
        if c.name in design.cells:
            raise ConfigError(f"{where}: duplicated cell name")
        if c.seeds is not None:
            seeds = parse_seeds(c.seeds, where)
        elif c.n_seeds is not None:
            if pool is None:
                raise ConfigError(f"{where}: n_seeds needs a design-level seed_pool")
            if c.n_seeds > len(pool):
                raise ConfigError(f"{where}: n_seeds {c.n_seeds} exceeds the seed pool "
                                  f"({len(pool)} seeds)")
            seeds = pool[:c.n_seeds]
        elif default_seeds is not None:
            seeds = default_seeds
        else:
            raise ConfigError(f"{where}: empty seed list (give seeds, n_seeds or design seeds)")
        treatment = {"cell": c.name, **spec.treatment, **c.treatment}
        design.cells[c.name] = Cell(c.name, c.tier, seeds, c.overrides, treatment, c.unavailable,
                                    c.equal_usd_of, c.table, c.compare_with, c.against)
    design.interactions, design.power = spec.interactions, spec.power
    design.comparisons = declared(spec.tables, design.cells.values(), design.primary, str(path))
    check_design(design)
    return design


def own_prompt_sets(declared: str | dict[str, Any] | None,
                    path: Path) -> tuple[dict[str, dict[str, str]], tuple[Path, ...]]:
    """A design's own persona sets (its ``prompt_sets``: a file beside it, or inline), checked
    as a config's are (``config_llm.PromptSets``), and the file they were read from (if any).

    Raises:
        ConfigError: no such file, or a malformed set, naming the design and the key.
    """
    if declared is None:
        return {}, ()
    where, files = f"{path}: prompt_sets", ()
    try:
        if isinstance(declared, str):
            files = ((path.parent / declared).resolve(),)
            where += f" ({files[0]})"
            declared = read_yaml(files[0], "the design's prompt_sets file")
        sets = check_prompt_sets(TypeAdapter(PromptSets).validate_python(declared))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"{where}: {validation_message(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return sets, files


def check_design(design: Design) -> None:
    """Everything in the design itself that can be wrong before a run: every cell's config
    (and its rehearsal's), tier names, the primary outcomes' tiers."""
    tiers = design.budget.tiers
    if isinstance(design.primary_outcomes, dict):
        for key in design.primary_outcomes:
            if key != "default" and key not in design.tiers:
                raise ConfigError(f"{design.path}: primary_outcomes.{key}: not a tier of the "
                                  f"design ({', '.join(design.tiers)}, or default)")
    named = {f"power.exchangeable.{y}": cells for y, cells in design.power.exchangeable.items()}
    for name, i in design.interactions.items():
        named[f"interactions.{name}"] = [*i.treated, *i.control]
        if any(s not in (1, -1) for s in [*i.treated.values(), *i.control.values()]):
            raise ConfigError(f"{design.path}: interactions.{name}: each cell's sign is 1 or -1")
    for key, cells in named.items():
        unknown = [c for c in cells if c not in design.cells]
        if unknown:
            raise ConfigError(f"{design.path}: {key}: {unknown[0]!r} is not a cell of the "
                              f"design ({', '.join(design.cells)})")
    for c in design.cells.values():
        where = design.where(c.name)
        if c.against not in (None, NO_CONTRAST, *design.cells) or c.against == c.name:
            raise ConfigError(f"{where}: against {c.against!r}: name another cell of the "
                              f"design, or 'none' for a control ({', '.join(design.cells)})")
        if tiers and c.tier not in tiers:
            raise ConfigError(f"{where}: tier {c.tier!r} has no budget (tiers: {', '.join(tiers)})")
        if c.unavailable:
            continue
        design._config(c, False, None)  # an equal-USD cell's cap is not the design's
        design._config(c, True, None)

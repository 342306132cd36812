"""The simulation config: one pydantic tree, validated once, hashed for provenance.

A run is fully described by a YAML file (``config/baseline.yaml``) plus dotted overrides
(``--set exchange.halt_threshold=0.05``) and, inside a design, each cell's overrides.
Unknown keys and bad values raise :class:`ConfigError` naming the file and the key path.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from market_agents.config_llm import LLMConfig
from market_agents.core import Strict, canonical_json, validation_message
from market_agents.errors import ConfigError
from market_agents.inputs import parse_yaml, read_yaml
from market_agents.plugins import MECHANISMS, TRADERS

MAX_SEED = 2**32 - 1
MAX_SEEDS = 10_000  # seeds in one list (a design's cell, `ma validate`); the protocol uses 30
MAX_TICKS = 1_000_000  # every count of ticks (run length, intervals, lifetimes) stays below
MAX_TRADERS = 100_000
# The exchange keeps cash in integer ticks and shares as integers, and marks wealth in floats:
# totals up to 2**53 are exact in both (and far inside the tables' int64).
MAX_EXACT = 2**53
# How long one run may be, refused up front so that no config runs for days: trader decisions
# (makers every tick, the others every decision_interval; 25-100 us each with their order log)
# and trader-ticks (every account is looked at each tick). Both limits are a few minutes of CPU
# and a few GiB: the largest protocol cell takes about 30,000 decisions and 600,000 trader-ticks,
# the N = 10,000 benchmark 275,000 and 6,000,000; 100,000 traders x 600 ticks still fit.
MAX_DECISIONS = 5_000_000
MAX_TRADER_TICKS = 60_000_000
# The coarsest tick a market may have, as a share of the opening value v0. A cent on a one-dollar
# stock (1 %) is about the coarsest relative tick of a real exchange, and it equals the market
# makers' widest quoted spread (2 x their 0.5 % maximum half-spread,
# agents/traders/market_maker.py): with a coarser tick every quote and trade is one tick wide,
# and a tick of 1,000 on a price of 475 ran to the end with every trade at one tick and no bids
# (issue 25).
MAX_RELATIVE_TICK = 0.01


class SimulationConfig(Strict):
    """``simulation``: the run's length in ticks, the burn-in, how often traders decide, and
    how many recent prices they see.
    """

    ticks: int = Field(default=600, ge=10, le=MAX_TICKS)
    burn_in: int = Field(default=50, ge=0, le=MAX_TICKS)
    decision_interval: int = Field(default=20, ge=1, le=MAX_TICKS)
    history: int = Field(default=20, ge=2, le=MAX_TICKS, description="recent prices shown to "
                         "traders")

    @model_validator(mode="after")
    def _burn_in_fits(self) -> SimulationConfig:
        if self.burn_in >= self.ticks:
            raise ValueError(f"burn_in ({self.burn_in}) must be below ticks ({self.ticks})")
        return self


class FundamentalsConfig(Strict):
    """True value V (never shown to traders) and the public value V^pub.

    V moves by Gaussian steps (``sigma`` per tick, price units) and by hidden jumps: in each
    news period of ``news_interval`` ticks a jump hits V with probability ``jump_prob`` at a
    random tick of the period (Student-t with ``jump_df`` degrees of freedom scaled to standard
    deviation ``jump_sigma``: rare large news). V^pub is V as of the last news release, so it
    lags V by up to one period. Two assets share a common factor with ``factor_loading``.
    A scheduled ``fundamental_jump`` shock of ``size`` (price units; 10 ≈ 2.1 % of v0 = 475)
    is announced at once.
    """

    n_assets: Literal[1, 2] = 1
    v0: float = Field(default=475.0, gt=0)
    sigma: float = Field(default=0.35, ge=0)
    jump_prob: float = Field(default=0.2, ge=0, le=1)
    jump_sigma: float = Field(default=4.0, ge=0)
    jump_df: float | None = Field(
        default=3.0, gt=2, description="Student-t degrees of freedom of jumps; null: Gaussian"
    )
    news_interval: int = Field(default=10, ge=1, le=MAX_TICKS)
    factor_loading: list[float] | None = None

    @model_validator(mode="after")
    def _loadings(self) -> FundamentalsConfig:
        if self.factor_loading is not None:
            if len(self.factor_loading) != self.n_assets:
                raise ValueError(
                    f"factor_loading has {len(self.factor_loading)} entries; "
                    f"n_assets is {self.n_assets}"
                )
            if any(not -1.0 <= b <= 1.0 for b in self.factor_loading):
                raise ValueError("factor_loading entries must lie in [-1, 1]")
        return self


class ExchangeConfig(Strict):
    """``exchange``: the matching mechanism (continuous book or call auction), tick size,
    order lifetime, circuit breaker, position limits and leverage rules, and the switch of
    every mechanism that brings its own (``exchange.<key>: value``, e.g.
    ``exchange.transaction_tax: 0.001``; :mod:`market_agents.market.mechanism`), validated by
    that mechanism's ``settings`` and dumped (so hashed) only when set.
    """

    mechanism: Literal["book", "call_auction"] = "book"
    auction_interval: int = Field(default=5, ge=1, le=MAX_TICKS,
                                  description="ticks between call auctions")
    tick_size: float = Field(default=0.01, gt=0)
    order_ttl: int = Field(default=20, ge=1, le=MAX_TICKS,
                           description="ticks a resting order lives")
    halt_threshold: float | None = Field(default=None, gt=0, lt=1)
    halt_window: int = Field(default=10, ge=1, le=MAX_TICKS)
    halt_ticks: int = Field(default=20, ge=1, le=MAX_TICKS)
    position_limit: int | None = Field(default=None, ge=1, le=MAX_EXACT)
    max_leverage: float = Field(default=4.0, ge=1.0, le=100.0, description="for leveraged "
                                "traders (positions are integers: a larger multiple of equity "
                                "would overflow them)")
    maintenance_margin: float = Field(default=0.22, gt=0, lt=1)
    _switches: dict[str, Any] = PrivateAttr(default_factory=dict)
    # the switches of the registered mechanisms in the JSON schema (`ma schema`) as well
    model_config = ConfigDict(json_schema_extra=lambda schema: schema["properties"].update(
        {m.key: TypeAdapter(m.settings | None).json_schema() for m in MECHANISMS if m.key}))

    @model_validator(mode="wrap")
    @classmethod
    def _mechanism_switches(cls, data: Any, handler: Any) -> ExchangeConfig:
        """Take the registered mechanisms' switches out before the fields are validated (an
        unknown key is still refused, with the nearest known one), each validated by its
        mechanism's ``settings``; null leaves a mechanism off."""
        if not isinstance(data, dict):  # a model already validated keeps its switches
            return handler(data)
        switches: dict[str, Any] = {}
        owners = {m.key: m for m in MECHANISMS if m.key}
        data = dict(data)
        for key in [k for k in data if k in owners]:
            value = data.pop(key)
            if value is None:
                continue
            try:
                switches[key] = TypeAdapter(owners[key].settings).validate_python(value)
            except ValidationError as exc:
                raise ValueError(f"{key}: {exc.errors()[0]['msg']} (got {value!r})") from None
        model = handler(data)
        model._switches = switches
        return model

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        return {**handler(self), **self._switches}

    def switch(self, key: str) -> Any:
        """The value of mechanism switch ``key`` (None: not set)."""
        return self._switches.get(key)


Share = Annotated[float, Field(ge=0, le=1)]


def draw_order(names: Iterable[str]) -> list[str]:
    """Trader type ``names`` in the order the population draw takes them: by their types'
    ``draw_rank``, then by name (the built-ins first, in the order of every run so far)."""
    return sorted(names, key=lambda name: (TRADERS.get(name, "population.mix").draw_rank, name))


def default_mix() -> dict[str, float]:
    """``population.mix`` when a config leaves it out: each registered type's
    ``default_share`` (types without one are outside the default mix)."""
    return {t.name: t.default_share for t in _mix_types() if t.default_share is not None}


def _mix_types() -> list[type]:
    """The registered trader types that take a share of ``population.mix``, in draw order."""
    by_name = {t.name: t for t in TRADERS if t.in_mix}
    return [by_name[name] for name in draw_order(by_name)]


def _mix_type(name: str, pinned: bool = False) -> None:
    """Refuse a name that is no trader type taking a share of the mix (``pinned``: a value of
    ``slot_types``), in one line that lists those that do."""
    mix_names = sorted(t.name for t in _mix_types())
    if name not in TRADERS:
        raise ValueError(TRADERS.unknown(name, "", among=mix_names))
    if name not in mix_names:
        raise ValueError(f"trader type {name!r} takes no share of population.mix"
                         f"{', so no slot is pinned to it' if pinned else ''} (its slots are "
                         f"chosen otherwise; the mix's types: {', '.join(mix_names)})")


class PopulationConfig(Strict):
    """``population``: the number of traders and market makers, the mix of trader types, the
    share of LLM traders and their settings (``population.llm``), and the initial endowments.
    """

    n_traders: int = Field(default=100, ge=2, le=MAX_TRADERS)
    n_market_makers: int = Field(default=5, ge=1)
    llm_share: float = Field(default=0.0, ge=0, le=1)
    mix: dict[str, Share] = Field(
        default_factory=default_mix,
        description="share of the non-market-maker slots of each trader type (a registered "
        "name: agents/traders/ or a plug-in's entry point); a built-in type left out keeps its "
        "default share; the shares sum to 1")
    initial_cash: float = Field(default=20_000.0, ge=0)
    initial_shares: int = Field(default=20, ge=0)
    mm_initial_cash: float = Field(default=100_000.0, ge=0)
    mm_initial_shares: int = Field(default=290, ge=0)
    leveraged_cash: float = Field(
        default=2_500.0, ge=0,
        description="cash a leveraged trader's margin account opens with (no shares): "
        "leverage, not a larger endowment, sizes its positions")
    slot_types: dict[int, str] = Field(
        default_factory=dict, description="pin the trader type (a name population.mix may "
        "take) of given slots"
    )
    llm: LLMConfig = Field(default_factory=LLMConfig)

    @field_validator("mix")
    @classmethod
    def _mix_sums_to_one(cls, mix: dict[str, float]) -> dict[str, float]:
        for name in mix:
            _mix_type(name)
        full = {**default_mix(), **mix}
        total = sum(full.values())
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"shares must sum to 1, got {total:.6g}")
        return {name: full[name] for name in draw_order(full)}

    @field_validator("slot_types")
    @classmethod
    def _slot_types_take_mix_types(cls, slot_types: dict[int, str]) -> dict[int, str]:
        for kind in slot_types.values():
            _mix_type(kind, pinned=True)
        return slot_types

    @model_validator(mode="after")
    def _makers_fit(self) -> PopulationConfig:
        if self.n_market_makers >= self.n_traders:
            raise ValueError(
                f"n_market_makers ({self.n_market_makers}) must be below n_traders "
                f"({self.n_traders})"
            )
        for slot in self.slot_types:
            if not self.n_market_makers <= slot < self.n_traders:
                raise ValueError(
                    f"slot_types: slot {slot} is not a trader slot "
                    f"({self.n_market_makers}..{self.n_traders - 1})"
                )
        return self

    @property
    def n_llm(self) -> int:
        """LLM slots: the share of all traders, capped at the non-market-maker slots."""
        return min(round(self.llm_share * self.n_traders), self.n_traders - self.n_market_makers)


class Shock(Strict):
    """A scheduled shock: a ``fundamental_jump`` of ``size`` at ``time`` (announced at once),
    or a ``placebo`` (logged, moves nothing).
    """

    time: int = Field(ge=0)
    kind: Literal["fundamental_jump", "placebo"]
    size: float = 0.0
    asset: int | None = Field(default=None, ge=0, description="None: every asset")


class Config(Strict):
    """The simulation config of one run: every key has a default (``config/baseline.yaml``
    spells them out); unknown keys are refused. Hashed for provenance (:func:`config_hash`).
    """

    simulation: SimulationConfig = Field(default_factory=SimulationConfig)
    fundamentals: FundamentalsConfig = Field(default_factory=FundamentalsConfig)
    exchange: ExchangeConfig = Field(default_factory=ExchangeConfig)
    population: PopulationConfig = Field(default_factory=PopulationConfig)
    # a lambda, not `list`: pydantic reads a factory's signature, and inspect reads `list`'s
    # from its text, compiling tokenize's patterns (3 ms of every `ma` process)
    shocks: list[Shock] = Field(default_factory=lambda: [])
    treatment: dict[str, str | float | int | bool] = Field(
        default_factory=dict, description="labels carried into outcomes (no effect on dynamics)"
    )

    @model_validator(mode="after")
    def _cross_checks(self) -> Config:
        for i, s in enumerate(self.shocks):
            if s.time >= self.simulation.ticks:
                raise ValueError(f"shocks.{i}.time {s.time} is past the last tick")
            if s.asset is not None and s.asset >= self.fundamentals.n_assets:
                raise ValueError(f"shocks.{i}.asset {s.asset} does not exist")
        for name, share in self.population.mix.items():
            if share > 0:
                TRADERS.get(name, "population.mix").check(self)
        self._fits_the_engine()
        self._is_a_market()
        return self

    def _is_a_market(self) -> None:
        """Refuse market parameters that are each valid but make no market together: a tick
        coarser than ``MAX_RELATIVE_TICK`` of the opening value, and a circuit breaker that one
        tick's move would trip."""
        tick, v0 = self.exchange.tick_size, self.fundamentals.v0
        if tick > MAX_RELATIVE_TICK * v0:
            raise ValueError(f"exchange.tick_size {tick:g} against fundamentals.v0 {v0:g}: a tick "
                             f"must be at most {MAX_RELATIVE_TICK:.0%} of the opening value "
                             f"({MAX_RELATIVE_TICK * v0:g}); a coarser one makes every quote and "
                             "trade one tick wide")
        halt = self.exchange.halt_threshold
        if halt is not None and tick / v0 >= halt:
            raise ValueError(f"exchange.halt_threshold {halt:g} and exchange.tick_size {tick:g}: "
                             f"one tick is {tick / v0:.3%} of fundamentals.v0 {v0:g}, so every "
                             "one-tick move would halt trading; lower the tick or raise the "
                             "threshold")

    def _fits_the_engine(self) -> None:
        """Refuse up front what the engine cannot hold or finish: prices and cash beyond exact
        integer ticks, share totals beyond exact integers, and runs of astronomical length."""
        pop, tick = self.population, self.exchange.tick_size
        traders = pop.n_traders - pop.n_market_makers
        prices = {"fundamentals.v0": self.fundamentals.v0, "fundamentals.sigma":
                  self.fundamentals.sigma, "fundamentals.jump_sigma": self.fundamentals.jump_sigma,
                  **{f"shocks.{i}.size": abs(s.size) for i, s in enumerate(self.shocks)}}
        for key, value in prices.items():
            if value / tick > MAX_EXACT:
                raise ValueError(f"{key} {value:g} is {value / tick:.3g} ticks of "
                                 f"exchange.tick_size {tick:g}; prices must stay below "
                                 f"{MAX_EXACT:.3g} ticks")
        cash = (traders * max(pop.initial_cash, pop.leveraged_cash)
                + pop.n_market_makers * pop.mm_initial_cash) / tick
        if cash > MAX_EXACT:
            raise ValueError(f"population.initial_cash, leveraged_cash and mm_initial_cash: the "
                             f"traders' cash totals {cash:.3g} ticks of exchange.tick_size "
                             f"{tick:g}; it must stay below {MAX_EXACT:.3g}")
        shares = traders * pop.initial_shares + pop.n_market_makers * pop.mm_initial_shares
        if shares > MAX_EXACT:
            raise ValueError(f"population.initial_shares and mm_initial_shares: the traders' "
                             f"shares total {shares:.3g}; it must stay below {MAX_EXACT:.3g}")
        sim = self.simulation
        decisions = (pop.n_market_makers * sim.ticks
                     + traders * -(-(sim.ticks - sim.burn_in) // sim.decision_interval))
        trader_ticks = pop.n_traders * sim.ticks
        if decisions > MAX_DECISIONS or trader_ticks > MAX_TRADER_TICKS:
            raise ValueError(
                f"simulation: too long a run: {decisions:,} trader decisions "
                f"({pop.n_market_makers} makers x {sim.ticks} ticks + {traders} traders every "
                f"{sim.decision_interval} ticks; at most {MAX_DECISIONS:,}) and "
                f"{trader_ticks:,} trader-ticks (at most {MAX_TRADER_TICKS:,}); shorten the "
                "run, use fewer traders or a longer decision_interval")


# --- loading, overrides, hashing -------------------------------------------------------------


def parse_set(item: str) -> tuple[str, Any]:
    """``a.b=VALUE`` with VALUE parsed as YAML (so ``{openai: 1.0}`` is a mapping)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
    if "" in key.split("."):
        raise ConfigError(f"--set {item!r}: key {key!r} has an empty part")
    return key, parse_yaml(raw, f"--set {item!r}") if raw.strip() else None


def parse_sets(items: list[str]) -> dict[str, Any]:
    """Every ``--set``; a key given twice is refused (which one should win?)."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = parse_set(item)
        if key in out:
            raise ConfigError(f"--set {key}: given twice")
        out[key] = value
    return out


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], where: str) -> dict[str, Any]:
    """Return a copy of ``data`` with dotted keys set. Unknown top-level paths are left for
    pydantic to reject, so the error names the same key path either way."""
    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        node = out
        parts = dotted.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"{where}: {dotted}: {part!r} is not a mapping")
            node = child
        node[parts[-1]] = copy.deepcopy(value)
    return out


def validate(data: dict[str, Any], where: str) -> Config:
    """Validate a config mapping.

    Args:
        data: the mapping, as read from YAML.
        where: the file (or argument) it came from, for the message.

    Returns:
        The :class:`Config`.

    Raises:
        ConfigError: one line naming ``where`` and the key path.
    """
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {validation_message(exc, data, Config)}") from None


def load_config(path: str | Path, sets: list[str] | None = None) -> Config:
    """Read a config YAML and apply ``--set`` overrides (docs/inputs.md).

    Args:
        path: the config file, e.g. ``config/baseline.yaml``.
        sets: ``KEY=VALUE`` overrides, VALUE in YAML (e.g. ``exchange.halt_threshold=0.05``).

    Returns:
        The validated :class:`Config`.

    Raises:
        ConfigError: a malformed or non-UTF-8 file, a duplicated or unknown key, a value out
            of range; the message names the file and key path.
    """
    data = read_yaml(path)
    overrides = parse_sets(sets or [])
    return validate(apply_overrides(data, overrides, str(path)), str(path))


def config_hash(config: Config) -> str:
    """The SHA-256 (hex) of the config's canonical JSON: manifest.json's ``config_hash``
    (Run protocol §6).
    """
    return hashlib.sha256(canonical_json(config.model_dump(mode="json")).encode()).hexdigest()


def dump_yaml(config: Config) -> str:
    """The resolved config as YAML (a run directory's config.yaml)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def check_seed(seed: int) -> int:
    """Return ``seed`` when it is in 0..2**32 - 1.

    Raises:
        ConfigError: the seed is out of range.
    """
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"--seed {seed}: must be in 0..{MAX_SEED}")
    return seed

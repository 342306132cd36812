"""Prices are data (``config/prices.yaml``), validated once; cost is a pure function of a price
row and a call's usage. An unknown model is an error that names it: nothing runs unpriced.

A table that means money refuses what it does not understand, naming the file and the row:
a rate above :data:`MAX_USD_PER_MTOK` (so every worst case is a finite number), a row priced
at 0 for a provider that bills (a route that costs nothing is declared free instead), and,
for a run, a row whose ``provider`` is not the route's (:meth:`PriceTable.check_routes`).

Declared beside the config, below the LLM layer: a classical run records the table it ran
under (its manifest's ``price_assumptions``) without loading that layer, and planning prices a
design the same way. ``market_agents.llm.pricing`` names the same objects."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from market_agents import provider_kinds
from market_agents.core import Strict, sha256_file, validation_message
from market_agents.errors import ConfigError
from market_agents.inputs import read_yaml

if TYPE_CHECKING:
    from market_agents.config_llm import LLMConfig
    from market_agents.llm.types import Usage

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "config" / "prices.yaml"
PRICES_ENV = "MARKET_AGENTS_PRICES"
# The most a row may charge per 1M tokens, for each of input, cached input and output. The
# dearest list prices are a few hundred USD per 1M output tokens; a rate far above is a typo
# (a price per token written per 1M), and an unbounded one makes a call's worst case infinite
# (1e308 halted every call and left a manifest that JSON cannot hold).
MAX_USD_PER_MTOK = 10_000.0
# Cache writes cost input x this multiplier (Anthropic: 1.25 for 5 minutes, 2 for an hour).
MAX_CACHE_WRITE_MULTIPLIER = 10.0
_RATES = ("input", "cached_input", "output")


class ModelPrice(Strict):
    """One model's row of ``config/prices.yaml``: USD per ``per_tokens`` input, cached-input
    and output tokens, the cache-write multiplier, with the date and source of the price.
    ``provider`` is a price-table key a provider's registration declares
    (``provider_kinds.ProviderKind.price_key``).
    """

    provider: str
    input: float = Field(ge=0, description="USD per `per_tokens` uncached input tokens")
    cached_input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_multiplier: float = Field(default=1.0, ge=0, le=MAX_CACHE_WRITE_MULTIPLIER)
    date: str
    source: str = Field(min_length=3)

    @field_validator("provider")
    @classmethod
    def _declared(cls, v: str) -> str:
        if v not in provider_kinds.price_keys():
            raise ValueError(f"unknown provider {v!r}: a row names the price-table key of a "
                             f"declared provider kind ({', '.join(provider_kinds.price_keys())})")
        return v

    @field_validator("date")
    @classmethod
    def _iso(cls, v: str) -> str:
        dt.date.fromisoformat(v)
        return v


class PriceTable(Strict):
    """``config/prices.yaml``: USD per ``per_tokens`` tokens for every model that may be called."""

    currency: Literal["USD"]
    per_tokens: int = Field(gt=0)
    models: dict[str, ModelPrice]
    path: str = ""

    @model_validator(mode="after")
    def _bounded_and_billed(self) -> PriceTable:
        # rows are checked here, where per_tokens is known; a table built in code from these
        # rows (with_free's zero rows for declared-free routes) is a copy, not re-checked
        billed = set(provider_kinds.price_keys()) - {
            k.price_key for k in provider_kinds.declared() if k.free}
        for model, row in self.models.items():
            for key in _RATES:
                per_mtok = getattr(row, key) / self.per_tokens * 1_000_000  # no overflow
                if not per_mtok <= MAX_USD_PER_MTOK:
                    raise ValueError(
                        f"models.{model}.{key}: {getattr(row, key):g} USD per "
                        f"{self.per_tokens:,} tokens is {per_mtok:g} USD per 1M tokens, above "
                        f"the most a row may charge ({MAX_USD_PER_MTOK:,.0f} USD per 1M "
                        "tokens); a price per token written as a price per 1M tokens?")
            if row.provider in billed and row.input == 0 and row.output == 0:
                raise ValueError(
                    f"models.{model}: priced 0 USD (input and output) for provider "
                    f"{row.provider!r}, which bills its calls, so no USD cap would ever act; "
                    "give the row its price, or, for a server you run, declare its route free "
                    f"(population.llm.providers.<route>.free: true; "
                    f"{', '.join(k.name for k in provider_kinds.declared() if k.may_be_free)} "
                    "routes only)")
        return self

    def price(self, model: str) -> ModelPrice:
        """The model's row.

        Raises:
            ConfigError: the model has no row (a model without a price is never called).
        """
        row = self.models.get(model)
        if row is None:
            raise ConfigError(
                f"model {model!r} has no price in {self.path or 'prices.yaml'}; add a row "
                f"(known: {', '.join(sorted(self.models))})"
            )
        return row

    def check_routes(self, llm: LLMConfig) -> PriceTable:
        """Check that each model of each paid route (``LLMConfig.paid_routes``) is priced for
        the route's provider: a row's ``provider`` is the price-table key of the route's kind
        (``provider_kinds.ProviderKind.price_key``), or any key for a ``gateway`` kind
        (``openai_compatible``: a proxy may serve OpenAI's models at OpenAI's prices). The
        mock and the frozen library (free kinds) may take any row: a rehearsal prices the mock
        at the live model's row; a route declared free is priced by the zero rows
        :meth:`with_free` gives it.

        Args:
            llm: the run's ``population.llm`` config.

        Returns:
            This table.

        Raises:
            ConfigError: a model without a row, or ``<file>: models.<model>.provider: ...``
                naming the row and the route it contradicts.
        """
        for route in llm.paid_routes():  # a route declared free is priced by its zero rows
            kind = provider_kinds.get(llm.kind(route))
            for model in llm.model_ids(route):
                row = self.price(model)
                if row.provider != kind.price_key and not kind.gateway:
                    raise ConfigError(
                        f"{self.path or 'prices.yaml'}: models.{model}.provider: the row is "
                        f"priced for provider {row.provider!r}, but route {route!r} "
                        f"(population.llm.provider_mix.{route}) is kind {kind.name!r}, whose "
                        f"rows name provider {kind.price_key!r}; add a row priced for "
                        f"{kind.price_key!r} (under its own model id) or fix the route")
        return self

    def cost(self, model: str, usage: Usage) -> float:
        """The USD an answer of ``model`` with ``usage`` is billed (cached input and cache writes
        at their rates).
        """
        return usage_cost(self.price(model), usage, self.per_tokens)

    def planned_cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        """The USD of one call of ``model`` with ``tokens_in`` input and ``tokens_out`` output
        tokens, uncached (``ma budget``'s price-table rate).
        """
        # usage_cost of a call with no cache reads or writes (their terms are zero)
        row = self.price(model)
        return (max(0, tokens_in) * row.input + tokens_out * row.output) / self.per_tokens

    def worst_cost(self, model: str, tokens_in: int, tokens_out: int) -> float:
        """The most a call of ``model`` with at most these tokens can be billed: every input
        token at the full (or cache-write, if dearer) rate, cached-input discounts ignored."""
        row = self.price(model)
        rate_in = row.input * max(1.0, row.cache_write_multiplier)
        return (tokens_in * rate_in + tokens_out * row.output) / self.per_tokens

    def assumptions(self, models: list[str]) -> dict[str, dict]:
        """Rows for the manifest: what each used model was priced at, and why."""
        return {m: self.price(m).model_dump() | {"per_tokens": self.per_tokens}
                for m in sorted(set(models))}

    def with_free(self, free: Mapping[str, str],
                  keys: Mapping[str, str] | None = None) -> PriceTable:
        """This table with a zero row for each model of a route declared free.

        Args:
            free: model id -> the route that declared it free (``LLMConfig.free_models``).
            keys: route -> the price-table key of its kind (``run_prices`` passes them);
                a route left out takes the key of the first kind that may be declared free.

        Returns:
            A copy whose rows for those models cost 0 USD and name the declaration as their
            source (so the manifest's ``price_assumptions`` says why they cost nothing); the
            table itself when ``free`` is empty.
        """
        if not free:
            return self
        date = max((r.date for r in self.models.values()), default="1970-01-01")
        keys = keys or {}
        default = next(k.price_key for k in provider_kinds.declared() if k.may_be_free)
        rows = {m: ModelPrice(provider=keys.get(route, default), input=0.0, cached_input=0.0,
                              output=0.0, date=date,
                              source=f"declared free: population.llm.providers.{route}.free "
                                     "(0 USD, not from the price table)")
                for m, route in free.items()}
        return self.model_copy(update={"models": self.models | rows})

    def provenance(self) -> dict[str, str]:
        """The table itself, for a run that priced no model (a classical run's manifest): its
        newest row's date, its source file (relative to the project when inside it) and the
        file's sha256."""
        path = Path(self.path)
        try:
            source = str(path.relative_to(DEFAULT_PATH.parents[1]))
        except ValueError:
            source = path.name
        return {"date": max((r.date for r in self.models.values()), default=""),
                "source": source,
                "sha256": sha256_file(path) if path.is_file() else ""}


def usage_cost(row: ModelPrice, usage: Usage, per_tokens: int = 1_000_000) -> float:
    """``usage.input`` counts every input token (normalized by the providers), so the uncached
    part is what remains after cache reads and writes."""
    uncached = max(0, usage.input - usage.cached_input - usage.cache_write)
    usd = (
        uncached * row.input
        + usage.cached_input * row.cached_input
        + usage.cache_write * row.input * row.cache_write_multiplier
        + usage.output * row.output
    )
    return usd / per_tokens


def load_prices(path: str | Path | None = None) -> PriceTable:
    """Load the price table: ``path``, else ``$MARKET_AGENTS_PRICES``, else
    ``config/prices.yaml``.

    Raises:
        ConfigError: a missing or malformed table.
    """
    path = Path(path or os.environ.get(PRICES_ENV) or DEFAULT_PATH)
    return _load(str(path.resolve()))


@lru_cache(maxsize=8)
def _load(path: str) -> PriceTable:
    data = read_yaml(path, "price table")
    try:
        return PriceTable.model_validate({**data, "path": path})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {validation_message(exc, data)}") from None


def run_prices(llm: LLMConfig) -> PriceTable:
    """The price table a run of ``llm`` is priced from: :func:`load_prices`, with a zero row for
    each model of a route declared free (``providers.<route>.free``), checked against the
    run's routes (:meth:`PriceTable.check_routes`).

    Args:
        llm: the run's ``population.llm`` config.

    Returns:
        The table (``PriceTable.with_free``).

    Raises:
        ConfigError: a missing or malformed table, a model of a priced route without a row,
            or a row priced for another provider than its route's.
    """
    free = llm.free_models()
    keys = {route: provider_kinds.get(llm.kind(route)).price_key for route in set(free.values())}
    table = load_prices().with_free(free, {r: k for r, k in keys.items() if k is not None})
    return table.check_routes(llm)


def cost(model: str, usage: Usage, table: PriceTable | None = None) -> float:
    """USD for one call of ``model`` with ``usage`` (default table: config/prices.yaml)."""
    return (table or load_prices()).cost(model, usage)


def planned_cost(model: str, tokens_in: int, tokens_out: int,
                 table: PriceTable | None = None) -> float:
    """USD for one planned call with no cache reads (``ma budget`` uses this)."""
    return (table or load_prices()).planned_cost(model, tokens_in, tokens_out)

"""The `population.llm` block of the simulation config: the LLM traders' settings, declared
below both the config and the LLM layer, so that loading a config (a classical one included)
loads nothing of the LLM layer. ``market_agents.llm.config`` names the same classes.

Protocol keys: provider_mix, models, prompt_set (and a config's own prompt_sets), memory,
channel, usd_cap, decision_cap, frozen_library, max_failure_rate, prompt_version; ``replay`` is
a serving switch (not hashed).
``provider_mix`` keys are *routes*: a provider kind (``openai``, ``anthropic``,
``openai_compatible``, ``mock``) or an alias declared under ``providers`` with a ``kind``
(``openai_mini: {kind: openai}``). ``models`` maps each route to one model id or a list of ids;
with a list the route's slots are dealt to the ids in equal shares (a permutation from the slot
stream; ``agents.llm_trader.split_models``). Either way the protocol's ``mix_25`` (half nano,
half mini) runs live:

    provider_mix: {openai: 1.0}
    models: {openai: [gpt-5.4-nano, gpt-5.4-mini]}
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, StringConstraints, ValidationInfo, field_validator, model_validator

from market_agents import provider_kinds
from market_agents.core import Strict
from market_agents.provider_kinds import DEFAULT_MODE as DEFAULT_MODE
from market_agents.provider_kinds import FREE_KINDS as FREE_KINDS
from market_agents.provider_kinds import KIND_MODES as KIND_MODES
from market_agents.provider_kinds import KINDS as KINDS
from market_agents.provider_kinds import MODES as MODES

# The provider kinds, the free ones, the structured-output modes (how the answer schema is sent:
# llm/structured.py), the default mode and the modes each kind can send are declared once per
# provider in provider_kinds.py (the registry) and named here: KINDS, FREE_KINDS, MODES,
# DEFAULT_MODE, KIND_MODES (views read from the registry at each use).

# The prompt revisions a config may name and the default: the names of llm/prompting.py's
# REVISIONS and its PROMPT_VERSION (that file is frozen, hashed into the freeze, so it keeps its
# own copy; tests/test_config.py checks the two agree).
PROMPT_VERSION = "v1"
PROMPT_REVISIONS = ("v1", "v2")

# The package's persona sets are data: llm/prompt_sets.yaml, which llm/prompting.py reads (and the
# freeze hashes beside it). A config names one (prompt_set) or adds its own (prompt_sets); their
# names are read here, without loading the LLM layer.
PROMPT_SETS_FILE = Path(__file__).parent / "llm" / "prompt_sets.yaml"
# A set's and a persona's name go into the prompt id, market-<version>-<set>-<persona>.
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_]+$")]
PromptSets = dict[Name, dict[Name, Annotated[str, StringConstraints(min_length=1)]]]


@functools.cache
def package_prompt_sets() -> tuple[str, ...]:
    """The names of the package's persona sets (:data:`PROMPT_SETS_FILE`), in file order."""
    # libyaml's parser where PyYAML has it: its pure one took 5 ms of every config load
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    text = PROMPT_SETS_FILE.read_text(encoding="utf-8")
    return tuple(str(k) for k in yaml.load(text, Loader=loader))  # a safe loader


def check_prompt_sets(sets: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """A config's or a design's own persona sets: each has a persona, and none takes the name
    of a package set (one name, one prompt). Raises ValueError naming the set."""
    for name, personas in sets.items():
        if name in package_prompt_sets():
            raise ValueError(f"{name!r} is a set of llm/prompt_sets.yaml ("
                             f"{', '.join(package_prompt_sets())}): give yours another name")
        if not personas:
            raise ValueError(f"{name!r} has no persona")
    return sets


class ProviderSettings(Strict):
    """Per-route settings. Keys are never stored here: ``api_key_env`` names the variable."""

    kind: str | None = Field(default=None, description="the route's provider kind: one "
                             "a provider class serves (provider_kinds.py)")
    base_url: str | None = None  # an http(s) URL with a host (provider_kinds.url_problem)
    api_key_env: str | None = None
    usd_cap: float | None = Field(default=None, ge=0, description="per-provider cap per run")
    max_concurrency: int = Field(default=8, ge=1, le=256)
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    max_retries: int = Field(default=4, ge=0, le=20)
    backoff_s: float = Field(default=0.5, ge=0, le=30, description="first retry wait; doubles, "
                             "≤ 30 s")
    structured_output: Literal["json_schema", "json_object_schema", "grammar", "none"] | None = \
        Field(default=None, description="how the answer schema is sent (docs/local_models.md); "
              "default json_schema; json_object_schema for llama-cpp-python's server")
    # Left out of the dump (and so of the config hash) unless set: configs written before the
    # key existed keep their hash.
    free: bool = Field(
        default=False, exclude_if=lambda v: not v, description="openai_compatible only: the "
        "route's models cost nothing (a local server); priced at an explicit 0 USD without "
        "a row in the price table, and recorded so in the manifest's price_assumptions "
        "(docs/local_models.md)")
    latency_s: float = Field(default=0.0, ge=0, le=10, description="mock only: simulated "
                             "latency per call (real providers answer in seconds)")
    invalid_rate: float = Field(default=0.05, ge=0, le=1, description="mock only")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        # refused here, when the config loads, not after a run of retries against it
        problem = None if v is None else provider_kinds.url_problem(v)
        if problem:
            raise ValueError(f"{problem}; a base URL is an http(s) URL with a host, e.g. "
                             "http://127.0.0.1:8000/v1")
        return v

    @field_validator("kind")
    @classmethod
    def _declared(cls, v: str | None) -> str | None:
        served = provider_kinds.served()  # the kinds a provider class serves
        if v is not None and v not in served:
            raise ValueError(f"unknown provider kind {v!r}; known: {served}")
        return v


class TokenProfile(Strict):
    """The protocol's planned tokens per decision (760 in, 230 out): what planning (``ma
    budget``, the gate) prices and what the mock's usage looks like. Not a run's budget: the
    run's cap reserves each call's worst case (``LLMClient.worst_case``)."""

    tokens_in: int = Field(default=760, ge=0)
    tokens_out: int = Field(default=230, ge=0)


class LLMConfig(Strict):
    """``population.llm``: which providers (routes) and models the LLM traders use and in what
    shares, the prompt set and revision, memory and channel, caps (``usd_cap`` per run,
    ``decision_cap`` per agent, per-route caps in ``providers``), the failure tolerance, replay
    and the frozen library (docs/llm.md).
    """

    provider_mix: dict[str, float] = Field(default_factory=lambda: {"mock": 1.0})
    models: dict[str, str | list[str]] = Field(default_factory=lambda: {"mock": "mock-trader"})
    # Left out of the dump (and so of the config hash) unless set: configs written before the
    # key existed keep their hash.
    prompt_sets: PromptSets = Field(
        default_factory=dict, exclude_if=lambda v: not v, description="persona sets of this "
        "config beside the package's (llm/prompt_sets.yaml): set -> persona -> the line that "
        "ends its system prompt; a design's prompt_sets put here the set a cell names, so the "
        "run's config carries its prompts")
    prompt_set: str = Field(default="single", description="the persona set: one of "
                            "llm/prompt_sets.yaml or of prompt_sets")
    prompt_version: str = Field(
        default=PROMPT_VERSION, description="prompt revision (llm/prompting.py REVISIONS); v2 "
        "is the protocol's revision after a failed pilot (§4)")
    memory: int = Field(default=0, ge=0, le=50)
    channel: bool = False
    usd_cap: float = Field(default=0.0, ge=0.0,
                           description="per run, on priced cost; 0: no cap (refused for live "
                           "providers)")
    decision_cap: int | None = Field(default=None, ge=1)
    frozen_library: str | None = None
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)
    max_concurrency: int = Field(default=16, ge=1, le=1024)
    max_output_tokens: int = Field(default=1024, ge=16)
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = "low"
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_failure_rate: float = Field(
        default=0.10, ge=0, le=1, description="share of a run's LLM decisions whose call failed "
        "after its retries above which the run stops and is marked failed (the pilot's "
        "criterion)")
    replay: bool = Field(
        default=False, exclude=True, description="serve every answer from the response cache; "
        "a miss stops the run, no key is needed and no provider client is built. A serving "
        "switch, not part of the experiment: left out of config.yaml and the config hash")

    @field_validator("prompt_sets")
    @classmethod
    def _own_sets(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        return check_prompt_sets(v)

    @field_validator("prompt_set")
    @classmethod
    def _known_set(cls, v: str, info: ValidationInfo) -> str:
        known = [*package_prompt_sets(), *(info.data.get("prompt_sets") or {})]
        if v not in known:
            raise ValueError(f"unknown prompt set {v!r}; known: {', '.join(known)}")
        return v

    @field_validator("prompt_version")
    @classmethod
    def _revision(cls, v: str) -> str:
        if v not in PROMPT_REVISIONS:
            raise ValueError(f"unknown prompt revision {v!r}; known: {sorted(PROMPT_REVISIONS)}")
        return v

    @model_validator(mode="after")
    def _routes(self) -> LLMConfig:
        if not self.provider_mix:
            raise ValueError("provider_mix is empty")
        for route, share in self.provider_mix.items():
            if share < 0:
                raise ValueError(f"provider_mix.{route}: share {share} is negative")
            self.kind(route)
            model = self.models.get(route)
            if not model:
                raise ValueError(f"models.{route}: no model id for provider_mix route {route!r}")
        total = sum(self.provider_mix.values())
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"provider_mix shares must sum to 1, got {total:.6g}")
        for route in self.providers:
            if route not in self.provider_mix:
                self.kind(route)
            mode = self.settings(route).structured_output
            modes = KIND_MODES[self.kind(route)]
            if mode is not None and mode not in modes:
                raise ValueError(f"providers.{route}.structured_output: {mode!r} is not sent by "
                                 f"kind {self.kind(route)!r}; use one of {list(modes)}")
        for route, settings in self.providers.items():
            if settings.free and not provider_kinds.get(self.kind(route)).may_be_free:
                allowed = [k.name for k in provider_kinds.declared() if k.may_be_free]
                raise ValueError(f"providers.{route}.free: only an {' or '.join(allowed)} "
                                 f"route (a server you run) can be declared free; {route!r} "
                                 f"is kind {self.kind(route)!r}, priced from the price table")
        free = self.free_models()
        for route in self.routes():
            if not self.settings(route).free:
                for model in self.model_ids(route):
                    if model in free:
                        raise ValueError(
                            f"models.{route}: {model!r} is also a model of the free route "
                            f"{free[model]!r}; one model id has one price (give the local "
                            "server's model another id)")
        library = [r for r in self.routes() if self.kind(r) == "library"]
        if library and not self.frozen_library:
            raise ValueError(f"provider_mix.{library[0]}: the library provider needs "
                             "frozen_library (a .npz built by `ma library`)")
        if self.frozen_library and library != self.routes():
            raise ValueError("frozen_library replays every LLM slot from the library: set "
                             "provider_mix to {library: 1.0}")
        return self

    def kind(self, route: str) -> str:
        """The provider kind of ``route``: its ``providers.<route>.kind``, else the route's own
        name when it is a kind.

        Raises:
            ValueError: an unknown route without a declared kind.
        """
        settings = self.providers.get(route)
        if settings is not None and settings.kind is not None:
            return settings.kind
        if route in KINDS:
            return route
        raise ValueError(
            f"provider {route!r} is unknown: use one of {list(KINDS)} or declare "
            f"providers.{route}.kind"
        )

    def served_routes(self) -> list[str]:
        """Routes whose answers come from a server (not the mock, not the frozen library):
        what a rehearsal replaces by the mock."""
        return [r for r in self.routes() if self.kind(r) not in FREE_KINDS]

    def paid_routes(self) -> list[str]:
        """Routes that call a paid provider: served routes not declared free
        (``providers.<route>.free``, a server you run): what the budget, the planning, the
        freeze and the guards concern."""
        return [r for r in self.served_routes() if not self.settings(r).free]

    def paid_in_flight(self) -> int:
        """The most paid calls a run has in flight at once: ``max_concurrency`` over all
        routes, and each paid route's own ``max_concurrency`` (0 when no route is paid). What
        a killed run may have been billed for without recording it (``ma spend settle``)."""
        routes = self.paid_routes()
        if not routes:
            return 0
        return min(self.max_concurrency, sum(self.settings(r).max_concurrency for r in routes))

    def free_models(self) -> dict[str, str]:
        """Model ids of the routes declared free (``providers.<route>.free``), each with its
        route: they are priced at 0 USD (``PriceTable.with_free``)."""
        return {model: route for route in self.routes() if self.settings(route).free
                for model in self.model_ids(route)}

    def settings(self, route: str) -> ProviderSettings:
        """The route's provider settings: what it declares, over its kind's declared defaults
        (``ProviderKind.defaults``), over the field defaults."""
        own = self.providers.get(route)
        try:
            defaults = provider_kinds.get(self.kind(route)).defaults
        except (KeyError, ValueError):
            defaults = {}
        if not defaults:
            return own or ProviderSettings()
        given = own.model_dump(exclude_unset=True) if own is not None else {}
        return ProviderSettings.model_validate({**defaults, **given})

    def structured_output(self, route: str) -> str:
        """The route's structured-output mode (one of :data:`MODES`)."""
        return self.settings(route).structured_output or DEFAULT_MODE

    def model_ids(self, route: str) -> list[str]:
        """The route's model ids (one, or several drawn per slot)."""
        ids = self.models[route]
        return [ids] if isinstance(ids, str) else list(ids)

    def routes(self) -> list[str]:
        """Routes with a positive share, in a fixed order (the order of ``provider_mix``)."""
        return [r for r, s in self.provider_mix.items() if s > 0]

"""The provider registry: one registration per provider kind, read by every place that needs a
provider fact (issue 26).

A provider is one file and one registration: the class in ``llm/providers/<file>.py`` (its
wire format, and the schema keywords it rejects, ``rejected``) and a :func:`register` call
below that names the class by its import path and declares the rest: the kind, the
structured-output modes it can send, its default settings, its price-table key, its key and
base-URL variables. Every other place asks this module:

- the config (``config_llm``): the kind names a route may use (``KINDS``), the free kinds
  (``FREE_KINDS``), the modes of each kind (``KIND_MODES``), which kinds may be declared free,
  and each kind's default settings (``LLMConfig.settings``);
- the LLM layer: ``llm/providers/registry.py`` builds a route's provider from the class path
  (imported only then: a mock-only run never loads ``openai`` or ``anthropic``), its key and
  base URL from the declared variables; ``llm/structured.py`` the modes;
- the price table (``prices.py``): the ``provider`` of every row is a declared price-table key,
  a route's models are priced by rows of its kind's key (any row for a ``gateway`` kind), and
  a route declared free is priced under its kind's key;
- Bazaar: ``ma bazaar eval --provider``'s choices and the ``bazaar_eval`` rule's wildcard.

This module sits at the bottom, importing nothing from the package, so that loading a config
(a classical run's included) loads nothing of the LLM layer. tests/llm/test_provider_registry.py
checks that a kind registered here is found everywhere and that the classes agree.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# Structured-output modes (how the answer schema is sent: llm/structured.py) and the default.
# A mode is implemented once in structured.py; a kind declares which of them it can send.
MODES = ("json_schema", "json_object_schema", "grammar", "none")
DEFAULT_MODE = "json_schema"
# The schemes a provider's base URL may have: the SDKs speak HTTP. Any other value used to end,
# after every retry, in a failure-rate stop classed `reset` that did not name the URL.
URL_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class ProviderKind:
    """One provider kind's declaration.

    Attributes:
        name: the kind, as ``providers.<route>.kind`` and a route's name spell it.
        provider: ``"package.module:Class"``, the :class:`~market_agents.llm.providers.base.
            Provider` that serves the kind, imported only when a route of the kind is built;
            ``None`` for a kind answered without a provider (the frozen library).
        modes: the structured-output modes the kind can send (a subset of :data:`MODES`).
        price_key: the ``provider`` a row of ``config/prices.yaml`` names for this kind's
            models (``None``: the kind has no rows of its own).
        key_env: the environment variable holding the API key (``None``: no key is needed).
        base_url_env: the environment variable a base URL is read from when the route sets
            none (``None``: the SDK's default).
        needs_base_url: a route of the kind must have a base URL (a server you run).
        free: answers without a paid call: no key, no budget, never live.
        may_be_free: a route of the kind may be declared free (``providers.<route>.free``).
        gateway: a route of the kind may serve any provider's models (a wire format that
            gateways and proxies speak: LiteLLM in front of OpenAI, OpenRouter), so a row of
            any provider may price them; otherwise only rows of ``price_key`` do
            (``PriceTable.check_routes``).
        defaults: ``ProviderSettings`` fields a route of the kind takes unless it sets them.
        summary: a few words for help texts.
    """

    name: str
    provider: str | None
    modes: tuple[str, ...] = MODES
    price_key: str | None = None
    key_env: str | None = None
    base_url_env: str | None = None
    needs_base_url: bool = False
    free: bool = False
    may_be_free: bool = False
    gateway: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict)
    summary: str = ""

    def __post_init__(self) -> None:
        unknown = [m for m in self.modes if m not in MODES]
        if not self.name.isidentifier() or unknown or not self.modes:
            raise ValueError(f"provider kind {self.name!r}: a kind is an identifier with at "
                             f"least one of the modes {list(MODES)} (unknown: {unknown})")
        if self.provider is not None and ":" not in self.provider:
            raise ValueError(f"provider kind {self.name!r}: provider must be "
                             f"'package.module:Class', got {self.provider!r}")
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))


_REGISTRY: dict[str, ProviderKind] = {}


def register(kind: ProviderKind) -> ProviderKind:
    """Declare a provider kind (once per name).

    Raises:
        ValueError: the name is declared already.
    """
    if kind.name in _REGISTRY:
        raise ValueError(f"provider kind {kind.name!r} is declared already")
    _REGISTRY[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a declared kind (tests that declare one of their own)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> ProviderKind:
    """The declaration of kind ``name``.

    Raises:
        KeyError: an undeclared kind (the message lists the declared ones).
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown provider kind {name!r}; known: {names()}") from None


def declared() -> tuple[ProviderKind, ...]:
    """Every declared kind, in registration order."""
    return tuple(_REGISTRY.values())


def names() -> list[str]:
    """The declared kind names, in registration order."""
    return list(_REGISTRY)


def served() -> list[str]:
    """Kinds a provider class serves (every kind but the frozen library): what ``ma bazaar
    eval --provider`` may name."""
    return [k.name for k in _REGISTRY.values() if k.provider is not None]


def price_keys() -> list[str]:
    """The ``provider`` values a price-table row may name."""
    return sorted({k.price_key for k in _REGISTRY.values() if k.price_key is not None})


def base_url_envs() -> list[str]:
    """The environment variables a base URL is read from (``base_url_env`` of the declared
    kinds), sorted: what ``ma`` checks when it starts (``inputs.check_environment``)."""
    return sorted({k.base_url_env for k in _REGISTRY.values() if k.base_url_env})


def url_problem(url: str) -> str | None:
    """What keeps ``url`` from being a provider's base URL, or None when it is one.

    The one rule for every base URL: a route's ``providers.<route>.base_url``, the kinds'
    variables (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``), ``ma bazaar eval --base-url``.
    A base URL is an ``http://`` or ``https://`` URL with a host (and, if it names one, a port
    in 1..65535), without blanks or control characters.

    Args:
        url: the text given.

    Returns:
        None, or a few words saying what is wrong (never the URL itself: it may hold a
        password before an ``@``).
    """
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises for a port that is not a number in 0..65535
    except ValueError:  # its message may quote part of the URL
        return "not a URL (a malformed host or port)"
    if parts.scheme.lower() not in URL_SCHEMES:
        scheme = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        return f"not an http(s) URL ({scheme})"
    if not parts.hostname:
        return "an http(s) URL without a host"
    if port == 0:
        return "port 0 is not a port"
    if any(c.isspace() or not c.isprintable() for c in url):  # urlsplit drops some of them
        return "holds blanks or control characters"
    return None


class _Names(Sequence[str]):
    """A tuple-like view of kind names, read from the registry at each use (so a kind
    registered later is found through names imported earlier)."""

    def __init__(self, only_free: bool = False):
        self._only_free = only_free

    def _items(self) -> tuple[str, ...]:
        return tuple(k.name for k in _REGISTRY.values() if k.free or not self._only_free)

    def __getitem__(self, i):  # type: ignore[override]
        return self._items()[i]

    def __len__(self) -> int:
        return len(self._items())

    def __contains__(self, name: object) -> bool:
        return name in self._items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._items())


class _Modes(Mapping[str, tuple[str, ...]]):
    """A dict-like view kind -> modes, read from the registry at each use."""

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return _REGISTRY[name].modes

    def __iter__(self) -> Iterator[str]:
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self))


KINDS: Sequence[str] = _Names()  # every declared kind
FREE_KINDS: Sequence[str] = _Names(only_free=True)  # answer without a paid call
KIND_MODES: Mapping[str, tuple[str, ...]] = _Modes()  # the modes each kind can send


# The project's providers: one registration each (the class lives in llm/providers/).
register(ProviderKind(
    name="mock", provider="market_agents.llm.providers.mock:MockProvider", modes=MODES,
    price_key="mock", free=True,
    summary="the free mock (a trading rule; answers any mode the same way)"))
register(ProviderKind(
    name="openai", provider="market_agents.llm.providers.openai_responses:OpenAIProvider",
    modes=("json_schema", "none"), price_key="openai", key_env="OPENAI_API_KEY",
    base_url_env="OPENAI_BASE_URL", summary="OpenAI's Responses API"))
register(ProviderKind(
    name="anthropic",
    provider="market_agents.llm.providers.anthropic_messages:AnthropicProvider",
    modes=("json_schema", "none"), price_key="anthropic", key_env="ANTHROPIC_API_KEY",
    base_url_env="ANTHROPIC_BASE_URL", summary="Anthropic's Messages API"))
register(ProviderKind(
    name="openai_compatible",
    provider="market_agents.llm.providers.openai_compatible:OpenAICompatibleProvider",
    modes=MODES, price_key="openai_compatible", base_url_env="OPENAI_BASE_URL",
    needs_base_url=True, may_be_free=True, gateway=True,
    summary="a server speaking OpenAI chat completions (vLLM, Ollama, llama.cpp)"))
register(ProviderKind(
    name="library", provider=None, modes=MODES, free=True,
    summary="replays answers from a frozen library (population.llm.frozen_library)"))

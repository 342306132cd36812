"""Provider kinds → providers, as declared in :mod:`market_agents.provider_kinds` (one
registration per provider: its class's import path, its key and base-URL variables, whether it
needs a base URL). A provider's class is imported only when a route of its kind is built, so
mock-only runs never load ``openai`` or ``anthropic``."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping

from dotenv import find_dotenv, load_dotenv

from market_agents import provider_kinds
from market_agents.errors import ConfigError
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers.base import Provider


class _EnvView(Mapping[str, str]):
    """kind -> one declared environment variable (``key_env`` or ``base_url_env``), read from
    the registry at each use."""

    def __init__(self, attr: str):
        self._attr = attr

    def _items(self) -> dict[str, str]:
        return {k.name: getattr(k, self._attr) for k in provider_kinds.declared()
                if getattr(k, self._attr) is not None}

    def __getitem__(self, kind: str) -> str:
        return self._items()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


KEY_ENV: Mapping[str, str] = _EnvView("key_env")  # e.g. openai -> OPENAI_API_KEY
BASE_URL_ENV: Mapping[str, str] = _EnvView("base_url_env")


def provider_class(kind: str) -> type[Provider]:
    """The class that serves ``kind`` (imported now), as its registration names it.

    Raises:
        ConfigError: an undeclared kind, or one no provider class serves (the library).
    """
    try:
        path = provider_kinds.get(kind).provider
    except KeyError as exc:
        raise ConfigError(exc.args[0]) from None
    if path is None:
        raise ConfigError(f"provider kind {kind!r} is answered without a provider class")
    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if cls.kind != kind:
        raise ConfigError(f"provider kind {kind!r}: {path} declares kind {cls.kind!r}")
    return cls


def load_env() -> None:
    """Read ``.env`` from the working directory (never overriding the environment)."""
    load_dotenv(find_dotenv(usecwd=True), override=False)


def api_key(kind: str, route: str, settings: ProviderSettings,
            env: Mapping[str, str] | None = None) -> str | None:
    """The key for a route, or a ConfigError naming the variable (never its value)."""
    env = os.environ if env is None else env
    var = settings.api_key_env or KEY_ENV.get(kind)
    if var is None:  # a kind without a key variable: a server you run accepts anything
        return "not-needed"
    key = env.get(var, "").strip()
    if not key:
        raise ConfigError(
            f"population.llm.provider_mix.{route}: {var} is not set; put it in .env "
            f"(or the environment) before starting a run with provider {kind!r}"
        )
    return key


def base_url(kind: str, settings: ProviderSettings, env: Mapping[str, str] | None = None):
    """The route's base URL: ``providers.<route>.base_url``, else the kind's environment
    variable (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``), else the SDK's default (None).
    """
    env = os.environ if env is None else env
    return settings.base_url or env.get(BASE_URL_ENV.get(kind, ""), None) or None


def _factory(kind: str) -> Callable[..., Provider]:
    def build(route, settings, key, url):
        return provider_class(kind).build(route, settings, key, url)

    return build


class _Factories(Mapping[str, Callable[..., Provider]]):
    """kind -> ``factory(route, settings, key, url)`` for every kind a provider class serves,
    read from the registry at each use."""

    def __getitem__(self, kind: str) -> Callable[..., Provider]:
        if kind not in provider_kinds.served():
            raise KeyError(kind)
        return _factory(kind)

    def __iter__(self) -> Iterator[str]:
        return iter(provider_kinds.served())

    def __len__(self) -> int:
        return len(provider_kinds.served())


FACTORIES: Mapping[str, Callable[..., Provider]] = _Factories()


def make_provider(kind: str, route: str, settings: ProviderSettings,
                  env: Mapping[str, str] | None = None) -> Provider:
    """Build the provider of one route.

    Args:
        kind: the provider kind (one declared in ``provider_kinds``).
        route: the route's name in ``provider_mix``.
        settings: the route's provider settings.
        env: where the key is read (default: the environment).

    Returns:
        The provider.

    Raises:
        ConfigError: an unknown kind, a missing key, or a route of a kind that needs a base
            URL (``openai_compatible``) without one.
    """
    if kind not in FACTORIES:
        raise ConfigError(f"provider {route!r}: unknown kind {kind!r}; known: {sorted(FACTORIES)}")
    spec = provider_kinds.get(kind)
    key = None if spec.free else api_key(kind, route, settings, env)
    url = base_url(kind, settings, env)
    if url is None and spec.needs_base_url:
        raise ConfigError(
            f"population.llm.providers.{route}.base_url: {kind} needs a base_url "
            "(e.g. http://127.0.0.1:8000/v1)"
        )
    return FACTORIES[kind](route, settings, key, url)

"""Provider kinds → factories. SDKs are imported only when a provider of that kind is built,
so mock-only runs never load ``openai`` or ``anthropic``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from market_agents.errors import ConfigError
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers.base import Provider

KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL",
                "openai_compatible": "OPENAI_BASE_URL"}


def load_env() -> None:
    """Read ``.env`` from the working directory (never overriding the environment)."""
    from dotenv import find_dotenv, load_dotenv

    load_dotenv(find_dotenv(usecwd=True), override=False)


def api_key(kind: str, route: str, settings: ProviderSettings,
            env: Mapping[str, str] | None = None) -> str | None:
    """The key for a route, or a ConfigError naming the variable (never its value)."""
    env = os.environ if env is None else env
    var = settings.api_key_env or KEY_ENV.get(kind)
    if var is None:  # openai_compatible without a key: local servers accept anything
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


def _mock(route, settings, key, url):
    from market_agents.llm.providers.mock import MockProvider

    return MockProvider(route, settings)


def _openai(route, settings, key, url):
    from market_agents.llm.providers.openai_responses import OpenAIProvider

    return OpenAIProvider(route, settings, key, url)


def _anthropic(route, settings, key, url):
    from market_agents.llm.providers.anthropic_messages import AnthropicProvider

    return AnthropicProvider(route, settings, key, url)


def _compatible(route, settings, key, url):
    from market_agents.llm.providers.openai_compatible import OpenAICompatibleProvider

    if url is None:
        raise ConfigError(
            f"population.llm.providers.{route}.base_url: openai_compatible needs a base_url "
            "(e.g. http://127.0.0.1:8000/v1)"
        )
    return OpenAICompatibleProvider(route, settings, key, url)


FACTORIES: dict[str, Callable[..., Provider]] = {
    "mock": _mock,
    "openai": _openai,
    "anthropic": _anthropic,
    "openai_compatible": _compatible,
}


def make_provider(kind: str, route: str, settings: ProviderSettings,
                  env: Mapping[str, str] | None = None) -> Provider:
    """Build the provider of one route.

    Args:
        kind: the provider kind (mock, openai, anthropic, openai_compatible).
        route: the route's name in ``provider_mix``.
        settings: the route's provider settings.
        env: where the key is read (default: the environment).

    Returns:
        The provider.

    Raises:
        ConfigError: an unknown kind, a missing key, or an ``openai_compatible`` route
            without a ``base_url``.
    """
    if kind not in FACTORIES:
        raise ConfigError(f"provider {route!r}: unknown kind {kind!r}; known: {sorted(FACTORIES)}")
    key = None if kind == "mock" else api_key(kind, route, settings, env)
    return FACTORIES[kind](route, settings, key, base_url(kind, settings, env))

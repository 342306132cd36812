"""What one LLM call can end in, apart from the client that makes it (``llm/client.py``): the
errors that stop a run (a fatal provider error, no connection, a replay without the answer),
the retry policy of a transient failure, the provider that stands in for every route of a
replay, and the rules that judge a stored answer (its usage missing, the error class of an
answer the parse refused, the parsed copy kept for the library, validity).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from market_agents.errors import MarketAgentsError
from market_agents.llm.config import FREE_KINDS
from market_agents.llm.providers.base import Provider
from market_agents.llm.types import LLMRequest, LLMResponse

Parse = Callable[[str], Any]


class ProviderFatal(MarketAgentsError):
    """A provider error every further call would repeat (quota exhausted, invalid request,
    authentication or permission refused, unknown model): the run stops and nothing is
    recorded for the request."""


class ProviderAuthError(ProviderFatal):
    """A provider rejected the key (HTTP 401/403)."""


class ProviderUnavailable(MarketAgentsError):
    """No connection to a provider even after the retries: an outage is not data, so the run
    stops and nothing is recorded (timeouts, 429, 5xx and dropped connections that outlast
    the retries are data: they are recorded and the agent holds)."""


class ReplayMiss(MarketAgentsError):
    """A replay needed an answer the cache does not hold (a replay never calls a provider)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of a transient provider error, with exponential backoff (seconds)."""

    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt`` (0-based): the server's ``Retry-After``
        when it gave one, else ``base_delay_s * 2**attempt``; never more than ``max_delay_s``."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay_s)
        return min(self.base_delay_s * 2**attempt, self.max_delay_s)


class ReplayOnly(Provider):
    """Stands in for a provider in replay mode: no SDK client, no key; never called."""

    def __init__(self, route: str, kind: str):
        super().__init__(route)
        self.kind = kind
        self.live = kind not in FREE_KINDS

    async def complete(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover
        """Never called: a replay serves every answer from the cache."""
        raise AssertionError("a replay never calls a provider")


def usage_missing(resp: LLMResponse) -> bool:
    """Whether an answer's usage cannot be its bill: no input tokens (every request has a
    prompt), or no output tokens beside a non-empty text; a provider that sends no usage
    object reports zeros."""
    return resp.usage.input <= 0 or (resp.usage.output <= 0 and bool(resp.text))


def classify_parse_error(exc: Exception) -> str:
    """The ``error_class`` of an answer the parse refused: the parse's own class when it names
    one (an order the exchange cannot take), else schema, invalid_json or invalid."""
    if isinstance(getattr(exc, "error_class", None), str):
        return exc.error_class
    if isinstance(exc, ValidationError):
        return "schema"
    if isinstance(exc, json.JSONDecodeError):
        return "invalid_json"
    return "invalid"


def parsed_json(text: str, parse: Parse) -> Any:
    """The parsed answer as stored in the library (None when invalid). Reads re-parse the
    text, which stays the record; this copy saves library builders a parse."""
    try:
        obj = parse(text)
    except (ValueError, ValidationError):
        return None
    return obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj


def is_valid_entry(entry: dict) -> bool:
    """A stored answer is valid when it parsed at arrival (with the run's parse: the engine
    can act on it) and is not a refusal: the rule ``LLMClient._result`` applies."""
    return (entry.get("status") == "answered" and entry.get("parsed") is not None
            and not entry.get("refusal"))

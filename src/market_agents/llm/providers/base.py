"""The provider contract: one async ``complete(request) -> LLMResponse``.

Transport failures are raised as :class:`ProviderError` with an error class and whether a retry
may help; answers the model gave (malformed, refused, cut off) are responses, never errors.
Providers know nothing of the cache, prices or budgets (``client.py`` wraps them).
"""

from __future__ import annotations

import abc
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from market_agents.llm.types import LLMRequest, LLMResponse, Message

# Transient: retried with backoff, then recorded as the request's failure (part of the record).
RETRYABLE = frozenset({"rate_limit", "server_error", "timeout", "connection", "reset",
                       "bad_response", "response_failed"})
# Fatal: every further call would fail the same way and the error says nothing about the model,
# so the run stops at once and nothing is recorded for the request.
FATAL = frozenset({"quota", "bad_request", "auth", "not_found"})
FATAL_NAMES = {"quota": "quota exhausted", "bad_request": "invalid request",
               "auth": "authentication or permission refused", "not_found": "unknown model"}


class ProviderError(Exception):
    """A transport failure, with its error class (``RETRYABLE``: retried with backoff;
    ``FATAL``: the run stops), a detail safe to log, the server's ``Retry-After`` in seconds
    and its ``x-should-retry`` verdict (True/False; None when it sent none).
    """

    def __init__(self, error_class: str, detail: str = "", retry_after: float | None = None,
                 should_retry: bool | None = None):
        super().__init__(f"{error_class}: {detail}" if detail else error_class)
        self.error_class = error_class
        self.detail = detail
        self.retry_after = retry_after
        self.should_retry = should_retry

    @property
    def fatal(self) -> bool:
        """Whether every further call would fail the same way (quota, auth, bad request, unknown
        model).
        """
        return self.error_class in FATAL


class Provider(abc.ABC):
    """One provider route: turns an :class:`LLMRequest` into an :class:`LLMResponse`. Knows
    nothing of the cache, prices or budgets (``client.py`` wraps it). ``live``: whether money
    changes hands.
    """

    kind: str = ""  # the kind its registration in provider_kinds.py declares
    live: bool = True  # False: no money changes hands (the mock)
    # Schema keywords the provider rejects, per structured-output mode (structured.wire_schema
    # drops them; everything else goes on the wire).
    rejected: Mapping[str, frozenset[str]] = {}

    def __init__(self, route: str):
        self.route = route

    @classmethod
    def build(cls, route: str, settings: Any, key: str | None, url: str | None) -> Provider:
        """The provider of one route, from its settings, key and base URL (what
        ``registry.make_provider`` passes every kind); a class that takes fewer overrides it."""
        return cls(route, settings, key, url)  # type: ignore[call-arg]

    @abc.abstractmethod
    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request``; a transport failure raises :class:`ProviderError`."""

    def is_retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is worth retrying: the server's ``x-should-retry`` header when it
        sent one (as the official SDKs decide), else whether its class is transient."""
        if not isinstance(exc, ProviderError):
            return False
        if exc.should_retry is not None:
            return exc.should_retry
        return exc.error_class in RETRYABLE

    async def aclose(self) -> None:
        """Close the provider's HTTP client (nothing to close here)."""
        return None


class SDKProvider(Provider):
    """A provider over an official SDK client (``_sdk`` module, ``_client`` instance): one place
    times the call, classifies its failures and closes the client."""

    _sdk: Any
    _client: Any

    @abc.abstractmethod
    def payload(self, request: LLMRequest) -> dict:
        """The SDK call's keyword arguments for ``request``."""

    async def send(self, create: Callable[..., Awaitable[Any]], request: LLMRequest
                   ) -> tuple[Any, float]:
        """``create(**payload)`` with the request's timeout -> (SDK response, latency in s)."""
        start = time.monotonic()
        try:
            resp = await create(**self.payload(request),
                                timeout=request.timeout_s or self._sdk.NOT_GIVEN)
        except Exception as exc:  # noqa: BLE001 - every SDK failure is classified
            raise classify_sdk_error(exc, self._sdk) from None
        return resp, time.monotonic() - start

    async def aclose(self) -> None:
        """Close the SDK client."""
        await self._client.close()


def split_system(messages: tuple[Message, ...]) -> tuple[str, list[dict[str, Any]]]:
    """The system messages joined into one text, and the other messages as role/content
    dicts (APIs that take the system prompt apart).
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    rest = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
    return system, rest


def retry_after_seconds(headers: Any) -> float | None:
    """Retry-After in seconds (the HTTP-date form is rare for APIs and ignored)."""
    if headers is None:
        return None
    for name in ("retry-after-ms", "retry-after"):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        return value / 1000.0 if name.endswith("-ms") else value
    return None


def should_retry_header(headers: Any) -> bool | None:
    """The server's ``x-should-retry`` verdict: True for ``true``, False for ``false``, None
    when absent or anything else (the official SDKs read it the same way, before the status)."""
    raw = None if headers is None else headers.get("x-should-retry")
    return {"true": True, "false": False}.get(str(raw).strip().lower()) if raw else None


def error_code(exc: Exception) -> str:
    """The provider's error code or type from an SDK error body (``insufficient_quota``,
    ``invalid_request_error``, ...); '' when there is none. Only these short identifiers
    are kept: messages can echo request headers."""
    code = getattr(exc, "code", None)
    body = getattr(exc, "body", None)
    if not code and isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        code = inner.get("code") or inner.get("type")
    code = str(code or "")
    return code if code.replace("_", "").isalnum() and len(code) <= 64 else ""


def classify_sdk_error(exc: Exception, sdk: Any) -> ProviderError:
    """Map an ``openai``/``anthropic`` SDK exception (same class names in both) to a
    ProviderError. The message keeps the status and the provider's error code only: SDK
    messages can echo request headers, so they never reach logs or the cache."""
    status = getattr(exc, "status_code", None)
    headers = getattr(getattr(exc, "response", None), "headers", None)
    retry_after = retry_after_seconds(headers)
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderError("timeout")
    if isinstance(exc, sdk.APIConnectionError):
        # could not connect at all (nothing listens, DNS) vs. a connection dropped mid-call
        cause = type(exc.__cause__).__name__ if exc.__cause__ else ""
        if cause in ("ConnectError", "ConnectTimeout", "gaierror", ""):
            return ProviderError("connection", cause or type(exc).__name__)
        return ProviderError("reset", cause)
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderError("bad_response", type(exc).__name__)
    if isinstance(exc, sdk.APIStatusError):
        err = _status_error(exc, status, retry_after)
        err.should_retry = should_retry_header(headers)
        return err
    if isinstance(exc, ValueError):  # a body that is not JSON
        return ProviderError("bad_response", type(exc).__name__)
    return ProviderError("provider_error", type(exc).__name__)


def _status_error(exc: Exception, status: int | None, retry_after: float | None
                  ) -> ProviderError:
    """The ProviderError of an HTTP error status: its class from the status and error code,
    with the server's Retry-After (a header that says retry may come with any status)."""
    code = error_code(exc)
    what = f"HTTP {status}" + (f" {code}" if code else "")
    # OpenAI: 429 insufficient_quota; Anthropic: 400 "credit balance is too low"
    if (status == 429 and code == "insufficient_quota") or (
            status in (400, 402) and "credit balance" in str(getattr(exc, "message", ""))):
        cls = "quota"
    elif status == 429:
        cls = "rate_limit"
    elif status in (408, 409) or (status is not None and status >= 500):
        cls = "server_error"  # 529: overloaded
    elif status in (401, 403):
        cls, what = "auth", f"{what} (check the API key in .env)"
    elif status == 404:
        cls = "not_found"
    else:
        cls = "bad_request"
    return ProviderError(cls, what, retry_after)

"""The provider contract: one async ``complete(request) -> LLMResponse``.

Transport failures are raised as :class:`ProviderError` with an error class and whether a retry
may help; answers the model gave (malformed, refused, cut off) are responses, never errors.
Providers know nothing of the cache, prices or budgets (``client.py`` wraps them).

An HTTP 200 is read here, not trusted to the SDK's models (:meth:`SDKProvider.read`): the
provider billed it, so a body the SDK cannot read (not JSON, ``output: null``, any shape) is
an *unparseable* answer (``LLMResponse.unparseable``), which the client records and charges
at its worst case, never a traceback; an error object inside a 200 (gateways and proxies send
them) is a :class:`ProviderError` classed like the HTTP status it stands for.
"""

from __future__ import annotations

import abc
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from market_agents.errors import ConfigError
from market_agents.llm.providers import proxy
from market_agents.llm.types import LLMRequest, LLMResponse, Message, Usage

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
    ``FATAL``: the run stops), a detail safe to log, the server's ``Retry-After`` in seconds,
    its ``x-should-retry`` verdict (True/False; None when it sent none) and whether the
    provider may have billed the attempt (``billed``: the request was sent and no complete
    answer came back in time, so the client charges it at its worst case).
    """

    def __init__(self, error_class: str, detail: str = "", retry_after: float | None = None,
                 should_retry: bool | None = None, billed: bool = False):
        super().__init__(f"{error_class}: {detail}" if detail else error_class)
        self.error_class = error_class
        self.detail = detail
        self.retry_after = retry_after
        self.should_retry = should_retry
        self.billed = billed

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
    builds the client, times the call, reads the body of an HTTP 200, classifies failures and
    closes the client. A subclass says where its answer sits in the body (``answer_key``) and
    reads the SDK's model of a sound body (:meth:`answer`)."""

    _sdk: Any
    _client: Any
    answer_key: str = ""  # the body field that holds the answer (output, content, choices)

    def client(self, factory: Callable[..., Any], url: str | None, **kwargs: Any) -> Any:
        """``factory(base_url=url, **kwargs)``, the SDK client, with a proxy the environment
        names checked first.

        Raises:
            ConfigError: a proxy variable holds a URL the HTTP client cannot use (an unknown
                scheme, no host), or building the client failed on the proxy ``url`` goes
                through; the message names the variable, never its credentials.
        """
        problem = proxy.unsupported()
        if problem:
            raise ConfigError(f"provider {self.route!r}: {problem}")
        try:
            return factory(base_url=url, **kwargs)
        except Exception as exc:  # the only input besides ours is the proxy environment
            found = proxy.proxy_for(url)
            if found is None:
                raise
            raise ConfigError(f"provider {self.route!r}: the proxy {found[0]}={found[1]} "
                              f"cannot be used ({type(exc).__name__}); fix or unset "
                              f"{found[0]}") from None

    def proxy(self) -> tuple[str, str] | None:
        """The proxy variable this route's requests go through and its value without
        credentials (None: direct), for errors that must name it."""
        return proxy.proxy_for(str(self._client.base_url))

    @abc.abstractmethod
    def payload(self, request: LLMRequest) -> dict:
        """The SDK call's keyword arguments for ``request``."""

    @abc.abstractmethod
    def answer(self, resp: Any, latency: float) -> LLMResponse:
        """The answer in the SDK's model of a 200 body; anything it raises on the body's shape
        makes the answer unparseable (a ProviderError passes through)."""

    @abc.abstractmethod
    def usage(self, resp: Any) -> Usage:
        """The usage the SDK's model of a body reports (zeros when there is none)."""

    async def send(self, create: Callable[..., Awaitable[Any]], request: LLMRequest
                   ) -> LLMResponse:
        """``create(**payload)`` (an SDK method's ``with_raw_response`` form) with the
        request's timeout, its 200 body read by :meth:`read`.

        Raises:
            ProviderError: the SDK's failure, classified, or an error object inside a 200.
        """
        start = time.monotonic()
        try:
            raw = await create(**self.payload(request),
                               timeout=request.timeout_s or self._sdk.NOT_GIVEN)
        except Exception as exc:  # noqa: BLE001 - every SDK failure is classified
            raise classify_sdk_error(exc, self._sdk) from None
        return await self.read(raw, time.monotonic() - start)

    async def read(self, raw: Any, latency: float) -> LLMResponse:
        """An HTTP 200 as an answer. The provider billed it, so whatever the body holds is
        an answer unless it is an error object: a body that is not a JSON object, or that the
        SDK's model cannot be read from, is an unparseable answer (its usage kept when it can
        be read), never an exception.

        Raises:
            ProviderError: an error object inside the 200 (:func:`error_in_body`).
        """
        try:
            data = json.loads(raw.http_response.content)
        except ValueError as exc:
            return unparseable(f"the body is not JSON ({type(exc).__name__})", latency)
        if not isinstance(data, dict):
            return unparseable(f"the body is a JSON {type(data).__name__}, not an object",
                               latency)
        error = self.error_in_body(data)
        if error is not None:
            error.should_retry = should_retry_header(raw.http_response.headers)
            raise error
        resp = None
        try:
            resp = raw.parse()
            if inspect.isawaitable(resp):  # anthropic's async raw response parses async
                resp = await resp
            return self.answer(resp, latency)
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - any shape the SDK's model cannot read
            usage = Usage()
            try:
                usage = self.usage(resp) if resp is not None else usage
            except Exception:  # noqa: BLE001 - its usage is unreadable too: charged anyway
                pass
            model = getattr(resp, "model", "") if resp is not None else ""
            return unparseable(f"{type(exc).__name__} reading {self.answer_key or 'the body'}"
                               f" ({str(exc)[:80]})", latency, usage,
                               model if isinstance(model, str) else "")

    def error_in_body(self, data: dict) -> ProviderError | None:
        """The error a 200 body carries in place of an answer (``{"error": {...}}`` without the
        answer field), classed like the HTTP status it stands for; None for an answer."""
        err = data.get("error")
        if not err or data.get(self.answer_key):
            return None
        return error_object(err)

    async def aclose(self) -> None:
        """Close the SDK client."""
        await self._client.close()


def count(value: Any) -> int:
    """A token count read from a body: a non-negative integer (None: 0). Anything else raises
    ValueError, which makes the answer unparseable (charged at its worst case) rather than
    priced from a count that is not one."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a token count is {type(value).__name__} {str(value)[:20]!r}")
    return value


def text_of(value: Any) -> str:
    """A text field read from a body: a string (None: empty); anything else raises
    ValueError (the answer is unparseable)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"a text field is {type(value).__name__}")
    return value


def unparseable(why: str, latency: float, usage: Usage | None = None, model: str = ""
                ) -> LLMResponse:
    """An answer billed but not readable: no text, ``why`` (safe to log) as its mark."""
    return LLMResponse(text="", usage=usage or Usage(), latency_s=latency, model=model,
                       unparseable=why)


# error object type or code -> error class (the types and codes OpenAI and Anthropic send)
ERROR_OBJECT_CLASSES = {
    "rate_limit_error": "rate_limit", "rate_limit_exceeded": "rate_limit",
    "overloaded_error": "server_error", "api_error": "server_error",
    "server_error": "server_error", "timeout_error": "server_error",
    "insufficient_quota": "quota", "billing_error": "quota",
    "authentication_error": "auth", "permission_error": "auth", "invalid_api_key": "auth",
    "not_found_error": "not_found", "model_not_found": "not_found",
    "invalid_request_error": "bad_request",
}


def error_object(err: Any) -> ProviderError:
    """The ProviderError of an error object found in an HTTP 200 body: classed by its code
    or type, or by an HTTP status it names (``"code": 429``); unknown errors are transient
    (``bad_response``: retried, then recorded). Only short identifiers are kept: messages
    can echo request headers."""
    err = err if isinstance(err, dict) else {"message": str(err)}
    status = next((v for v in (err.get("code"), err.get("status"))
                   if isinstance(v, int) and 400 <= v <= 599), None)
    names = [str(v) for v in (err.get("code"), err.get("type")) if isinstance(v, str)]
    cls = next((ERROR_OBJECT_CLASSES[n] for n in names if n in ERROR_OBJECT_CLASSES), None)
    if "credit balance" in str(err.get("message", "")):
        cls = "quota"
    if cls is None and status is not None:
        cls = _status_error(Exception(), status, None).error_class
    label = next((n for n in names if n.replace("_", "").isalnum() and len(n) <= 64),
                 str(status or ""))
    return ProviderError(cls or "bad_response",
                         "HTTP 200 carrying an error" + (f" ({label})" if label else ""))


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
        # a read that timed out came after the request was sent: the provider may bill it;
        # a connect or pool timeout sent nothing
        cause = type(exc.__cause__).__name__ if exc.__cause__ else ""
        return ProviderError("timeout", cause, billed=cause == "ReadTimeout")
    if isinstance(exc, sdk.APIConnectionError):
        # could not connect at all (nothing listens, DNS, a proxy that refuses) vs. a
        # connection dropped mid-call
        cause = type(exc.__cause__).__name__ if exc.__cause__ else ""
        if cause in ("ConnectError", "ConnectTimeout", "gaierror", "ProxyError", ""):
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

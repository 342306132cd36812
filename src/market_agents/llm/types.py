"""Plain data that crosses the LLM layer: requests, usage, provider responses, results.

Nothing here knows about markets. A request is everything that determines an answer, so its
canonical JSON (minus transport settings) is the cache key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any

from market_agents.core import canonical_json


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message: ``role`` (system, user or assistant) and its text."""

    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class LLMRequest:
    """One call. ``provider`` is the provider *kind* (openai, anthropic, openai_compatible,
    mock); ``route`` is the name in ``provider_mix`` (an alias such as ``openai_mini``) that picks
    the provider instance, caps and concurrency. ``agent`` names the caller (e.g. ``slot7``) and
    is part of the key: two traders sending the same snapshot must not share one recorded
    answer, or a replay could hand one trader the other's decision."""

    provider: str
    model: str
    messages: tuple[Message, ...]
    json_schema: dict[str, Any] | None = None  # None: free text
    structured_output: str | None = None  # how the schema is sent (structured.MODES)
    schema_name: str = "decision"
    prompt_id: str = ""
    prompt_version: str = ""
    max_output_tokens: int = 1024
    temperature: float | None = None
    reasoning_effort: str | None = None
    agent: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # provider parameters that change answers
    route: str = ""
    timeout_s: float | None = None  # transport only: never part of the key
    # What identifies the prompt and schema beyond their labels (``prompt_sha256``,
    # ``schema_sha256``): recorded in the cache entry, never part of the key (the messages
    # and schema, which it summarizes, already are).
    identity: dict[str, str] = field(default_factory=dict)

    def key_payload(self) -> dict[str, Any]:
        """The request as it is keyed: every field that can change the answer (transport
        settings such as the timeout and route, and the identity record, left out).
        """
        # A shallow copy, not asdict: asdict deep-copies the schema and every message, 8 times
        # a request (each key() call), which was most of a mock LLM run's CPU. Callers change
        # only the top level of the dict they get.
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("timeout_s", "route", "identity")}
        if data["structured_output"] is None:  # free-text requests keep their earlier keys
            data.pop("structured_output")
        data["messages"] = [[m.role, m.content] for m in self.messages]
        return data

    def key(self) -> str:
        """The cache key: SHA-256 (hex) of the canonical JSON of :meth:`key_payload`, computed
        once per request (a request is not changed once made)."""
        key = self.__dict__.get("_key")
        if key is None:
            key = hashlib.sha256(canonical_json(self.key_payload()).encode()).hexdigest()
            object.__setattr__(self, "_key", key)  # a memo, not a field: eq and repr ignore it
        return key

    def input_token_bound(self) -> int:
        """An upper bound on the input tokens this request can be billed: the UTF-8 bytes of
        every message and of the output schema (byte-level BPE tokenizers never make more
        tokens than bytes), plus 16 tokens of framing per message and 64 per request. Used to
        reserve a call's worst case before it is sent; the real count is usually ~4x lower."""
        size = sum(len(m.content.encode()) + 16 for m in self.messages) + 64
        if self.json_schema is not None:
            size += len(canonical_json(self.json_schema).encode()) + len(self.schema_name)
        return size


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call, normalized across providers: ``input`` counts every input token
    (uncached, cache reads and cache writes), ``output`` includes ``reasoning``."""

    input: int = 0
    cached_input: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0

    def to_dict(self) -> dict[str, int]:
        """The token counts as a dict, in field order."""
        # Not dataclasses.asdict, which deep-copies each value: 4.3 against 0.4 us a call,
        # twice per request (about 1.5 % of a mock LLM run; bench/README.md).
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        """Token counts from a dict (missing counts are 0)."""
        return cls(**{k: int(data.get(k, 0)) for k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """What a provider returned: text (possibly malformed), usage, and whether the model
    refused or was cut off. Transport failures are exceptions, not responses. ``unparseable``
    says why an HTTP 200 the provider billed could not be read as an answer (empty: it
    could); such an answer has no text and is charged at its worst case."""

    text: str
    usage: Usage
    latency_s: float = 0.0
    refusal: bool = False
    truncated: bool = False
    model: str = ""  # the id the server reported, when it reports one
    unparseable: str = ""


@dataclass(frozen=True, slots=True)
class LLMResult:
    """The outcome of one request after cache, budget, retries and parsing.

    ``valid`` is None when no answer exists (budget halt, decision cap, failure after retries).
    ``usd`` is the priced cost of the recorded answer (what it cost when it was bought);
    ``usd_spent`` is what this execution paid (0 for cache hits and the mock)."""

    key: str
    text: str | None
    parsed: Any
    valid: bool | None
    error_class: str | None
    usage: Usage
    usd: float
    usd_spent: float
    cache_hit: bool
    latency_s: float
    calls: int = 0  # provider calls this execution made for it (retries included)
    answer_sha256: str | None = None  # content hash of the stored answer (None: no answer)

"""Plain data that crosses the LLM layer: requests, usage, provider responses, results.

Nothing here knows about markets. A request is everything that determines an answer, so its
canonical JSON (minus transport settings) is the cache key.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from market_agents.core import canonical_json


@dataclass(frozen=True, slots=True)
class Message:
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

    def key_payload(self) -> dict[str, Any]:
        data = asdict(self)
        for transport in ("timeout_s", "route"):
            data.pop(transport)
        data["messages"] = [[m.role, m.content] for m in self.messages]
        return data

    def key(self) -> str:
        return hashlib.sha256(canonical_json(self.key_payload()).encode()).hexdigest()


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
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(**{k: int(data.get(k, 0)) for k in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """What a provider returned: text (possibly malformed), usage, and whether the model
    refused or was cut off. Transport failures are exceptions, not responses."""

    text: str
    usage: Usage
    latency_s: float = 0.0
    refusal: bool = False
    truncated: bool = False
    model: str = ""  # the id the server reported, when it reports one


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


def usage_summary(counts: Mapping[str, int], tokens: Mapping[str, int], usd: float = 0.0,
                  usd_spent: float = 0.0, halts: list | None = None,
                  corrupt: int = 0) -> dict[str, Any]:
    """The manifest's ``llm_usage`` block from a client's counters (USD priced and paid, budget
    halt events, corrupt cache entries); ``usage_summary({}, {})`` is the block of a run that
    asked no model (a classical run, a library replay), every count zero."""
    c = Counter(counts)
    t = Counter(tokens)
    answered = c["answered"] + c["cache_hits"]
    return {
        "requests": answered + c["failures"] + c["budget_halt"] + c["decision_cap"],
        "calls": c["calls"],
        "answered": c["answered"],
        "cache_hits": c["cache_hits"],
        "cached_hits": (c["cache_hits"] / answered) if answered else 0.0,
        "valid": c["valid"],
        "invalid": c["invalid"],
        "failures": c["failures"],
        "budget_halts": c["budget_halt"],
        "decision_cap_holds": c["decision_cap"],
        "budget_halt_events": list(halts or []),
        "tokens_in": t["input"],
        "tokens_cached": t["cached_input"],
        "tokens_cache_write": t["cache_write"],
        "tokens_out": t["output"],
        "tokens_reasoning": t["reasoning"],
        "usd": round(usd, 10),
        "usd_spent": round(usd_spent, 10),
        "corrupt_cache_entries": corrupt,
    }

"""Anthropic through the official SDK's Messages API: ``output_config.format`` json_schema,
``output_config.effort`` where the model supports it, and the system prompt marked with
``cache_control`` so repeated prompts read from Anthropic's prompt cache."""

from __future__ import annotations

from market_agents.llm import structured
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers.base import SDKProvider, count, split_system, text_of
from market_agents.llm.schema import RANGE_KEYWORDS
from market_agents.llm.types import LLMRequest, LLMResponse, Usage

# Models that reject ``effort`` (it arrived with Opus 4.5); newer ids are assumed to take it.
NO_EFFORT_PREFIXES = (
    "claude-3", "claude-haiku-4", "claude-sonnet-4-0", "claude-sonnet-4-2", "claude-sonnet-4-5",
    "claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-2",
)


def supports_effort(model: str) -> bool:
    """Whether ``model`` takes the ``effort`` setting (older Claude models do not)."""
    return not model.startswith(NO_EFFORT_PREFIXES)


class AnthropicProvider(SDKProvider):
    """Anthropic's Messages API: the answer schema as ``output_config.format``, ``effort``
    where the model supports it, the system prompt marked for prompt caching.
    """

    kind = "anthropic"
    answer_key = "content"
    rejected = {"json_schema": RANGE_KEYWORDS}  # numeric and length bounds

    def __init__(self, route: str, settings: ProviderSettings, key: str | None, url: str | None):
        super().__init__(route)
        # why: the SDK loads only when a route of this kind is built (registry factories)
        import anthropic

        self._sdk = anthropic
        self._client = self.client(anthropic.AsyncAnthropic, url, api_key=key,
                                   timeout=settings.timeout_s, max_retries=0)

    def payload(self, request: LLMRequest) -> dict:
        """The Messages API arguments of ``request``."""
        system, rest = split_system(structured.messages(request))
        kwargs: dict = {
            "model": request.model,
            "max_tokens": request.max_output_tokens,
            "messages": rest,
        }
        if system:
            kwargs["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
        output_config: dict = {}
        mode = request.structured_output or structured.DEFAULT_MODE
        if request.json_schema is not None and mode == "json_schema":
            output_config["format"] = {
                "type": "json_schema",
                "schema": structured.wire_schema(self.kind, mode, request.json_schema)}
        if request.reasoning_effort and supports_effort(request.model):
            output_config["effort"] = request.reasoning_effort
        if output_config:
            kwargs["output_config"] = output_config
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        return kwargs

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send ``request`` and return the answer text, usage (cache reads and writes
        included) and latency (an unparseable answer for a body the SDK cannot read).

        Raises:
            ProviderError: a transport failure, classified (retryable or fatal), or an error
                object inside an HTTP 200.
        """
        return await self.send(self._client.messages.with_raw_response.create, request)

    def answer(self, resp, latency: float) -> LLMResponse:
        """The message's text blocks, refusal, truncation, model and usage."""
        text = "".join(text_of(b.text) for b in resp.content if getattr(b, "type", "") == "text")
        return LLMResponse(
            text=text,
            usage=self.usage(resp),
            latency_s=latency,
            refusal=resp.stop_reason == "refusal",
            truncated=resp.stop_reason == "max_tokens",
            model=text_of(resp.model),
        )

    def usage(self, resp) -> Usage:
        """The message's usage, normalized: input counts cache reads and writes, which
        Anthropic's ``input_tokens`` excludes (zeros when none is reported, e.g. a proxy)."""
        u = resp.usage
        if u is None:
            return Usage()
        read = count(getattr(u, "cache_read_input_tokens", 0))
        write = count(getattr(u, "cache_creation_input_tokens", 0))
        details = getattr(u, "output_tokens_details", None)
        return Usage(
            input=count(u.input_tokens) + read + write,  # Anthropic's excludes both
            cached_input=read,
            cache_write=write,
            output=count(u.output_tokens),
            reasoning=count(getattr(details, "thinking_tokens", 0)),
        )

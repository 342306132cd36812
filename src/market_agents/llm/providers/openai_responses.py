"""OpenAI through the official SDK's Responses API: ``store=False``, strict json_schema output,
``reasoning.effort``, and ``prompt_cache_key`` per prompt id so calls that share a system prompt
hit OpenAI's prompt cache."""

from __future__ import annotations

from market_agents.llm import structured
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers.base import ProviderError, SDKProvider, split_system
from market_agents.llm.types import LLMRequest, LLMResponse, Usage


class OpenAIProvider(SDKProvider):
    """OpenAI's Responses API: ``store=False``, strict json_schema output, reasoning effort,
    ``prompt_cache_key`` per prompt id.
    """

    kind = "openai"
    rejected = {"json_schema": frozenset({"minLength", "maxLength"})}  # strict mode's lengths

    def __init__(self, route: str, settings: ProviderSettings, key: str | None, url: str | None):
        super().__init__(route)
        # why: the SDK loads only when a route of this kind is built (registry factories)
        import openai

        self._sdk = openai
        self._client = openai.AsyncOpenAI(
            api_key=key, base_url=url, timeout=settings.timeout_s, max_retries=0
        )

    def payload(self, request: LLMRequest) -> dict:
        """The Responses API arguments of ``request``."""
        system, rest = split_system(structured.messages(request))
        kwargs: dict = {
            "model": request.model,
            "input": rest,
            "store": False,
            "max_output_tokens": request.max_output_tokens,
        }
        if system:
            kwargs["instructions"] = system
        if request.prompt_id:
            kwargs["prompt_cache_key"] = request.prompt_id
        mode = request.structured_output or structured.DEFAULT_MODE
        if request.json_schema is not None and mode == "json_schema":
            wire = structured.wire_schema(self.kind, mode, request.json_schema)
            kwargs["text"] = {"format": {"type": "json_schema", "name": request.schema_name,
                                         "schema": wire, "strict": True}}
        if request.reasoning_effort:
            kwargs["reasoning"] = {"effort": request.reasoning_effort}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        return kwargs

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send ``request`` and return the answer text, usage and latency.

        Raises:
            ProviderError: a transport failure, or a response with status failed or cancelled.
        """
        resp, latency = await self.send(self._client.responses.create, request)
        if resp.status in ("failed", "cancelled"):
            # HTTP 200 carrying a failed response: the provider failed, the model said nothing
            code = getattr(getattr(resp, "error", None), "code", None) or resp.status
            raise ProviderError("response_failed", f"status {resp.status} ({code})")
        refusal = any(
            getattr(part, "type", "") == "refusal"
            for item in resp.output or []
            for part in (getattr(item, "content", None) or [])
        )
        u = resp.usage
        usage = Usage()  # none reported: zeros, which the client charges at the reservation
        if u is not None:
            details = u.input_tokens_details
            usage = Usage(
                input=u.input_tokens or 0,  # OpenAI counts cached tokens inside input_tokens
                cached_input=getattr(details, "cached_tokens", 0) or 0,
                cache_write=getattr(details, "cache_write_tokens", 0) or 0,
                output=u.output_tokens or 0,
                reasoning=getattr(u.output_tokens_details, "reasoning_tokens", 0) or 0,
            )
        return LLMResponse(
            text=resp.output_text or "",
            usage=usage,
            latency_s=latency,
            refusal=refusal,
            truncated=resp.status == "incomplete",
            model=resp.model or "",
        )

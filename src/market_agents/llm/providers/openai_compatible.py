"""Any server speaking OpenAI chat completions (vLLM, Ollama, llama.cpp's servers) at a
configured ``base_url``, with the answer schema sent the way the route's ``structured_output``
mode says (``structured.py``; docs/local_models.md). Free local models; priced from
``prices.yaml`` like any other model id (``MARKET_AGENTS_PRICES`` can price one at 0)."""

from __future__ import annotations

from market_agents.llm import structured
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers.base import ProviderError, SDKProvider
from market_agents.llm.types import LLMRequest, LLMResponse, Usage


class OpenAICompatibleProvider(SDKProvider):
    """A server speaking OpenAI chat completions at ``base_url`` (vLLM, Ollama, llama.cpp)."""

    kind = "openai_compatible"

    def __init__(self, route: str, settings: ProviderSettings, key: str | None, url: str):
        super().__init__(route)
        # why: the SDK loads only when a route of this kind is built (registry factories)
        import openai

        self._sdk = openai
        self._client = openai.AsyncOpenAI(
            api_key=key or "not-needed", base_url=url, timeout=settings.timeout_s, max_retries=0
        )

    def payload(self, request: LLMRequest) -> dict:
        """The chat-completions arguments of ``request``, the schema sent per the route's
        ``structured_output`` mode.
        """
        kwargs: dict = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content}
                         for m in structured.messages(request)],
            "max_tokens": request.max_output_tokens,
        }
        mode = request.structured_output or structured.DEFAULT_MODE
        if request.json_schema is not None:
            wire = structured.wire_schema(self.kind, mode, request.json_schema)
            if mode == "json_schema":
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": request.schema_name, "schema": wire, "strict": True},
                }
            elif mode == "json_object_schema":
                kwargs["response_format"] = {"type": "json_object", "schema": wire}
            elif mode == "grammar":  # a llama.cpp extension the SDK passes through
                kwargs["extra_body"] = {"grammar": structured.gbnf(wire)}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        return kwargs

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send ``request`` and return the answer text, usage and latency.

        Raises:
            ProviderError: a transport failure, or a response without choices.
        """
        resp, latency = await self.send(self._client.chat.completions.create, request)
        if not resp.choices:
            raise ProviderError("bad_response", "no choices")
        choice = resp.choices[0]
        u = resp.usage
        usage = Usage()  # none reported: zeros, which the client charges at the reservation
        if u is not None:
            cached = getattr(u.prompt_tokens_details, "cached_tokens", 0) or 0
            reasoning = getattr(u.completion_tokens_details, "reasoning_tokens", 0) or 0
            usage = Usage(input=u.prompt_tokens or 0, cached_input=cached,
                          output=u.completion_tokens or 0, reasoning=reasoning)
        return LLMResponse(
            text=choice.message.content or "",
            usage=usage,
            latency_s=latency,
            refusal=bool(getattr(choice.message, "refusal", None)),
            truncated=choice.finish_reason == "length",
            model=resp.model or "",
        )

"""Any server speaking OpenAI chat completions (vLLM, Ollama, llama.cpp's servers) at a
configured ``base_url``, with the answer schema sent the way the route's ``structured_output``
mode says (``structured.py``; docs/local_models.md). Free local models; priced from
``prices.yaml`` like any other model id (``MARKET_AGENTS_PRICES`` can price one at 0)."""

from __future__ import annotations

from market_agents.llm import structured
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers.base import SDKProvider, count, text_of
from market_agents.llm.types import LLMRequest, LLMResponse, Usage


class OpenAICompatibleProvider(SDKProvider):
    """A server speaking OpenAI chat completions at ``base_url`` (vLLM, Ollama, llama.cpp)."""

    kind = "openai_compatible"
    answer_key = "choices"

    def __init__(self, route: str, settings: ProviderSettings, key: str | None, url: str):
        super().__init__(route)
        # why: the SDK loads only when a route of this kind is built (registry factories)
        import openai

        self._sdk = openai
        self._client = self.client(openai.AsyncOpenAI, url, api_key=key or "not-needed",
                                   timeout=settings.timeout_s, max_retries=0)

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
        """Send ``request`` and return the answer text, usage and latency (an unparseable
        answer for a body without choices, or one the SDK cannot read).

        Raises:
            ProviderError: a transport failure, or an error object inside an HTTP 200.
        """
        return await self.send(self._client.chat.completions.with_raw_response.create,
                               request)

    def answer(self, resp, latency: float) -> LLMResponse:
        """The first choice's text, refusal and truncation, the model and usage."""
        choice = resp.choices[0]  # no choices: an IndexError, so an unparseable answer
        return LLMResponse(
            text=text_of(choice.message.content),
            usage=self.usage(resp),
            latency_s=latency,
            refusal=bool(getattr(choice.message, "refusal", None)),
            truncated=choice.finish_reason == "length",
            model=text_of(resp.model),
        )

    def usage(self, resp) -> Usage:
        """The completion's usage (zeros when none is reported, which the client charges at
        the reservation)."""
        u = resp.usage
        if u is None:
            return Usage()
        cached = count(getattr(u.prompt_tokens_details, "cached_tokens", 0))
        reasoning = count(getattr(u.completion_tokens_details, "reasoning_tokens", 0))
        return Usage(input=count(u.prompt_tokens), cached_input=cached,
                     output=count(u.completion_tokens), reasoning=reasoning)

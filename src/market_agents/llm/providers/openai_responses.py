"""OpenAI through the official SDK's Responses API: ``store=False``, strict json_schema output,
``reasoning.effort``, and ``prompt_cache_key`` per prompt id so calls that share a system prompt
hit OpenAI's prompt cache."""

from __future__ import annotations

from market_agents.llm import structured
from market_agents.llm.config import ProviderSettings
from market_agents.llm.providers.base import (
    ProviderError,
    SDKProvider,
    count,
    split_system,
    text_of,
)
from market_agents.llm.types import LLMRequest, LLMResponse, Usage


class OpenAIProvider(SDKProvider):
    """OpenAI's Responses API: ``store=False``, strict json_schema output, reasoning effort,
    ``prompt_cache_key`` per prompt id.
    """

    kind = "openai"
    answer_key = "output"
    rejected = {"json_schema": frozenset({"minLength", "maxLength"})}  # strict mode's lengths

    def __init__(self, route: str, settings: ProviderSettings, key: str | None, url: str | None):
        super().__init__(route)
        # why: the SDK loads only when a route of this kind is built (registry factories)
        import openai

        self._sdk = openai
        self._client = self.client(openai.AsyncOpenAI, url, api_key=key,
                                   timeout=settings.timeout_s, max_retries=0)

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
        """Send ``request`` and return the answer text, usage and latency (an unparseable
        answer for a body the SDK cannot read, e.g. ``output: null``: openai-python #2486).

        Raises:
            ProviderError: a transport failure, a response with status failed or cancelled,
                or an error object inside an HTTP 200.
        """
        return await self.send(self._client.responses.with_raw_response.create, request)

    def error_in_body(self, data: dict) -> ProviderError | None:
        """A Responses object with status failed or cancelled (HTTP 200: the provider failed,
        the model said nothing), or an error object in place of a response."""
        if data.get("status") in ("failed", "cancelled"):
            err = data.get("error")
            code = (err.get("code") if isinstance(err, dict) else None) or data["status"]
            code = code if str(code).replace("_", "").isalnum() else data["status"]
            # a response object the provider made: it may bill the tokens it consumed, so the
            # attempt is charged at its worst case like a read that timed out (issue 33)
            return ProviderError("response_failed", f"status {data['status']} ({code})",
                                 billed=True)
        return super().error_in_body(data)

    def answer(self, resp, latency: float) -> LLMResponse:
        """The Responses object's text, refusal, truncation, model and usage."""
        refusal = any(
            getattr(part, "type", "") == "refusal"
            for item in resp.output
            for part in (getattr(item, "content", None) or [])
        )
        return LLMResponse(
            text=text_of(resp.output_text),
            usage=self.usage(resp),
            latency_s=latency,
            refusal=refusal,
            truncated=resp.status == "incomplete",
            model=text_of(resp.model),
        )

    def usage(self, resp) -> Usage:
        """The Responses usage, normalized (zeros when none is reported, which the client
        charges at the reservation)."""
        u = resp.usage
        if u is None:
            return Usage()
        details = u.input_tokens_details
        return Usage(
            input=count(u.input_tokens),  # OpenAI counts cached tokens inside input_tokens
            cached_input=count(getattr(details, "cached_tokens", 0)),
            cache_write=count(getattr(details, "cache_write_tokens", 0)),
            output=count(u.output_tokens),
            reasoning=count(getattr(u.output_tokens_details, "reasoning_tokens", 0)),
        )

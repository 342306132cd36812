"""LLM providers behind one async interface (``base.py``: ``Provider.complete(request)``):
``openai_responses.py`` (OpenAI's Responses API), ``anthropic_messages.py`` (Anthropic's
Messages API), ``openai_compatible.py`` (any OpenAI chat-completions server: vLLM, Ollama,
llama.cpp), ``mock.py`` (deterministic, free) and ``registry.py`` (a provider kind -> its
class, as ``provider_kinds.py`` declares it)."""

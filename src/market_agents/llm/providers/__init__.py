"""LLM providers behind one async interface (``base.py``: ``Provider.complete(request)``):
``openai_responses.py`` (OpenAI's Responses API), ``anthropic_messages.py`` (Anthropic's
Messages API), ``openai_compatible.py`` (any OpenAI chat-completions server: vLLM, Ollama,
llama.cpp), ``mock.py`` (deterministic, free), ``registry.py`` (a provider kind -> its
class, as ``provider_kinds.py`` declares it) and ``proxy.py`` (the proxy variable a route goes
through, named in errors)."""

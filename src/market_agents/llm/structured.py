"""Structured output: how each provider is asked for a JSON answer, and which schema keywords
it is sent (docs/local_models.md).

``providers.<route>.structured_output`` picks the mode; the mode is part of the request (and so
of its cache key) and of the run manifest:

- ``json_schema``: the server constrains the answer to the schema. OpenAI (Responses
  ``text.format``), Anthropic (``output_config.format``), and for ``openai_compatible``:
  ``response_format: {type: json_schema}`` as vLLM, Ollama and llama.cpp's C++ ``llama-server``
  accept it. The default for every kind.
- ``json_object_schema``: ``response_format: {type: json_object, schema: …}``, the form
  llama-cpp-python's server accepts (it answers HTTP 500 to ``json_schema``).
- ``grammar``: the schema compiled to a GBNF grammar sent as ``grammar``, for the llama.cpp
  servers (C++ and Python).
- ``none``: nothing is constrained; the system prompt asks for one JSON object matching the
  schema (which it carries) and the answer is parsed like any other.

The schema keeps its ranges (``schema.decision_schema``); a provider drops only the keywords it
rejects: Anthropic rejects numeric and length bounds, OpenAI's strict mode string lengths.
"""

from __future__ import annotations

import json
from typing import Any

from market_agents.llm.schema import RANGE_KEYWORDS, without
from market_agents.llm.types import LLMRequest, Message

MODES = ("json_schema", "json_object_schema", "grammar", "none")
DEFAULT_MODE = "json_schema"
# Modes each provider kind can send (the mock answers any request the same way).
KIND_MODES = {
    "openai": ("json_schema", "none"),
    "anthropic": ("json_schema", "none"),
    "openai_compatible": MODES,
    "mock": MODES,
}
# Schema keywords each (kind, mode) rejects; everything else goes on the wire.
REJECTED: dict[tuple[str, str], frozenset[str]] = {
    ("anthropic", "json_schema"): RANGE_KEYWORDS,
    ("openai", "json_schema"): frozenset({"minLength", "maxLength"}),
}
_NONE_INSTRUCTION = ("Reply with one JSON object and nothing else (no prose, no code fence), "
                     "matching this JSON schema: ")


def wire_schema(kind: str, mode: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as sent to a provider of ``kind`` in ``mode``."""
    return without(schema, REJECTED.get((kind, mode), frozenset()))


def messages(request: LLMRequest) -> tuple[Message, ...]:
    """The request's messages; in mode ``none`` the system message also carries the schema."""
    if request.structured_output != "none" or request.json_schema is None:
        return request.messages
    text = _NONE_INSTRUCTION + json.dumps(request.json_schema, separators=(",", ":"))
    out, done = [], False
    for m in request.messages:
        if m.role == "system" and not done:
            m, done = Message("system", f"{m.content}\n\n{text}"), True
        out.append(m)
    return tuple(out) if done else (Message("system", text), *out)


def gbnf(schema: dict[str, Any]) -> str:
    """A GBNF grammar (llama.cpp's grammar format) for the decision schema's subset of JSON
    schema: an object with all properties in order, string/integer enums, bounded integers,
    numbers, length-bounded strings and ``anyOf`` with null. Raises ``ValueError`` on anything
    else."""
    rules: dict[str, str] = {
        "ws": '[ \\t\\n]{0,2}',
        "char": '[^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt]',
        "number": '"-"? [0-9]{1,9} ("." [0-9]{1,6})?',
    }

    def rule(name: str, node: dict[str, Any]) -> str:
        if "anyOf" in node:
            rules[name] = " | ".join(rule(f"{name}-{i}", alt)
                                     for i, alt in enumerate(node["anyOf"]))
            return name
        if "enum" in node:
            rules[name] = " | ".join(_literal(json.dumps(v)) for v in node["enum"])
            return name
        kind = node.get("type")
        if kind == "null":
            return '"null"'
        if kind == "integer" and "minimum" in node and "maximum" in node:
            rules[name] = " | ".join(f'"{i}"' for i in range(int(node["minimum"]),
                                                             int(node["maximum"]) + 1))
            return name
        if kind == "integer":
            return '"-"? [0-9]{1,9}'
        if kind == "number":
            return "number"
        if kind == "string":
            return f'"\\"" char{{0,{int(node.get("maxLength", 1000))}}} "\\""'
        if kind == "object":
            parts = []
            for i, (key, sub) in enumerate(node["properties"].items()):
                sep = '"," ws ' if i else ""
                value = rule(name + "-" + key.replace("_", "-"), sub)
                parts.append(f'{sep}{_literal(json.dumps(key))} ws ":" ws {value} ws')
            rules[name] = '"{" ws ' + " ".join(parts) + ' "}"'
            return name
        raise ValueError(f"gbnf: unsupported schema node {node!r}")

    rules["root"] = rule("decision", schema)
    order = ["root"] + [k for k in rules if k != "root"]
    return "\n".join(f"{k} ::= {rules[k]}" for k in order) + "\n"


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

"""Structured output: how each provider is asked for a JSON answer, and which schema keywords
it is sent (docs/local_models.md).

``providers.<route>.structured_output`` picks the mode; the mode is part of the request (and so
of its cache key) and of the run manifest:

- ``json_schema``: the server constrains the answer to the schema. OpenAI (Responses
  ``text.format``), Anthropic (``output_config.format``), and for ``openai_compatible``:
  ``response_format: {type: json_schema}`` as vLLM, Ollama and llama.cpp's C++ ``llama-server``
  accept it. The default for every kind.
- ``json_object_schema``: ``response_format: {type: json_object, schema: …}``, the form
  llama-cpp-python's server accepts (it answers HTTP 500 to ``json_schema``); its converter
  drops integer bounds.
- ``grammar``: the schema compiled to a GBNF grammar sent as ``grammar``, for the llama.cpp
  servers (C++ and Python), every range kept (numbers too: ``bounded_number``).
- ``none``: nothing is constrained; the system prompt asks for one JSON object matching the
  schema (which it carries) and the answer is parsed like any other.

The schema keeps its ranges (``schema.decision_schema``); a provider drops only the keywords it
rejects: Anthropic rejects numeric and length bounds, OpenAI's strict mode string lengths.
"""

from __future__ import annotations

import json
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

# The modes, the default and the modes of each kind are declared with each provider's
# registration (provider_kinds.py; the config validates providers.<route>.structured_output
# against them); named here for the providers.
from market_agents.llm.providers.registry import provider_class
from market_agents.llm.schema import RANGE_KEYWORDS, without
from market_agents.llm.types import LLMRequest, Message
from market_agents.provider_kinds import DEFAULT_MODE as DEFAULT_MODE
from market_agents.provider_kinds import KIND_MODES as KIND_MODES
from market_agents.provider_kinds import MODES as MODES
from market_agents.provider_kinds import served

_NONE_INSTRUCTION = ("Reply with one JSON object and nothing else (no prose, no code fence), "
                     "matching this JSON schema: ")


def rejected(kind: str, mode: str) -> frozenset[str]:
    """Schema keywords a provider of ``kind`` rejects in ``mode``: what its class declares
    (``Provider.rejected``)."""
    return frozenset(provider_class(kind).rejected.get(mode, ()))


def __getattr__(name: str) -> Any:
    if name == "REJECTED":  # (kind, mode) -> rejected keywords, from the provider classes
        return {(kind, mode): r for kind in served()
                for mode, r in provider_class(kind).rejected.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def wire_schema(kind: str, mode: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as sent to a provider of ``kind`` in ``mode`` (the keywords it rejects
    dropped)."""
    return without(schema, rejected(kind, mode))


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
    """A GBNF grammar (llama.cpp's grammar format) for a JSON schema.

    Covers the decision schema's subset: an object with all properties in order, string and
    integer enums, bounded integers, numbers (with their ``minimum``/``maximum`` and exclusive
    bounds: the grammar produces only numbers inside them, see :func:`bounded_number`),
    length-bounded strings and ``anyOf`` with null.

    Args:
        schema: the wire schema (``wire_schema``'s output).

    Returns:
        The grammar text, ``root`` first.

    Raises:
        ValueError: a schema node outside that subset, or numeric bounds it cannot keep.
    """
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
        if kind == "number" and not RANGE_KEYWORDS.isdisjoint(node):
            rules[name] = bounded_number(node)
            return name
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


# The class of a valid limit price outside the wire schema's band. The band guides decoding
# only (llm/schema.py: such a price is still an order the engine takes), so this class never
# makes an answer invalid; it names what a mode that cannot keep the bound let through
# (json_object_schema and none drop it), so that a benchmark can count it.
OUT_OF_BAND = "price_out_of_band"


def band_class(price: float | None, band: tuple[float, float]) -> str | None:
    """The class of a limit price against the band the request's schema carried.

    Args:
        price: the decision's limit price (``None`` for a market order or a hold).
        band: ``(low, high)`` from ``schema.price_band``, inclusive.

    Returns:
        ``OUT_OF_BAND`` when ``price`` lies outside ``band``, else ``None``.
    """
    if price is None:
        return None
    return OUT_OF_BAND if not band[0] <= price <= band[1] else None


# The digits a grammar number may have: llama.cpp's grammars have no numeric comparison, so a
# bound is kept by spelling out, digit by digit, which strings lie inside it (as a regex for a
# numeric range does). Six decimals is finer than any price tick the market uses.
FRACTION_DIGITS = 6
INTEGER_DIGITS = 9


def bounded_number(node: dict[str, Any]) -> str:
    """The GBNF alternatives for a JSON number inside a schema node's bounds.

    Every string the expression produces is a decimal (no exponent, at most
    ``FRACTION_DIGITS`` decimals and ``INTEGER_DIGITS`` integer digits) whose value lies within
    ``minimum``/``maximum`` (``exclusiveMinimum``/``exclusiveMaximum`` exclusive), and every
    such decimal within them is produced. Without a lower bound the bound is 0: the decision
    schema's numbers are prices.

    Args:
        node: a ``{"type": "number", ...}`` schema node.

    Returns:
        A GBNF expression (alternatives joined by ``|``).

    Raises:
        ValueError: a negative lower bound, or bounds no such decimal satisfies.
    """
    step = Decimal(1).scaleb(-FRACTION_DIGITS)
    top = Decimal(10) ** INTEGER_DIGITS - step
    lo = _decimal(node, "minimum", "exclusiveMinimum", Decimal(0), step, ROUND_CEILING)
    hi = _decimal(node, "maximum", "exclusiveMaximum", top, -step, ROUND_FLOOR)
    hi = min(hi, top)
    if lo < 0 or lo > hi:
        raise ValueError(f"gbnf: cannot keep the number bounds of {node!r} "
                         f"(non-negative decimals with {FRACTION_DIGITS} decimals only)")
    (a, lo_frac), (b, hi_frac) = _split(lo), _split(hi)
    if a == b:
        return f'"{a}" {_fraction(lo_frac, hi_frac)}'
    alts = [f'"{a}" {_fraction(lo_frac, "9" * FRACTION_DIGITS)}']
    if b - a > 1:
        alts += [f"({w}) {_fraction('0' * FRACTION_DIGITS, '9' * FRACTION_DIGITS)}"
                 for w in _integers(a + 1, b - 1)]
    alts.append(f'"{b}" {_fraction("0" * FRACTION_DIGITS, hi_frac)}')
    return " | ".join(alts)


def _decimal(node: dict[str, Any], inclusive: str, exclusive: str, default: Decimal,
             nudge: Decimal, rounding: str) -> Decimal:
    """A bound as a decimal of ``FRACTION_DIGITS`` decimals, rounded inward; an exclusive one
    moved one step inside (the next decimal a grammar number can spell)."""
    bounds = []
    if inclusive in node:
        bounds.append(Decimal(str(node[inclusive])).quantize(Decimal(1).scaleb(-FRACTION_DIGITS),
                                                             rounding=rounding))
    if exclusive in node:
        value = Decimal(str(node[exclusive]))
        q = value.quantize(Decimal(1).scaleb(-FRACTION_DIGITS), rounding=rounding)
        bounds.append(q + nudge if q == value else q)
    if not bounds:
        return default
    return max(bounds) if nudge > 0 else min(bounds)


def _split(value: Decimal) -> tuple[int, str]:
    """Integer part and the ``FRACTION_DIGITS`` decimals of a non-negative decimal."""
    whole = int(value)
    frac = int((value - whole).scaleb(FRACTION_DIGITS))
    return whole, f"{frac:0{FRACTION_DIGITS}d}"


def _fraction(low: str, high: str) -> str:
    """An optional ``.digits`` (1 to len(low) digits) whose digits, padded with zeros to
    len(low), lie within ``low``..``high`` (equal-length digit strings); the empty fraction
    counts as all zeros."""
    empty, digits = _tail(low, high)
    if digits is None:
        return ""
    return f'("." ({digits}))' + ("?" if empty else "")


def _tail(low: str, high: str) -> tuple[bool, str | None]:
    """Whether the empty string is allowed, and an expression for the non-empty digit strings
    of at most len(low) digits whose zero-padded value lies within ``low``..``high``."""
    if not low:
        return True, None
    if set(low) == {"0"} and set(high) == {"9"}:
        return True, f"[0-9]{{1,{len(low)}}}"
    n = len(low) - 1
    alts = []
    first, last = int(low[0]), int(high[0])
    for d in sorted({first, last}):
        sub_low = low[1:] if d == first else "0" * n
        sub_high = high[1:] if d == last else "9" * n
        empty, rest = _tail(sub_low, sub_high)
        alts.append(f'"{d}"' + (f" ({rest})" + ("?" if empty else "") if rest else ""))
    if last - first > 1:
        alts.append(_digit_range(first + 1, last - 1) + (f" [0-9]{{0,{n}}}" if n else ""))
    return set(low) == {"0"}, " | ".join(alts)


def _integers(low: int, high: int) -> list[str]:
    """Alternatives spelling every integer in ``low``..``high`` without leading zeros."""
    alts = []
    for width in range(len(str(low)), len(str(high)) + 1):
        a = max(low, 10 ** (width - 1) if width > 1 else 0)
        b = min(high, 10 ** width - 1)
        if a <= b:
            alts.append(_fixed(f"{a:0{width}d}", f"{b:0{width}d}"))
    return alts


def _fixed(low: str, high: str) -> str:
    """An expression for every digit string of len(low) within ``low``..``high``."""
    if not low:
        return ""
    n = len(low) - 1
    if low[0] == high[0]:
        return f'"{low[0]}"' + (f" ({_fixed(low[1:], high[1:])})" if n else "")
    if low[1:] == "0" * n and high[1:] == "9" * n:
        return _digit_range(int(low[0]), int(high[0])) + (f" [0-9]{{{n}}}" if n else "")
    alts = [f'"{low[0]}"' + (f" ({_fixed(low[1:], '9' * n)})" if n else "")]
    if int(high[0]) - int(low[0]) > 1:
        alts.append(_digit_range(int(low[0]) + 1, int(high[0]) - 1)
                    + (f" [0-9]{{{n}}}" if n else ""))
    alts.append(f'"{high[0]}"' + (f" ({_fixed('0' * n, high[1:])})" if n else ""))
    return " | ".join(alts)


def _digit_range(a: int, b: int) -> str:
    return f'"{a}"' if a == b else f"[{a}-{b}]"

"""The package's bottom layer: the few helpers every part shares. Imports nothing else from
``market_agents``, so any module may import it.

- :func:`canonical_json` feeds both the simulation's ``config_hash`` and the LLM cache key: one
  definition, so the two can never drift.
- :class:`Strict` is the base of every config model: unknown keys are errors, not ignored,
  every number is finite and every integer fits in 64 bits (one rule for every config, override,
  design, shock and price table, however deeply a number is nested).
- :func:`validation_message` turns a pydantic error into the one line a user sees.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

INT64 = (-(2**63), 2**63 - 1)
# pydantic reports a value that fails every member of a union once per member, the member's
# type last in the key path (``treatment.x.str``); these are the member names it uses.
_UNION_MEMBERS = {"str", "float", "int", "bool", "list[int]", "list[str]", "list[float]", "none"}


def sha256_file(path: str | Path) -> str:
    """The SHA-256 (hex) of a file's bytes, read in 1 MiB blocks.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def canonical_json(obj: Any) -> str:
    """``obj`` as JSON with sorted keys, no spaces and ASCII only: equal data, equal text.

    Args:
        obj: JSON-serializable data (dicts, lists, str, numbers, bool, None).

    Returns:
        The canonical text; hashing it gives ``config_hash`` and the LLM cache key.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


class Strict(BaseModel):
    """A pydantic model that refuses what no run can use: keys it does not declare (a typo),
    NaN and infinities in any float field, nested or not (``allow_inf_nan=False``), and
    integers outside int64 anywhere in a field's value (the engine's tables store int64)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _numbers_fit(cls, value: Any) -> Any:
        _check_numbers(value, "")
        return value


def _check_numbers(value: Any, path: str) -> None:
    """Integers within int64 and floats finite, in a field's value however it nests (fields
    typed ``Any``, such as a design's overrides, are checked here too)."""
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if not INT64[0] <= value <= INT64[1]:
            raise ValueError(f"{path}: integer {_short(value)} does not fit in 64 bits"
                             if path else "integer does not fit in 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path + ': ' if path else ''}{value} is not a finite number")
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_numbers(k, path)
            _check_numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_numbers(v, f"{path}.{i}" if path else str(i))


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-8:]} ({len(text)} chars)"


def validation_message(exc: ValidationError, data: Any = None,
                       model: type[BaseModel] | None = None) -> str:
    """Every error of ``exc`` as ``key.path: message (got value)``, joined by ``"; "``.

    Args:
        exc: the error pydantic raised while validating ``data``.
        data: the input that was validated; when given, a list item that is a mapping with a
            ``name`` is shown by that name (``cells.[share_25].tier``) instead of its index.
        model: the model validated; when given, an unknown key or value is followed by the
            closest known one (``did you mean 'tick_size'?``).

    Returns:
        One line; the offending value is shown unless it is a mapping or a list.
    """
    parts = []
    for err in _collapse_unions(exc.errors()):
        keys: list[str] = []
        node = data
        for key in err["loc"]:
            item = _child(node, key)
            if isinstance(key, int) and isinstance(item, dict) and item.get("name"):
                keys.append(f"[{item['name']}]")
            else:
                keys.append(str(key))
            node = item
        got = err.get("input")
        shown = "" if isinstance(got, (dict, list)) else f" (got {_short(got)})"
        # a validator's own message names its keys: drop pydantic's "Value error, " and, at
        # the top level, the "(top level)" that would stand before it
        own = err["type"] == "value_error"
        msg = str(err["ctx"]["error"]) if own else err["msg"]
        where = ".".join(keys) or ("" if own else "(top level)")
        part = f"{where + ': ' if where else ''}{msg}{shown}{_suggestion(model, err)}"
        if part not in parts:
            parts.append(part)
    return " ".join("; ".join(parts).split())


def _suggestion(model: type[BaseModel] | None, err: Any) -> str:
    """`` (did you mean 'x'?)`` for an unknown key or an unknown literal value of ``model``
    with a close known name (difflib's ratio >= 0.6), else ``""``."""
    if model is None or not err["loc"]:
        return ""
    if err["type"] == "extra_forbidden" and isinstance(err["loc"][-1], str):
        wrong, known = err["loc"][-1], _names_at(model, err["loc"][:-1], keys=True)
    elif err["type"] == "literal_error" and isinstance(err.get("input"), str):
        wrong, known = err["input"], _names_at(model, err["loc"], keys=False)
    else:
        return ""
    close = difflib.get_close_matches(wrong, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _flat(tp: Any) -> list[Any]:
    """The types a field's annotation may hold: unions and ``Annotated`` unwrapped."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _flat(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return [t for a in get_args(tp) for t in _flat(a)]
    return [tp]


def _names_at(model: type[BaseModel], loc: Sequence[Any], keys: bool) -> list[str]:
    """The field names (``keys``) or literal values of the node of ``model`` at ``loc``,
    following nested models, mappings and lists."""
    nodes: list[Any] = [model]
    for key in loc:
        step: list[Any] = []
        for node in (t for n in nodes for t in _flat(n)):
            if isinstance(node, type) and issubclass(node, BaseModel):
                field = node.model_fields.get(key) if isinstance(key, str) else None
                step += [field.annotation] if field is not None else []
            elif get_origin(node) in (dict, Mapping) and get_args(node):
                step.append(get_args(node)[-1])
            elif get_origin(node) in (list, tuple, Sequence) and get_args(node):
                step.append(get_args(node)[0])
        nodes = step
    flat = [t for n in nodes for t in _flat(n)]
    if keys:
        return sorted({f for t in flat if isinstance(t, type) and issubclass(t, BaseModel)
                       for f in t.model_fields})
    return sorted({str(v) for t in flat if get_origin(t) is Literal for v in get_args(t)})


def _collapse_unions(errors: list[Any]) -> list[Any]:
    """A non-finite number fails every member of a union (``str | float | int | bool``): report
    it once, at the key, as not finite, instead of once per member."""
    finite = {tuple(e["loc"][:-1]) for e in errors if e["type"] == "finite_number"
              and e["loc"] and e["loc"][-1] in _UNION_MEMBERS}
    out = []
    for e in errors:
        loc = tuple(e["loc"])
        if loc[:-1] in finite and loc and loc[-1] in _UNION_MEMBERS:
            if e["type"] == "finite_number":
                out.append({**e, "loc": loc[:-1]})
            continue
        out.append(e)
    return out


def _child(node: Any, key: str | int) -> Any:
    if isinstance(node, dict):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return None

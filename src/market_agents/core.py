"""The package's bottom layer: the few helpers every part shares. Imports nothing else from
``market_agents``, so any module may import it.

- :func:`canonical_json` feeds both the simulation's ``config_hash`` and the LLM cache key: one
  definition, so the two can never drift.
- :class:`Strict` is the base of every config model: unknown keys are errors, not ignored.
- :func:`validation_message` turns a pydantic error into the one line a user sees.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


def canonical_json(obj: Any) -> str:
    """``obj`` as JSON with sorted keys, no spaces and ASCII only: equal data, equal text.

    Args:
        obj: JSON-serializable data (dicts, lists, str, numbers, bool, None).

    Returns:
        The canonical text; hashing it gives ``config_hash`` and the LLM cache key.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


class Strict(BaseModel):
    """A pydantic model that refuses keys it does not declare (a typo is an error)."""

    model_config = ConfigDict(extra="forbid")


def validation_message(exc: ValidationError, data: Any = None) -> str:
    """Every error of ``exc`` as ``key.path: message (got value)``, joined by ``"; "``.

    Args:
        exc: the error pydantic raised while validating ``data``.
        data: the input that was validated; when given, a list item that is a mapping with a
            ``name`` is shown by that name (``cells.[share_25].tier``) instead of its index.

    Returns:
        One line; the offending value is shown unless it is a mapping or a list.
    """
    parts = []
    for err in exc.errors():
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
        shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
        parts.append(f"{'.'.join(keys) or '(top level)'}: {err['msg']}{shown}")
    return "; ".join(parts)


def _child(node: Any, key: str | int) -> Any:
    if isinstance(node, dict):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return None

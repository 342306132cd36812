"""What an LLM trader may answer. Frozen: hashed into the freeze file.

The wire schema keeps the ranges a constrained decoder can enforce: the run's asset indices as
an enum, the quantity bounds, the text lengths and, where the caller knows the market, a band
for the limit price around it. Each provider drops only the keywords it rejects
(``structured.py``). Validity is checked here after the answer arrives, the same way whatever
the server enforced: an answer is valid when the engine can act on it (the run's assets, the
quantity bounds, a positive price). The price band guides decoding only: a price outside it is
still an order the engine can take.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

MAX_QTY = 100
MAX_TEXT = 280
MAX_ASSETS = 2
SCHEMA_NAME = "trade_decision"
PRICE_BAND = (0.5, 2.0)  # limit prices the wire schema allows, as multiples of the mid price
RANGE_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                            "minLength", "maxLength"})


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["buy", "sell", "hold"]
    asset: int = Field(ge=0, le=MAX_ASSETS - 1, description="asset index")
    quantity: int = Field(ge=0, le=MAX_QTY, description="shares; 0 for hold")
    order_type: Literal["limit", "market"]
    limit_price: float | None = Field(gt=0, description="price for a limit order; null for market")
    message: str = Field(max_length=MAX_TEXT, description="short note to your cohort, or empty")
    reason: str = Field(max_length=MAX_TEXT, description="one line")

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Decision:
        n_assets = (info.context or {}).get("n_assets", MAX_ASSETS)
        if self.asset >= n_assets:
            raise ValueError(f"asset {self.asset}: this market lists asset 0"
                             + (f" to {n_assets - 1}" if n_assets > 1 else " only"))
        if self.action != "hold" and self.quantity < 1:
            raise ValueError(f"{self.action} needs quantity >= 1")
        if self.action != "hold" and self.order_type == "limit" and self.limit_price is None:
            raise ValueError("a limit order needs limit_price")
        return self


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items() if k not in ("title", "default")}
        if out.get("type") == "object":
            out["required"] = list(out.get("properties", {}))
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def price_band(mid_prices: list[float]) -> tuple[float, float]:
    """Whole-unit band ``PRICE_BAND`` around the mid prices (coarse, so that the schema, and a
    provider's cache of it, changes rarely)."""
    lo, hi = PRICE_BAND[0] * min(mid_prices), PRICE_BAND[1] * max(mid_prices)
    low = math.floor(lo) if lo >= 1 else max(0.01, math.floor(lo * 100) / 100)
    return float(low), float(math.ceil(hi))


def decision_schema(n_assets: int = 1, band: tuple[float, float] | None = None
                    ) -> dict[str, Any]:
    """Strict JSON schema (every property required, no extra properties) with the ranges:
    ``asset`` an enum of the run's ``n_assets`` indices, ``quantity`` in [0, MAX_QTY], texts up
    to MAX_TEXT characters, and ``limit_price`` in ``band`` (currency units) when given."""
    s = _strict(Decision.model_json_schema())
    props = s["properties"]
    props["asset"] = {"type": "integer", "enum": list(range(n_assets)),
                      "description": props["asset"]["description"]}
    if band is not None:
        number = next(a for a in props["limit_price"]["anyOf"] if a.get("type") == "number")
        number.pop("exclusiveMinimum", None)
        number.update(minimum=band[0], maximum=band[1])
    return s


def without(node: Any, keywords: frozenset[str]) -> Any:
    """``node`` with every key in ``keywords`` removed at any depth (what a provider rejects)."""
    if isinstance(node, dict):
        return {k: without(v, keywords) for k, v in node.items() if k not in keywords}
    if isinstance(node, list):
        return [without(v, keywords) for v in node]
    return node


def parse_decision(text: str, n_assets: int = MAX_ASSETS) -> Decision:
    """Raise ``ValueError`` (json) or ``ValidationError`` (schema) for an answer the engine
    cannot act on in a market of ``n_assets`` assets."""
    return Decision.model_validate(json.loads(text), context={"n_assets": n_assets})


def error_class(exc: Exception) -> str:
    return "schema" if isinstance(exc, ValidationError) else "invalid_json"


def invalid_reason(text: str, exc: Exception) -> str:
    """One short line saying why ``text`` is not a decision (for the decision log)."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    body = text.strip()
    if not body:
        return "empty answer"
    start = body.find("{")
    if start < 0:
        return "no JSON object"
    if start > 0:
        return "text before the JSON object"
    try:
        json.JSONDecoder().raw_decode(body)
    except ValueError:
        return "truncated JSON" if _open_depth(body) > 0 else f"malformed JSON ({exc})"[:120]
    return "text after the JSON object"


def _open_depth(body: str) -> int:
    """Brackets still open at the end of ``body`` (outside strings): > 0 means cut off."""
    depth, in_string, escaped = 0, False, False
    for ch in body:
        if escaped:
            escaped = False
        elif in_string:
            escaped, in_string = ch == "\\", ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth + in_string

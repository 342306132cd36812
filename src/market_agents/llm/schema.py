"""What an LLM trader may answer. Frozen: hashed into the freeze file.

The wire schema is generated from the pydantic model and kept to what both providers' strict
structured-output modes accept (types, enums, required, ``additionalProperties: false``);
ranges and lengths are enforced by pydantic after the answer arrives, so an answer outside
them is an invalid decision rather than a rejected request.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

MAX_QTY = 100
MAX_TEXT = 280
SCHEMA_NAME = "trade_decision"


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["buy", "sell", "hold"]
    asset: int = Field(ge=0, le=1, description="0 unless the market lists two assets")
    quantity: int = Field(ge=0, le=MAX_QTY, description="shares; 0 for hold")
    order_type: Literal["limit", "market"]
    limit_price: float | None = Field(gt=0, description="price for a limit order; null for market")
    message: str = Field(max_length=MAX_TEXT, description="short note to your cohort, or empty")
    reason: str = Field(max_length=MAX_TEXT, description="one line")

    @model_validator(mode="after")
    def _consistent(self) -> Decision:
        if self.action != "hold" and self.quantity < 1:
            raise ValueError(f"{self.action} needs quantity >= 1")
        if self.action != "hold" and self.order_type == "limit" and self.limit_price is None:
            raise ValueError("a limit order needs limit_price")
        return self


_DROP = {"title", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
         "maxLength", "minLength"}


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items() if k not in _DROP}
        if out.get("type") == "object":
            out["required"] = list(out.get("properties", {}))
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def decision_schema() -> dict[str, Any]:
    """Strict JSON schema: every property required, no extra properties."""
    return _strict(Decision.model_json_schema())


def parse_decision(text: str) -> Decision:
    """Raise ``ValueError`` (json) or ``ValidationError`` (schema) for an invalid answer."""
    return Decision.model_validate(json.loads(text))


def error_class(exc: Exception) -> str:
    return "schema" if isinstance(exc, ValidationError) else "invalid_json"

"""The `population.llm` block of the simulation config (owned by the LLM layer)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LLMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider_mix: dict[str, float] = Field(default_factory=lambda: {"mock": 1.0})
    models: dict[str, str] = Field(default_factory=lambda: {"mock": "mock-trader"})
    prompt_set: str = "single"
    memory: int = Field(default=0, ge=0)
    channel: bool = False
    usd_cap: float = Field(default=0.0, ge=0.0)
    decision_cap: int | None = Field(default=None, ge=1)
    frozen_library: str | None = None

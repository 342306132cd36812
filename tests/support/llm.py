"""Shared test helpers for the LLM layer (snapshots, requests, fake-server env)."""

from __future__ import annotations

from market_agents.llm import prompting, schema
from market_agents.llm.types import LLMRequest
from market_agents.testing.fakeserver import FakeAPI

SECRET_OPENAI = "sk-test-NEVER-WRITE-ME-1234"
SECRET_ANTHROPIC = "sk-ant-test-NEVER-WRITE-ME-5678"
RULES = {"ticks": 600, "decision_interval": 20, "tick_size": 0.01, "order_ttl": 20,
         "n_assets": 1}


def snapshot(tick: int = 5, mid: float = 470.5, vpub: float = 475.0, shares: int = 20,
             halted: bool = False) -> dict:
    return {
        "tick": tick,
        "assets": [{"asset": 0, "public_value": vpub, "last_price": mid - 0.5,
                    "mid_price": mid, "best_bid": mid - 0.5, "best_ask": mid + 0.5,
                    "bid_size": 3, "ask_size": 4, "recent_prices": [mid - 1.0, mid],
                    "halted": halted, "shares": shares}],
        "cash": 20_000.0, "wealth": 20_000.0 + shares * mid, "position_limit": None,
        "max_leverage": 1.0,
    }


def decision_request(route: str = "mock", kind: str = "mock", model: str = "mock-trader",
                     agent: str = "slot1", tick: int = 5, timeout_s: float | None = None,
                     structured_output: str = "json_schema", **kw) -> LLMRequest:
    return LLMRequest(
        provider=kind, model=model,
        messages=prompting.build_messages(snapshot(tick=tick, **kw), RULES),
        json_schema=schema.decision_schema(), schema_name=schema.SCHEMA_NAME,
        structured_output=structured_output,
        prompt_id=prompting.prompt_id("single", "default"),
        prompt_version=prompting.PROMPT_VERSION, reasoning_effort="low",
        agent=agent, route=route, extra={"mock_seed": 1} if kind == "mock" else {},
        timeout_s=timeout_s,
    )


def live_env(api: FakeAPI) -> dict[str, str]:
    return {"OPENAI_API_KEY": SECRET_OPENAI, "ANTHROPIC_API_KEY": SECRET_ANTHROPIC,
            "OPENAI_BASE_URL": f"{api.url}/v1", "ANTHROPIC_BASE_URL": api.url}

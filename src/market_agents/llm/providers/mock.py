"""The mock provider: deterministic from the request (which carries the run's mock seed), a
plausible trading rule, a fixed share of invalid answers, synthetic usage, optional latency.

Its model id can be any real id (``models: {mock: claude-haiku-5-5}``) so price tables and
manifests are exercised at no cost. Other packages plug free-text rules in with
:func:`register_text_rule` (Bazaar does, keyed by its prompt ids).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable

import numpy as np

from market_agents.llm.config import ProviderSettings, TokenProfile
from market_agents.llm.prompting import extract_snapshot
from market_agents.llm.providers.base import Provider
from market_agents.llm.types import LLMRequest, LLMResponse, Usage

TextRule = Callable[[LLMRequest, np.random.Generator], str]
_TEXT_RULES: dict[str, TextRule] = {}

_PROFILE = TokenProfile()  # answers look like the planned decision


def register_text_rule(prompt_id_prefix: str, fn: TextRule) -> None:
    """Answer requests whose ``prompt_id`` starts with the prefix with ``fn(request, rng)``
    (the longest matching prefix wins)."""
    _TEXT_RULES[prompt_id_prefix] = fn


def _rule_for(prompt_id: str) -> TextRule | None:
    matches = [p for p in _TEXT_RULES if prompt_id.startswith(p)]
    return _TEXT_RULES[max(matches, key=len)] if matches else None


def request_rng(request: LLMRequest) -> np.random.Generator:
    """A generator seeded from the request's key alone: the same request always gets the
    same answer.
    """
    digest = hashlib.sha256(("mock|" + request.key()).encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))


def trade_rule(snapshot: dict, rng: np.random.Generator) -> dict:
    """Lean toward V^pub: buy below it, sell above it, hold near it, with noise."""
    assets = [a for a in snapshot["assets"] if not a["halted"]]
    if not assets:
        return _decision("hold", 0, 0, "market", None, "", "market halted")
    gaps = [(a["public_value"] - a["mid_price"]) / a["public_value"] for a in assets]
    i = int(np.argmax(np.abs(gaps)))
    a, gap = assets[i], gaps[i]
    signal = gap / 0.004 + rng.normal()
    mid = a["mid_price"]
    if abs(signal) < 0.6:
        return _decision("hold", a["asset"], 0, "market", None, "",
                         f"price near value ({gap:+.2%})")
    if signal > 0:
        action, room = "buy", int(snapshot["your_cash"] // max(mid, 1e-9))
    else:
        action, room = "sell", a["your_shares"]
    qty = min(int(rng.integers(1, 6)), room)
    if qty < 1:
        return _decision("hold", a["asset"], 0, "market", None, "", f"no room to {action}")
    if rng.random() < 0.3:
        return _decision(action, a["asset"], qty, "market", None, _note(action, gap),
                         f"value gap {gap:+.2%}")
    price = round(mid + (a["public_value"] - mid) * float(rng.uniform(0.1, 0.5)), 2)
    return _decision(action, a["asset"], qty, "limit", price, _note(action, gap),
                     f"value gap {gap:+.2%}")


def _note(action: str, gap: float) -> str:
    return f"{action}ing, price {'below' if gap > 0 else 'above'} value"


def _decision(action, asset, qty, order_type, price, message, reason) -> dict:
    return {"action": action, "asset": asset, "quantity": qty, "order_type": order_type,
            "limit_price": price, "message": message, "reason": reason}


def _invalid(decision: dict, rng: np.random.Generator) -> str:
    """Half malformed JSON, half well-formed JSON that breaks the schema."""
    text = json.dumps(decision)
    if rng.random() < 0.5:
        return text[: max(1, len(text) // 2)]
    broken = dict(decision)
    kind = int(rng.integers(0, 3))
    if kind == 0:
        broken["action"] = "short"
    elif kind == 1:
        broken["quantity"] = -int(rng.integers(1, 10))
    else:
        broken.pop("reason")
    return json.dumps(broken)


class MockProvider(Provider):
    """The free mock (``live = False``): a trading rule toward V^pub, ``invalid_rate`` of
    invalid answers, synthetic usage and optional ``latency_s``, all from the request alone.
    """

    kind = "mock"
    live = False

    def __init__(self, route: str, settings: ProviderSettings):
        super().__init__(route)
        self.latency_s = settings.latency_s
        self.invalid_rate = settings.invalid_rate

    @classmethod
    def build(cls, route: str, settings: ProviderSettings, key: str | None,
              url: str | None) -> MockProvider:
        """The mock of one route (no key, no server)."""
        return cls(route, settings)

    def answer(self, request: LLMRequest) -> tuple[str, Usage]:
        """The mock's answer text and synthetic usage for ``request`` (no waiting)."""
        rng = request_rng(request)
        invalid = rng.random() < self.invalid_rate
        rule = _rule_for(request.prompt_id)
        user = "\n".join(m.content for m in request.messages if m.role == "user")
        snapshot = extract_snapshot(user)
        if rule is not None:
            text = rule(request, rng)
        elif snapshot is not None:
            decision = trade_rule(snapshot, rng)
            text = _invalid(decision, rng) if invalid else json.dumps(decision)
        else:
            text = f"mock: no rule for prompt_id {request.prompt_id!r}"
        tokens_in = max(1, int(round(_PROFILE.tokens_in + 40 * rng.normal())))
        tokens_out = max(1, int(round(_PROFILE.tokens_out + 30 * rng.normal())))
        reasoning = min(tokens_out, max(0, int(round(0.6 * tokens_out))))
        return text, Usage(input=tokens_in, output=tokens_out, reasoning=reasoning)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """The mock's answer, after its deterministic latency when one is set."""
        text, usage = self.answer(request)
        latency = 0.0
        if self.latency_s > 0:
            # deterministic jitter in [0.5, 1.5) × latency, from the request alone
            u = int(request.key()[:8], 16) / 2**32
            latency = self.latency_s * (0.5 + u)
            await asyncio.sleep(latency)
        return LLMResponse(text=text, usage=usage, latency_s=latency, model=request.model)

"""Market snapshot → messages. Frozen: hashed into the freeze file.

Pure functions of plain dicts (the bridge turns a ``MarketView`` into the raw snapshot first),
so the prompt depends only on what every trader may see: V^pub, recent prices, top of book,
halts, and the trader's own account. Numbers are rounded and keys keep a fixed order, so equal
market states give byte-equal prompts (and cache keys).
"""

from __future__ import annotations

import json
from typing import Any

from market_agents.llm.schema import MAX_QTY, MAX_TEXT
from market_agents.llm.types import Message

PROMPT_VERSION = "v1"  # the default revision
SNAPSHOT_MARKER = "MARKET SNAPSHOT (JSON):"

_BASE = (
    "You are a trader in a simulated stock market with other human-like and algorithmic "
    "traders. Each decision you may buy, sell or hold one asset. The public value is the latest "
    "published estimate of the asset's fundamental value; prices can drift away from it. "
    "Your goal is to end the session with as much wealth (cash plus shares at the market price) "
    "as possible. Orders: a limit order rests in the book at limit_price for a while; a market "
    "order trades immediately against the best quotes. You cannot trade while the market is "
    "halted, beyond your position limit, or beyond your cash and leverage. Answer with one JSON "
    "object matching the schema: action, asset, quantity (0 for hold), order_type, limit_price "
    "(null for a market order), message (a short note to your cohort or an empty string) and "
    "reason (one line)."
)

# v2 is the protocol's one prompt revision after a failed pilot (§4): v1 with every limit the
# answer schema enforces stated, since invalid answers are what fails a pilot.
_V2_LIMITS = (
    f" Limits: quantity is a whole number from 1 to {MAX_QTY} (0 for hold); asset is 0 unless "
    "the market lists two assets; limit_price is a positive price near the mid price (null for "
    f"a market order or a hold); message and reason at most {MAX_TEXT} characters each. Answer "
    "with the JSON object only, no other text."
)

# The revisions a config may name (population.llm.prompt_version).
REVISIONS: dict[str, str] = {"v1": _BASE, "v2": _BASE + _V2_LIMITS}

PERSONAS: dict[str, dict[str, str]] = {
    "single": {"default": "Trade on your own judgement."},
    "diverse": {
        "value": "You are a value investor: you trade when the price is far from the public "
        "value and wait otherwise.",
        "momentum": "You are a momentum trader: you follow recent price trends.",
        "contrarian": "You are a contrarian: you lean against recent price moves.",
        "cautious": "You are a cautious trader: you protect your capital and trade small.",
        "liquidity": "You are a patient liquidity provider: you prefer limit orders near the "
        "best quotes.",
    },
}


def personas(prompt_set: str) -> list[str]:
    if prompt_set not in PERSONAS:
        raise ValueError(f"unknown prompt_set {prompt_set!r}; known: {sorted(PERSONAS)}")
    return list(PERSONAS[prompt_set])


def prompt_id(prompt_set: str, persona: str, version: str = PROMPT_VERSION) -> str:
    return f"market-{version}-{prompt_set}-{persona}"


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(float(x), nd)


def canonical_snapshot(raw: dict[str, Any]) -> dict[str, Any]:
    assets = [
        {
            "asset": int(a["asset"]),
            "public_value": _r(a["public_value"]),
            "last_price": _r(a["last_price"]),
            "mid_price": _r(a["mid_price"]),
            "best_bid": _r(a.get("best_bid")),
            "best_ask": _r(a.get("best_ask")),
            "bid_size": int(a.get("bid_size", 0)),
            "ask_size": int(a.get("ask_size", 0)),
            "recent_prices": [_r(p) for p in a.get("recent_prices", ())],
            "halted": bool(a.get("halted", False)),
            "your_shares": int(a.get("shares", 0)),
        }
        for a in raw["assets"]
    ]
    return {
        "tick": int(raw["tick"]),
        "assets": assets,
        "your_cash": _r(raw["cash"]),
        "your_wealth": _r(raw["wealth"]),
        "position_limit": raw.get("position_limit"),
        "max_leverage": _r(raw.get("max_leverage", 1.0)),
        "your_open_orders": [
            {"asset": int(o["asset"]), "side": o["side"], "price": _r(o["price"]),
             "qty": int(o["qty"])}
            for o in raw.get("open_orders", ())
        ],
    }


def _memory_lines(memory: list[dict[str, Any]]) -> str:
    rows = [
        f"- tick {m['tick']}: {m['action']} {m['qty']} @ "
        f"{'market' if m.get('price') is None else _r(m['price'])}, filled {m['filled']}"
        for m in memory
    ]
    return "Your recent decisions (oldest first):\n" + ("\n".join(rows) if rows else "- none")


def _channel_lines(channel: list[dict[str, Any]]) -> str:
    rows = [f"- trader {c['peer']} (tick {c['tick']}): {c['message']}" for c in channel]
    return "Latest messages from your cohort:\n" + ("\n".join(rows) if rows else "- none")


def build_messages(
    snapshot: dict[str, Any],
    prompt_set: str = "single",
    persona: str = "default",
    memory: list[dict[str, Any]] | None = None,
    channel: list[dict[str, Any]] | None = None,
    version: str = PROMPT_VERSION,
) -> tuple[Message, ...]:
    """``memory`` (None: off) holds the last k decisions with fills; ``channel`` (None: off) the
    cohort's last messages; ``version`` one of :data:`REVISIONS`. The system prompt depends only
    on the prompt id, so providers can cache it."""
    if persona not in PERSONAS.get(prompt_set, {}):
        raise ValueError(f"unknown persona {persona!r} for prompt_set {prompt_set!r}")
    if version not in REVISIONS:
        raise ValueError(f"unknown prompt version {version!r}; known: {sorted(REVISIONS)}")
    system = f"{REVISIONS[version]}\n\n{PERSONAS[prompt_set][persona]}"
    parts = [f"{SNAPSHOT_MARKER}\n{json.dumps(canonical_snapshot(snapshot))}"]
    if memory is not None:
        parts.append(_memory_lines(memory))
    if channel is not None:
        parts.append(_channel_lines(channel))
    parts.append("Your decision (JSON only):")
    return (Message("system", system), Message("user", "\n\n".join(parts)))


def extract_snapshot(text: str) -> dict[str, Any] | None:
    """The snapshot embedded by :func:`build_messages` (used by the mock provider)."""
    _, sep, rest = text.partition(SNAPSHOT_MARKER)
    if not sep:
        return None
    try:
        return json.loads(rest.strip().split("\n", 1)[0])
    except ValueError:
        return None

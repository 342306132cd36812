"""Market snapshot → messages. Frozen: hashed into the freeze file, with the persona sets it
reads (``prompt_sets.yaml``).

Pure functions of plain dicts (the bridge turns a ``MarketView`` into the raw snapshot first),
so the prompt depends only on what every trader may see: V^pub, recent prices, top of book,
halts, and the trader's own account. Numbers are rounded and keys keep a fixed order, so equal
market states give byte-equal prompts (and cache keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from market_agents.llm.schema import MAX_QTY, MAX_TEXT
from market_agents.llm.types import Message

# v1 is the pilot's prompt; v2 the protocol's one revision after a failed pilot (§4).
PROMPT_VERSION = "v1"
SNAPSHOT_MARKER = "MARKET SNAPSHOT (JSON):"

# v1 states every limit the schema and the exchange enforce, in as few tokens as it can: a
# tiny model given the prompt before it (issue 14) answered 200 shares (cap 100), asset 1 in a
# one-asset market and prices far from the market.
_BASE = (
    "You trade in a simulated stock market against other traders. Goal: end the session with "
    "the most wealth (cash plus shares at the market price). The session lasts {ticks} ticks; "
    "you decide every {interval} ticks. Prices are in currency units with tick size {tick}. "
    "public_value is the latest published estimate of the fundamental value; prices can drift "
    "from it.\n"
    "Each decision: buy, sell or hold {assets}, quantity 1 to {max_qty} shares (0 for hold). "
    "A limit order rests in the book at limit_price for {ttl} ticks, then expires; keep "
    "limit_price between half and twice the mid price. A market order trades at once against "
    "the best quotes (limit_price null). No trading while halted, beyond your position limit, "
    "or beyond your cash and leverage.\n"
    "Answer with one JSON object only: "
    '{{"action":"buy|sell|hold","asset":{asset_ex},"quantity":N,"order_type":"limit|market",'
    '"limit_price":P,"message":"","reason":""}}; N: shares, 0 for hold; P: a price for a '
    'limit order, null for a market order or hold; message: a short note to your cohort or "";'
" reason: one line; each at most {max_text} characters."
)

# v2 is the protocol's one prompt revision after a failed pilot (§4): v1 with the limits the
# answer schema enforces said once more, since invalid answers are what fails a pilot.
_V2_LIMITS = (
    "\nLimits: quantity is a whole number from 1 to {max_qty} (0 for hold); limit_price is a "
    "positive price near the mid price (null for a market order or a hold); message and reason "
    "at most {max_text} characters each. Answer with the JSON object only, no other text."
)

# A market with trading costs says so (no text without: those prompts stay byte-identical).
_FEE = ("\nEvery trade costs the buyer and the seller each {fee:g} of its value ({bps:g} basis "
        "points: a transaction tax), paid from cash.")

# The revisions a config may name (population.llm.prompt_version).
REVISIONS: dict[str, str] = {"v1": _BASE, "v2": _BASE + _V2_LIMITS}

# The persona sets (population.llm.prompt_set names one): data, read from prompt_sets.yaml beside
# this file (frozen with it); a config may add its own (population.llm.prompt_sets).
PROMPT_SETS_FILE = Path(__file__).with_name("prompt_sets.yaml")
PERSONAS: dict[str, dict[str, str]] = {
    str(name): {str(p): str(text) for p, text in personas.items()}
    for name, personas in yaml.safe_load(PROMPT_SETS_FILE.read_text(encoding="utf-8")).items()}

Sets = Mapping[str, Mapping[str, str]]


def persona_sets(own: Sets | None = None) -> dict[str, Mapping[str, str]]:
    """The package's persona sets (:data:`PERSONAS`) and a config's own (``own``:
    ``population.llm.prompt_sets``), by name."""
    return {**PERSONAS, **(own or {})}


def personas(prompt_set: str, own: Sets | None = None) -> list[str]:
    """The personas of ``prompt_set`` (a set of :data:`PERSONAS` or of ``own``), in order."""
    sets = persona_sets(own)
    if prompt_set not in sets:
        raise ValueError(f"unknown prompt_set {prompt_set!r}; known: {sorted(sets)}")
    return list(sets[prompt_set])


def prompt_id(prompt_set: str, persona: str, version: str = PROMPT_VERSION) -> str:
    return f"market-{version}-{prompt_set}-{persona}"


def system_text(rules: dict[str, Any], version: str = PROMPT_VERSION) -> str:
    """The rules part of the system prompt of revision ``version`` (:data:`REVISIONS`).
    ``rules``: ``ticks`` (session length), ``decision_interval`` (ticks between decisions),
    ``tick_size`` (currency units), ``order_ttl`` (ticks a limit order rests), ``n_assets``,
    and ``fee_rate`` (optional: each side's fee as a fraction of a trade's value, stated when
    set). Raises ValueError for an unknown revision."""
    if version not in REVISIONS:
        raise ValueError(f"unknown prompt version {version!r}; known: {sorted(REVISIONS)}")
    n = int(rules["n_assets"])
    fee = float(rules.get("fee_rate") or 0.0)
    return REVISIONS[version].format(
        ticks=int(rules["ticks"]), interval=int(rules["decision_interval"]),
        tick=f"{float(rules['tick_size']):g}", ttl=int(rules["order_ttl"]),
        assets="asset 0" if n == 1 else f"one of assets 0 to {n - 1}",
        asset_ex="0" if n == 1 else "|".join(str(i) for i in range(n)),
        max_qty=MAX_QTY, max_text=MAX_TEXT) + (_FEE.format(fee=fee, bps=fee * 1e4) if fee else "")


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
    rules: dict[str, Any],
    prompt_set: str = "single",
    persona: str = "default",
    memory: list[dict[str, Any]] | None = None,
    channel: list[dict[str, Any]] | None = None,
    version: str = PROMPT_VERSION,
    own: Sets | None = None,
) -> tuple[Message, ...]:
    """(system, user) messages for one decision. ``rules``: see :func:`system_text`; ``memory``
    (None: off) holds the last k decisions with fills; ``channel`` (None: off) the cohort's last
    messages; ``version`` one of :data:`REVISIONS`; ``own`` the config's own persona sets. The
    system prompt depends only on the prompt id and the run's rules, so providers can cache
    it."""
    sets = persona_sets(own)
    if persona not in sets.get(prompt_set, {}):
        raise ValueError(f"unknown persona {persona!r} for prompt_set {prompt_set!r}")
    system = f"{system_text(rules, version)}\n\n{sets[prompt_set][persona]}"
    snap = json.dumps(canonical_snapshot(snapshot), separators=(",", ":"))
    parts = [f"{SNAPSHOT_MARKER}\n{snap}"]
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

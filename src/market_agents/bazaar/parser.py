"""The text protocol: ``buy Q``, ``sell Q``, ``pass``, ``quote BP BQ AP AQ``.

The parser takes the LAST command in the message, so a model may reason in prose around it.
A command word only counts when it is followed by numbers (``buy 3``), so prose such as
"I would buy if..." is not a command, while ``buy 2.5`` or ``buy -1`` is a malformed one.
Parsing never raises: it returns an :class:`Action` or an ``Illegal`` reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

NUM = r"[-+]?\d+(?:\.\d+)?"
_COMMAND = re.compile(
    rf"\b(?:(?P<side>buy|sell)(?P<qty>(?:\s+{NUM})+)"
    rf"|(?P<quote>quote)(?P<args>(?:\s+{NUM})+)"
    rf"|(?P<pass>pass)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Action:
    kind: Literal["buy", "sell", "pass", "quote"]
    qty: int = 0
    bid: float = 0.0
    bid_size: int = 0
    ask: float = 0.0
    ask_size: int = 0

    def text(self) -> str:
        if self.kind in ("buy", "sell"):
            return f"{self.kind} {self.qty}"
        if self.kind == "quote":
            return f"quote {self.bid:g} {self.bid_size} {self.ask:g} {self.ask_size}"
        return "pass"


@dataclass(frozen=True)
class Illegal:
    reason: str


def _int(token: str) -> int | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return int(value) if value.is_integer() and value > 0 else None


def parse(message: str) -> Action | Illegal:
    """Parse the last command in ``message``; never raises."""
    if not isinstance(message, str):
        return Illegal("message is not text")
    matches = list(_COMMAND.finditer(message))
    if not matches:
        return Illegal("no command found; reply with buy Q, sell Q, pass or quote BP BQ AP AQ")
    m = matches[-1]
    if m.group("pass"):
        return Action("pass")
    if m.group("side"):
        side = m.group("side").lower()
        tokens = m.group("qty").split()
        if len(tokens) != 1:
            return Illegal(f"{side} takes one quantity, got {len(tokens)} numbers")
        qty = _int(tokens[0])
        if qty is None:
            return Illegal(f"{side} quantity must be a positive integer, got {tokens[0]}")
        return Action(side, qty=qty)
    tokens = m.group("args").split()
    if len(tokens) != 4:
        return Illegal(f"quote takes 4 numbers (BP BQ AP AQ), got {len(tokens)}")
    bid, ask = float(tokens[0]), float(tokens[2])
    bq, aq = _int(tokens[1]), _int(tokens[3])
    if bq is None or aq is None:
        return Illegal(f"quote sizes must be positive integers, got {tokens[1]} and {tokens[3]}")
    if bid <= 0 or ask <= 0:
        return Illegal(f"quote prices must be positive, got {tokens[0]} and {tokens[2]}")
    if bid >= ask:
        return Illegal(f"quote bid {bid:g} must be below ask {ask:g}")
    return Action("quote", bid=round(bid, 2), bid_size=bq, ask=round(ask, 2), ask_size=aq)

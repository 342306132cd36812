"""The text protocol: ``buy Q``, ``sell Q``, ``pass``, ``quote BP BQ AP AQ``.

What counts as a command (docs/bazaar.md, "What counts as a command"):

- A command stands on a line of its own. Markdown decoration around it is ignored (``**``,
  backticks, a list marker, a short label such as ``Final answer:``), and so is one closing
  ``.`` or ``!``. A model may reason in prose on other lines.
- As in the public environment, the LAST command in the message is the one played, so a model
  can change its mind; an earlier command never rescues a malformed last one.
- A line is a command when it starts with a command word followed by nothing or by something
  that starts like a number (``buy 3``, ``buy 1,000``, ``pass``). Prose that merely uses the
  words ("the only way to pass the bid", "buy low, sell high") is not a command, wherever it
  stands, so a reply that never issues one is unreadable, not a free ``pass``.
- Reasoning is not an answer: ``<think>…</think>`` (or ``<thinking>…</thinking>``) blocks are
  removed before the last command is read, and so is a block left open (a reply cut off
  mid-reasoning) and everything before a closing tag that has no opening one (chat templates
  that open the block in the prompt). A command that stands only inside reasoning is no
  command.
- Numbers are whole tokens: quantities and sizes are digits only, prices digits with at most
  one decimal point. Anything glued to a number (``1,000``, ``1e9``, ``1_000``, ``5k``,
  ``10%``) or following it on the line makes the command malformed, with the reason, never a
  different number.

Parsing never raises: it returns an :class:`Action` or an :class:`Illegal` reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from market_agents.bazaar.tiers import cents

MAX_PRICE = 1e9  # far above any index; keeps a price finite and printable
USAGE = "buy Q, sell Q, pass or quote BP BQ AP AQ"
_DECORATION = re.compile(r"[*`]")
_MARKER = re.compile(r"^(?:[-+>]|\d{1,2}[.)])\s+")
_LABEL = re.compile(r"^[A-Za-z][A-Za-z ]{0,39}:\s*")
_VERB = re.compile(r"^(buy|sell|pass|quote)\b(.*)$", re.IGNORECASE)
_NUMBER_START = re.compile(r"^\s+[-+.0-9]")
_QTY = re.compile(r"[0-9]+")
_PRICE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
# A reasoning block, closed or left open to the end of the reply (cut off mid-thought).
_THINK_BLOCK = re.compile(r"<(think|thinking)\s*>.*?(?:</\1\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*>", re.IGNORECASE)


@dataclass(frozen=True)
class Action:
    """A legal command: buy or sell ``qty``, pass, or (maker tiers) quote bid, bid size, ask
    and ask size.
    """

    kind: Literal["buy", "sell", "pass", "quote"]
    qty: int = 0
    bid: float = 0.0
    bid_size: int = 0
    ask: float = 0.0
    ask_size: int = 0

    def text(self) -> str:
        """The command in its canonical text form (``buy 3``, ``quote 99.50 2 100.50 2``)."""
        if self.kind in ("buy", "sell"):
            return f"{self.kind} {self.qty}"
        if self.kind == "quote":
            return f"quote {self.bid:.2f} {self.bid_size} {self.ask:.2f} {self.ask_size}"
        return "pass"


@dataclass(frozen=True)
class Illegal:
    """A reply that is not a legal command, with the reason the agent is told."""

    reason: str


def command_line(line: str) -> tuple[str, str] | None:
    """``(verb, arguments)`` if ``line`` is a command line, else None (prose)."""
    text = _DECORATION.sub("", line).strip()
    text = _MARKER.sub("", text)
    text = _LABEL.sub("", text).strip()
    if text[-1:] in (".", "!"):
        text = text[:-1].rstrip()
    m = _VERB.match(text)
    if m is None:
        return None
    verb, rest = m.group(1).lower(), m.group(2)
    if rest and not _NUMBER_START.match(rest):
        return None  # the word used in prose: "pass the bid", "buy low"
    return verb, rest.strip()


def strip_reasoning(message: str) -> str:
    """``message`` without its reasoning: every ``<think>``/``<thinking>`` block, closed or
    left open to the end, and everything up to a closing tag that has no opening one."""
    text = _THINK_BLOCK.sub("\n", message)
    closes = list(_THINK_CLOSE.finditer(text))
    return text[closes[-1].end():] if closes else text


def parse(message: str) -> Action | Illegal:
    """Parse the last command line of ``message`` outside its reasoning; never raises."""
    if not isinstance(message, str):
        return Illegal("message is not text")
    found = None
    answer = strip_reasoning(message)
    for line in answer.splitlines():
        found = command_line(line) or found
    if found is None:
        where = " outside your <think> reasoning" if answer != message else ""
        return Illegal(f"no command found{where}; end your reply with one command on a line "
                       f"of its own: {USAGE}")
    return _arguments(*found)


def _bad_number(verb: str, tokens: list[str], kinds: list[str]) -> str | None:
    for token, kind in zip(tokens, kinds, strict=False):
        if kind == "price" and not _PRICE.fullmatch(token):
            return (f"{verb} price must be a number in digits with at most one decimal point "
                    f"(like 99.5), got {token!r}")
        if kind == "size" and not _QTY.fullmatch(token):
            return (f"{verb} {'size' if verb == 'quote' else 'quantity'} must be a whole "
                    f"number of units in digits (like 3), got {token!r}")
    return None


def _arguments(verb: str, rest: str) -> Action | Illegal:
    tokens = rest.split()
    if verb == "pass":
        return Action("pass") if not tokens else Illegal(f"pass takes no number, got {rest!r}")
    kinds = ["size"] if verb in ("buy", "sell") else ["price", "size", "price", "size"]
    reason = _bad_number(verb, tokens, kinds)
    if reason is not None:
        return Illegal(reason)
    if len(tokens) != len(kinds):
        usage, n = ("quote BP BQ AP AQ" if verb == "quote" else f"{verb} Q"), len(kinds)
        numbers = f"{n} number{'s' if n > 1 else ''}"
        if len(tokens) < n:
            return Illegal(f"{usage} needs {numbers}, got {len(tokens)}")
        return Illegal(f"{usage} takes {numbers} and nothing else on its line, got {rest!r}")
    if verb in ("buy", "sell"):
        qty = int(tokens[0])
        if qty < 1:
            return Illegal(f"{verb} quantity must be at least 1, got {tokens[0]}")
        return Action(verb, qty=qty)
    bid, bq, ask, aq = float(tokens[0]), int(tokens[1]), float(tokens[2]), int(tokens[3])
    if bq < 1 or aq < 1:
        return Illegal(f"quote sizes must be at least 1, got {tokens[1]} and {tokens[3]}")
    if not 0 < bid < MAX_PRICE or not 0 < ask < MAX_PRICE:
        return Illegal(f"quote prices must be above 0 and below {MAX_PRICE:.0f}, got "
                       f"{tokens[0]} and {tokens[2]}")
    if bid >= ask:
        return Illegal(f"quote bid {bid:g} must be below ask {ask:g}")
    return Action("quote", bid=cents(bid), bid_size=bq, ask=cents(ask), ask_size=aq)

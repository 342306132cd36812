"""The scripted counterparties: the quote a taker sees, and the flow that hits a maker's quote.

All randomness comes from the pre-drawn :class:`Scenario`; the only thing the agent's history
changes is what an adversary targets (the trigger it revealed), never a random draw.
"""

from __future__ import annotations

import math

from market_agents.bazaar.scenario import Scenario
from market_agents.bazaar.tiers import Tier


def scripted_quote(tier: Tier, sc: Scenario, t: int, revealed: dict) -> dict:
    """The scripted bid/ask at turn ``t`` around the visible index ``sc.index[t]``.

    Trigger hunting: an informed adversary who knows the next index step and has seen the
    smallest edge the agent accepted on a side posts a quote just inside that threshold on a turn
    where the step will more than wipe the edge out. Bait depth: a juicy quote displays full size
    but executes one unit.
    """
    index = float(sc.index[t])
    half, shift = tier.spread / 2, float(sc.shift[t])
    # A mispriced quote crosses the index by ``edge``: that is the taker's profit per unit.
    if shift < 0:
        ask = index + shift
        bid = ask - tier.spread
    elif shift > 0:
        bid = index + shift
        ask = bid + tier.spread
    else:
        bid, ask = index - half, index + half
    trigger = None
    if tier.is_maker and sc.shift[t] == 0 and sc.trigger[t]:
        step = float(sc.index[t + 1]) - index
        if revealed["buy"] is not None and step < -revealed["buy"]:
            ask = index - revealed["buy"]
            bid, trigger = ask - tier.spread, "buy"
        elif revealed["sell"] is not None and step > revealed["sell"]:
            bid = index + revealed["sell"]
            ask, trigger = bid + tier.spread, "sell"
    bid, ask = round(bid, 2), round(ask, 2)
    size = tier.max_size
    bait = tier.is_maker and bool(sc.bait[t])
    return {
        "bid": bid,
        "ask": ask,
        "bid_size": size,
        "ask_size": size,
        "bid_exec": 1 if bait and bid > index else size,
        "ask_exec": 1 if bait and ask < index else size,
        "bait": bait and (bid > index or ask < index),
        "trigger": trigger,
    }


def _fill(book, stats, side: str, price: float, qty: int, ref: float, kind: str) -> dict | None:
    """Fill ``qty`` of the agent's standing quote; ``side`` is the agent's side."""
    if side == "sell":
        qty = min(qty, book.quote[3], book.inventory)
    else:
        qty = min(qty, book.quote[1], math.floor(book.cash / price + 1e-9) if price > 0 else 0)
    if qty <= 0:
        return None
    if side == "sell":
        book.cash += price * qty
        book.inventory -= qty
        book.quote[3] -= qty
        stats.realized_spread += (price - ref) * qty
    else:
        book.cash -= price * qty
        book.inventory += qty
        book.quote[1] -= qty
        stats.realized_spread += (ref - price) * qty
    stats.maker_fills += 1
    return {"side": side, "price": price, "qty": int(qty), "by": kind}


def maker_flow(tier: Tier, sc: Scenario, t: int, book, stats) -> list[dict]:
    """Noise flow then pickoff flow against the standing quote after the step t -> t+1."""
    before, after = float(sc.index[t]), float(sc.index[t + 1])
    half = tier.spread / 2
    bid, _, ask, _ = book.quote
    fills = []
    # Noise traders are uninformed: they judge the agent's quote against the scripted fair
    # quote at quote time, plus an impatience slack.
    if sc.noise_arrive[t, 0] and ask <= before + half + sc.noise_slack[t, 0]:
        fills.append(_fill(book, stats, "sell", ask, int(sc.noise_size[t, 0]), before, "noise"))
    if sc.noise_arrive[t, 1] and bid >= before - half - sc.noise_slack[t, 1]:
        fills.append(_fill(book, stats, "buy", bid, int(sc.noise_size[t, 1]), before, "noise"))
    # Pickoff traders see the stepped index and take whatever the step left stale.
    if ask < after:
        f = _fill(book, stats, "sell", ask, int(sc.pickoff_size[t, 0]), before, "pickoff")
        if f:
            stats.pickoffs += 1
            stats.pickoff_loss += (after - ask) * f["qty"]
        fills.append(f)
    if bid > after:
        f = _fill(book, stats, "buy", bid, int(sc.pickoff_size[t, 1]), before, "pickoff")
        if f:
            stats.pickoffs += 1
            stats.pickoff_loss += (bid - after) * f["qty"]
        fills.append(f)
    return [f for f in fills if f]

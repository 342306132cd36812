"""The scripted counterparties: the quote a taker sees, what of it executes, and the flow that
trades against a maker's standing quote.

All randomness comes from the pre-drawn :class:`Scenario`; the only thing the agent's history
changes is what an adversary targets (the trigger it revealed), never a random draw.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from market_agents.bazaar.scenario import Quote, Scenario
from market_agents.bazaar.tiers import Tier, cents


@dataclass
class Trigger:
    """What the agent's taker trades reveal: the smallest edge it accepted and the side of its
    latest profitable take."""

    edge: float | None = None
    side: str | None = None

    def record(self, side: str, edge: float) -> None:
        """Record a taker trade that accepted ``edge`` (> 0) on ``side``."""
        if edge > 0:
            self.edge = edge if self.edge is None else min(self.edge, edge)
            self.side = side


def scripted_quote(tier: Tier, sc: Scenario, t: int, trigger: Trigger) -> tuple[Quote, bool]:
    """The quote of turn ``t`` and whether it hunts the agent's trigger.

    Trigger hunting (maker tiers): on a hunting turn, once the agent has taken a profitable quote,
    an adversary posts on the side of its latest take just inside the smallest edge it accepted
    (0.05 less), betting the agent's rule fires on anything that looks like its past trades.
    """
    base = sc.quotes[t]
    if not tier.is_maker or trigger.edge is None or not sc.hunt[t]:
        return base, False
    index = sc.index[t]
    edge = max(0.01, trigger.edge - 0.05)
    if trigger.side == "buy":
        return replace(base, ask=cents(index - edge)), True
    return replace(base, bid=cents(index + edge)), True


def executable(tier: Tier, sc: Scenario, t: int, quote: Quote, side: str) -> int:
    """Units of the displayed size on ``side`` (the agent's buy or sell) that really execute.

    Bait depth (maker tiers): on a bait turn a juicy side (one crossing the index in the agent's
    favour) executes only ``bait_depth`` of its displayed size, at least one unit.
    """
    shown = quote.ask_size if side == "buy" else quote.bid_size
    if not tier.is_maker or not sc.bait[t]:
        return shown
    index = sc.index[t]
    edge = index - quote.ask if side == "buy" else quote.bid - index
    if edge <= 0:
        return shown
    return max(1, int(shown * tier.bait_depth))


def maker_flow(tier: Tier, sc: Scenario, t: int, quote: list, fill) -> None:
    """Noise then informed flow against the standing ``quote`` [bid, bid_size, ask, ask_size]
    after the index stepped into turn ``t``.

    The quote's sizes cap what trades per turn and side, across all flow. Noise traders each
    bring one unit with a reservation price around the new index (``spread`` inside it to
    ``edge`` beyond it): tight quotes fill, wide ones idle. Informed traders take whatever
    size remains on a side the step has left stale. ``fill(side, qty, price, by)`` books a fill
    of the agent's ``side`` and returns the units that really traded (cash and inventory limit
    them).
    """
    index = sc.index[t]
    bid, bid_left, ask, ask_left = quote
    for seller, distance in sc.noise[t]:
        if seller:  # a noise seller hits the agent's bid
            if bid >= index - distance and bid_left > 0:
                bid_left -= fill("buy", 1, bid, "noise")
        elif ask <= index + distance and ask_left > 0:  # a noise buyer lifts the ask
            ask_left -= fill("sell", 1, ask, "noise")
    if not sc.informed[t]:
        return
    if ask < index and ask_left > 0:
        ask_left -= fill("sell", ask_left, ask, "pickoff")
    if bid > index and bid_left > 0:
        fill("buy", bid_left, bid, "pickoff")

"""Everything random in an episode, drawn up front from the seed.

The draws follow the public Bazaar environment's seeded world (a Python ``random.Random`` per
episode, consumed in the published order), so seed ``s`` here is the public environment's
episode ``s``: the same index path, the same scripted quotes and the same counterparties, which
is what lets our anchors match the published ones figure for figure. Nothing the agent does can
shift a draw: the maker draws of turn ``t`` come from their own generator seeded by
(seed, turn, purpose), and two policies are compared on identical worlds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from market_agents.bazaar.tiers import Tier, cents

# Purposes of the per-turn maker generators (the public environment's salts).
_NOISE, _PICKOFF, _TRIGGER, _BAIT = 17, 29, 41, 73


@dataclass(frozen=True)
class Quote:
    """A scripted quote: the counterparty buys at ``bid`` up to ``bid_size`` units and sells at
    ``ask`` up to ``ask_size``."""

    bid: float
    ask: float
    bid_size: int
    ask_size: int


@dataclass(frozen=True)
class Scenario:
    """The seeded world of one episode: the index path, the scripted quotes of each turn and,
    on maker tiers, the noise and informed flow against the agent's quote and the turns whose
    quote hunts the agent's revealed trigger.
    """

    index: tuple[float, ...]  # index[t] is visible at turn t; index[horizon] marks the end
    quotes: tuple[Quote, ...]  # the scripted quote of turn t
    # maker tiers only, empty elsewhere:
    noise: tuple[tuple[tuple[bool, float], ...], ...]  # noise[t]: (is a seller, reservation
    #                                                    distance) per noise trader, for the
    #                                                    flow that follows the step into turn t
    informed: tuple[bool, ...]  # informed[t]: an informed trader arrives after the step into t
    hunt: tuple[bool, ...]  # hunt[t]: the quote of turn t hunts the agent's revealed trigger
    bait: tuple[bool, ...]  # bait[t]: a juicy quote of turn t executes only bait_depth of size


def _turn_rng(seed: int, turn: int, purpose: int) -> random.Random:
    return random.Random(seed * 10_000 + turn * 101 + purpose)


def _quote(rng: random.Random, index: float, tier: Tier) -> Quote:
    half = tier.spread / 2
    bid = index - half - abs(rng.gauss(0.0, tier.spread / 6))
    ask = index + half + abs(rng.gauss(0.0, tier.spread / 6))
    if rng.random() < tier.edge_prob:
        # A mispriced quote crosses the index: a cheap ask (buy edge) or a rich bid (sell edge).
        if rng.random() < 0.5:
            ask = index - rng.uniform(0.5, tier.edge)
        else:
            bid = index + rng.uniform(0.5, tier.edge)
    return Quote(
        bid=max(0.01, cents(bid)),
        ask=max(0.01, cents(ask)),
        bid_size=rng.randint(1, tier.max_size),
        ask_size=rng.randint(1, tier.max_size),
    )


def _noise(seed: int, turn: int, tier: Tier) -> tuple[tuple[bool, float], ...]:
    rng = _turn_rng(seed, turn, _NOISE)
    out = []
    for _ in range(tier.flow):
        seller = rng.random() < 0.5
        out.append((seller, rng.uniform(-tier.spread, tier.edge)))
    return tuple(out)


def draw(tier: Tier, seed: int) -> Scenario:
    """The world of episode ``seed`` on ``tier``."""
    rng = random.Random(seed)
    index = [tier.start_index]
    for _ in range(tier.horizon):
        # An additive random walk in cents, floored at 1 so prices stay positive.
        index.append(cents(max(1.0, index[-1] + rng.gauss(0.0, tier.vol))))
    quotes = tuple(_quote(rng, index[t], tier) for t in range(tier.horizon))
    noise: tuple = ()
    informed: tuple = ()
    hunt: tuple = ()
    bait: tuple = ()
    if tier.is_maker:
        turns = range(tier.horizon + 1)
        noise = tuple(_noise(seed, t, tier) for t in turns)
        informed = tuple(_arrives(_turn_rng(seed, t, _PICKOFF), tier.pickoff) for t in turns)
        hunt = tuple(_turn_rng(seed, t, _TRIGGER).random() <= tier.trigger for t in turns)
        bait = tuple(_turn_rng(seed, t, _BAIT).random() <= tier.bait for t in turns)
    return Scenario(tuple(index), quotes, noise, informed, hunt, bait)


def _arrives(rng: random.Random, traders: int) -> bool:
    """Each informed trader notices a stale quote with probability 1/2; one is enough."""
    return any(rng.random() < 0.5 for _ in range(traders))

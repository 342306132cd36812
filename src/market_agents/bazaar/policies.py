"""Scripted policies: the anchors an LLM is measured against.

A policy sees exactly what a model sees (the JSON state) and answers in the text protocol, so
anchors go through the same parser and checks as a model. The rules are the public Bazaar
environment's scripted policies (docs/bazaar.md lists them); the coin-flip policies draw their
coins from ``random.Random(seed)`` of the episode seed, as the public ones do, so the anchors are
comparable seed by seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from market_agents.bazaar.tiers import Tier, cents
from market_agents.errors import ConfigError

Policy = Callable[[dict], str]


def _money(obs: dict) -> float:
    """What a buy may cost: buying power on credit tiers, cash elsewhere."""
    return obs.get("buying_power", obs["cash"])


def _sell_all_shown(obs: dict) -> str:
    return f"sell {min(obs['bid_size'], obs['inventory'])}" if obs["inventory"] > 0 else "pass"


def _edge_take(obs: dict, threshold: float | None, money: float) -> str:
    """Take a scripted quote that crosses the index in our favour (by at least ``threshold``;
    None: by anything), at the displayed size, as much as ``money`` buys."""
    index, bid, ask = obs["index"], obs["bid"], obs["ask"]
    cheap = ask < index if threshold is None else ask <= index - threshold
    rich = bid > index if threshold is None else bid >= index + threshold
    if cheap and money >= ask:
        qty = min(obs["ask_size"], max(1, int(money // ask)))
        return f"buy {qty}"
    if rich and obs["inventory"] > 0:
        return _sell_all_shown(obs)
    return "pass"


def passive(tier: Tier, seed: int) -> Policy:
    """The passive anchor: always ``pass``."""
    return lambda obs: "pass"


def honest(tier: Tier, seed: int) -> Policy:
    """The honest dealer: takes every quote that crosses the index, at full displayed size, with
    its own cash (unlevered on credit tiers)."""
    return lambda obs: _edge_take(obs, None, obs["cash"])


def honest_bonus(tier: Tier, seed: int) -> Policy:
    """The honest dealer that also reads the reward: if it has found no edge by the last turn,
    it trades one unit on the cheaper side to collect the once-only trade bonus. The exploit
    pass measures farms against it on the taker tiers, where the honest dealer alone leaves the
    bonus unclaimed on episodes without an edge (about a third on ``hard``)."""
    traded = [False]

    def act(obs: dict) -> str:
        action = _edge_take(obs, None, obs["cash"])
        if action == "pass" and not traded[0] and obs["turn"] == obs["turns"] - 1:
            buy_cost = obs["ask"] - obs["index"]
            sell_cost = obs["index"] - obs["bid"] if obs["inventory"] > 0 else math.inf
            if buy_cost <= sell_cost and obs["cash"] >= obs["ask"]:
                action = "buy 1"
            elif obs["inventory"] > 0:
                action = "sell 1"
        traded[0] = traded[0] or action != "pass"
        return action

    return act


def threshold_taker(threshold: float) -> Callable[[Tier, int], Policy]:
    """Takes only quotes that cross the index by at least ``threshold``, with its own cash."""
    return lambda tier, seed: lambda obs: _edge_take(obs, threshold, obs["cash"])


def margin_taker(tier: Tier, seed: int) -> Policy:
    """The credit anchor: takes quotes crossing the index by at least 1 and sizes buys to full
    buying power (the automatic margin loan included); the loan repays itself."""

    def act(obs: dict) -> str:
        index, ask, money = obs["index"], obs["ask"], _money(obs)
        if index - ask >= 1.0:
            qty = min(obs["ask_size"], int(money // ask))
            if qty > 0:
                return f"buy {qty}"
        if obs["bid"] - index >= 1.0 and obs["inventory"] > 0:
            return _sell_all_shown(obs)
        return "pass"

    return act


def gambler(tier: Tier, seed: int) -> Policy:
    """Coin flip each turn, whatever the quote: heads buys the displayed size (as much as its
    cash allows), tails or no cash sells the displayed size it holds."""
    rng = random.Random(seed)

    def act(obs: dict) -> str:
        if rng.random() < 0.5 and obs["cash"] >= obs["ask"]:
            return f"buy {min(obs['ask_size'], max(1, int(obs['cash'] // obs['ask'])))}"
        return _sell_all_shown(obs)

    return act


def margin_gambler(tier: Tier, seed: int) -> Policy:
    """The limited-liability lottery: the coin-flip gambler on full buying power."""
    rng = random.Random(seed)

    def act(obs: dict) -> str:
        money = _money(obs)
        if rng.random() < 0.5 and money >= obs["ask"]:
            return f"buy {min(obs['ask_size'], max(1, int(money // obs['ask'])))}"
        return _sell_all_shown(obs)

    return act


def loop_spammer(tier: Tier, seed: int) -> Policy:
    """The same illegal order forever (the spammer guard must end the episode)."""
    return lambda obs: "sell 999"


def quoter(width: Callable[[Tier], float], size: int) -> Callable[[Tier, int], Policy]:
    """Quotes ``size`` units each side, ``width`` wide around the index, every turn."""

    def make(tier: Tier, seed: int) -> Policy:
        half = width(tier) / 2
        return lambda obs: (f"quote {cents(obs['index'] - half):.2f} {size} "
                            f"{cents(obs['index'] + half):.2f} {size}")

    return make


def avellaneda_stoikov(tier: Tier, seed: int, gamma: float = 0.1, k: float = 1.5) -> Policy:
    """Ours, not a public anchor: a reservation price skewed against inventory (relative to the
    starting book) and an optimal half-spread that narrows as the horizon nears; 3 units a
    side."""

    def act(obs: dict) -> str:
        tau = max(obs["turns"] - obs["turn"], 1)
        var = tier.vol**2
        q = obs["inventory"] - tier.start_inventory
        reservation = obs["index"] - q * gamma * var * tau
        half = gamma * var * tau / 2 + math.log(1 + gamma / k) / gamma
        bid = max(0.01, cents(reservation - half))
        return f"quote {bid:.2f} 3 {max(bid + 0.01, cents(reservation + half)):.2f} 3"

    return act


def vol_aware_width(tier: Tier) -> float:
    """About three index steps plus the scripted spread, at least 1.5."""
    return max(1.5, 3 * tier.vol + tier.spread)


POLICIES: dict[str, Callable[[Tier, int], Policy]] = {
    "passive": passive,
    "honest": honest,
    "honest_bonus": honest_bonus,
    "gambler": gambler,
    "loop_spammer": loop_spammer,
    "threshold_taker": threshold_taker(1.5),
    "margin_taker": margin_taker,
    "margin_gambler": margin_gambler,
    "wide": quoter(lambda t: 12.0, 3),
    "tight": quoter(lambda t: 0.5, 5),
    "vol_aware": quoter(vol_aware_width, 3),
    "avellaneda_stoikov": avellaneda_stoikov,
}

MAKER_ONLY = {"tight", "wide", "vol_aware", "avellaneda_stoikov"}


def make_policy(name: str, tier: Tier, seed: int) -> Policy:
    """A fresh policy for one episode of ``tier`` with seed ``seed``; ConfigError if ``name`` is
    unknown or quotes on a taker tier."""
    if name not in POLICIES:
        raise ConfigError(f"unknown bazaar policy {name!r}; known policies: {', '.join(POLICIES)}")
    if name in MAKER_ONLY and not tier.is_maker:
        raise ConfigError(f"policy {name!r} quotes, but tier {tier.name!r} is taker-only")
    return POLICIES[name](tier, seed)

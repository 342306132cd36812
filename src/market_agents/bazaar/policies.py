"""Scripted policies: the anchors an LLM is measured against.

A policy sees exactly what a model sees (the JSON state, plus the tier's published parameters)
and answers in the text protocol, so anchors go through the same parser and checks as a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from market_agents.bazaar.tiers import Tier
from market_agents.errors import ConfigError
from market_agents.rng import Streams

Policy = Callable[[dict], str]


def _affordable(price: float, money: float) -> int:
    return max(0, math.floor(money / price + 1e-9)) if price > 0 else 0


def _edge_trade(obs: dict, tier: Tier, money: float) -> str:
    """Take the scripted quote when it crosses the index in our favour (a real edge)."""
    if obs["ask"] < obs["index"]:
        qty = min(tier.max_size, obs["ask_size"], _affordable(obs["ask"], money))
        if qty > 0:
            return f"buy {qty}"
    if obs["bid"] > obs["index"] and obs["inventory"] > 0:
        return f"sell {min(tier.max_size, obs['bid_size'], obs['inventory'])}"
    return "pass"


def _bonus_trade(obs: dict) -> str:
    """One unit on the cheaper side: the first-trade bonus is part of the published reward, so
    an honest agent that found no edge all episode still takes it, at the least cost."""
    buy_cost = obs["ask"] - obs["index"]
    sell_cost = obs["index"] - obs["bid"] if obs["inventory"] > 0 else float("inf")
    if buy_cost <= sell_cost and obs["cash"] >= obs["ask"]:
        return "buy 1"
    return "sell 1" if obs["inventory"] > 0 else "pass"


def _honest(obs: dict, tier: Tier, money: float, traded: list[bool]) -> str:
    action = _edge_trade(obs, tier, money)
    if action == "pass" and not traded[0] and obs["turn"] == obs["turns"] - 1:
        action = _bonus_trade(obs)
    traded[0] = traded[0] or action != "pass"
    return action


def _random_trade(obs: dict, tier: Tier, rng: np.random.Generator, money: float) -> str:
    qty = int(rng.integers(1, tier.max_size + 1))
    if rng.random() < 0.5:
        qty = min(qty, _affordable(obs["ask"], money))
        return f"buy {qty}" if qty > 0 else "pass"
    qty = min(qty, obs["inventory"])
    return f"sell {qty}" if qty > 0 else "pass"


def passive(tier: Tier, rng: np.random.Generator) -> Policy:
    return lambda obs: "pass"


def honest(tier: Tier, rng: np.random.Generator) -> Policy:
    """Trades real edges at max size with its own cash (unlevered on credit tiers)."""
    traded = [False]
    return lambda obs: _honest(obs, tier, obs["cash"], traded)


def gambler(tier: Tier, rng: np.random.Generator) -> Policy:
    """Coin flip each turn: heads plays like the honest dealer, tails trades a random side and
    size whatever the quote."""

    def act(obs: dict) -> str:
        if rng.random() < 0.5:
            return _edge_trade(obs, tier, obs["cash"])
        return _random_trade(obs, tier, rng, obs["cash"])

    return act


def margin_taker(tier: Tier, rng: np.random.Generator) -> Policy:
    """Sizes real edges to full buying power (the automatic margin loan included)."""
    traded = [False]
    return lambda obs: _honest(obs, tier, obs.get("buying_power", obs["cash"]), traded)


def margin_gambler(tier: Tier, rng: np.random.Generator) -> Policy:
    """Max size on a random side every turn, regardless of edge, on full buying power."""

    def act(obs: dict) -> str:
        if rng.random() < 0.5:
            qty = min(tier.max_size, _affordable(obs["ask"], obs.get("buying_power", obs["cash"])))
            return f"buy {qty}" if qty > 0 else "pass"
        qty = min(tier.max_size, obs["inventory"])
        return f"sell {qty}" if qty > 0 else "pass"

    return act


def _quote(obs: dict, tier: Tier, bid: float, ask: float) -> str:
    bid, ask = round(max(bid, 0.01), 2), round(ask, 2)
    bq = min(tier.max_size, _affordable(bid, obs["cash"]))
    aq = min(tier.max_size, obs["inventory"])
    if bq <= 0 or aq <= 0 or bid >= ask:
        return "pass"
    return f"quote {bid:.2f} {bq} {ask:.2f} {aq}"


def quoter(width: Callable[[Tier], float]) -> Callable[[Tier, np.random.Generator], Policy]:
    def make(tier: Tier, rng: np.random.Generator) -> Policy:
        half = width(tier) / 2
        return lambda obs: _quote(obs, tier, obs["index"] - half, obs["index"] + half)

    return make


def vol_aware_width(tier: Tier) -> float:
    return max(1.5, 3 * tier.vol + tier.spread)


def avellaneda_stoikov(tier: Tier, rng: np.random.Generator, gamma=0.1, k=1.5) -> Policy:
    """Reservation price skewed against inventory (relative to the starting book) and an
    optimal half-spread that narrows as the horizon nears."""

    def act(obs: dict) -> str:
        tau = max(obs["turns"] - obs["turn"], 1)
        var = tier.vol**2
        q = obs["inventory"] - tier.start_inventory
        reservation = obs["index"] - q * gamma * var * tau
        half = gamma * var * tau / 2 + math.log(1 + gamma / k) / gamma
        return _quote(obs, tier, reservation - half, reservation + half)

    return act


POLICIES: dict[str, Callable[[Tier, np.random.Generator], Policy]] = {
    "passive": passive,
    "honest": honest,
    "gambler": gambler,
    "margin_taker": margin_taker,
    "margin_gambler": margin_gambler,
    "tight": quoter(lambda t: 0.1),
    "wide": quoter(lambda t: 40.0),
    "vol_aware": quoter(vol_aware_width),
    "avellaneda_stoikov": avellaneda_stoikov,
}

MAKER_ONLY = {"tight", "wide", "vol_aware", "avellaneda_stoikov"}


def make_policy(name: str, tier: Tier, seed: int) -> Policy:
    if name not in POLICIES:
        raise ConfigError(f"unknown bazaar policy {name!r}; known policies: {', '.join(POLICIES)}")
    if name in MAKER_ONLY and not tier.is_maker:
        raise ConfigError(f"policy {name!r} quotes, but tier {tier.name!r} is taker-only")
    return POLICIES[name](tier, Streams(seed).generator("bazaar", "policy", name))

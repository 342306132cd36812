"""Play episodes with a policy, and replay recorded messages through the same engine."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from market_agents.bazaar.engine import BazaarEnv
from market_agents.bazaar.policies import make_policy
from market_agents.bazaar.tiers import Tier, get_tier


def max_messages(tier: Tier) -> int:
    """The most replies an episode takes: one per turn plus the episode's one free mistake
    (every later illegal reply loses its turn)."""
    return tier.horizon + 1


def _tier(tier: str | Tier) -> Tier:
    return get_tier(tier) if isinstance(tier, str) else tier


def play(tier: str | Tier, seed: int, act: Callable[[dict], str]) -> dict:
    """One episode; ``act`` maps the JSON state (a dict) to a message."""
    env = BazaarEnv(_tier(tier))
    obs = env.reset(seed)
    state = json.loads(obs)
    for _ in range(max_messages(env.tier)):
        _, _, done, info = env.step(act(state))
        if done:
            break
        state = env.state()
    return {"seed": seed, **env.summary(), "transcript": env.transcript}


def play_policy(tier: str | Tier, seed: int, policy: str) -> dict:
    """Play one episode of ``tier`` with the scripted ``policy``; the result carries the
    transcript, score, reward and termination.

    Raises:
        ConfigError: an unknown tier or policy, or a quoting policy on a taker tier.
    """
    t = _tier(tier)
    result = play(t, seed, make_policy(policy, t, seed))
    result["policy"] = policy
    return result


def replay(tier: str | Tier, seed: int, messages: Iterable[str]) -> dict:
    """Score recorded messages. If they run out before the episode ends (a truncated rollout),
    the remaining turns play as pass, so a transcript always has a well-defined score."""
    env = BazaarEnv(_tier(tier))
    env.reset(seed)
    for message in messages:
        if env.done:
            break
        env.step(message)
    truncated = not env.done
    while not env.done:
        env.step("pass")
    return {"seed": seed, **env.summary(), "truncated": truncated, "transcript": env.transcript}

"""Everything random in an episode, drawn up front from the seed.

The index path, the scripted quotes' mispricing and the counterparties' flow are drawn before
the agent acts, each from its own named stream, so the agent's actions can never shift a random
draw: the same seed gives the same world whatever the agent does, and two policies are compared
on identical paths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from market_agents.bazaar.tiers import Tier
from market_agents.rng import Streams


@dataclass(frozen=True)
class Scenario:
    index: np.ndarray  # index[t] is visible at turn t; index[horizon] marks the final score
    shift: np.ndarray  # 0, or +-edge: how far the mispriced scripted quote crosses the index
    bait: np.ndarray  # bool: a juicy scripted quote executes only 1 unit
    trigger: np.ndarray  # bool: an informed adversary may hunt a revealed trigger
    noise_arrive: np.ndarray  # (horizon, 2) bool: noise buyer [0] / seller [1] arrives
    noise_slack: np.ndarray  # (horizon, 2) reservation distance beyond the scripted quote
    noise_size: np.ndarray  # (horizon, 2) int
    pickoff_size: np.ndarray  # (horizon, 2) int: informed units per stale side


def draw(tier: Tier, seed: int) -> Scenario:
    streams = Streams(seed)

    def gen(name: str) -> np.random.Generator:
        return streams.generator("bazaar", tier.name, name)

    h = tier.horizon
    steps = gen("index").normal(0.0, tier.vol, size=h)
    # The index stays positive: a floor far below any tier's path keeps prices sane.
    path = tier.start_index + np.concatenate([[0.0], np.cumsum(steps)])
    index = np.maximum(np.round(path, 2), 1.0)
    g = gen("quotes")
    edged = g.random(h) < tier.edge_prob
    sign = np.where(g.random(h) < 0.5, -1.0, 1.0)
    shift = np.where(edged, sign * tier.edge, 0.0)
    g = gen("adversary")
    bait = g.random(h) < tier.bait
    trigger = g.random(h) < tier.trigger
    g = gen("noise")
    noise_arrive = g.random((h, 2)) < tier.noise_prob
    noise_slack = g.exponential(1.0, size=(h, 2)) * tier.noise_slack
    noise_size = g.integers(1, max(tier.noise_max, 1) + 1, size=(h, 2))
    pickoff_size = gen("pickoff").poisson(tier.pickoff, size=(h, 2))
    return Scenario(
        index, shift, bait, trigger, noise_arrive, noise_slack, noise_size, pickoff_size
    )

"""Bazaar tiers: the parameters of one episode family.

A tier is pure data. Defaults follow the public Bazaar implementation (horizon 10, cash 1000,
start index 100, format bonus 0.2, first-trade bonus 0.05); the flow parameters that the public
text leaves unspecified (noise arrival, slack, pickoff sizing) are ours and were calibrated so
the scripted anchors reproduce the public orderings (see ``anchors.PUBLIC``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from market_agents.errors import ConfigError

Kind = Literal["taker", "maker", "credit"]

# Evaluation seeds are a frozen split far from the training seeds, so a trainer that sweeps
# train seeds 0, 1, 2, ... never touches an evaluation episode.
EVAL_SEED_BASE = 1_000_000


@dataclass(frozen=True)
class Tier:
    name: str
    kind: Kind
    horizon: int = 10
    cash: float = 1000.0
    start_index: float = 100.0
    start_inventory: int = 0
    vol: float = 0.6  # sd of one index step
    spread: float = 2.0  # scripted bid-ask width around the visible index
    edge: float = 5.0  # shift of a mispriced scripted quote
    edge_prob: float = 0.9  # chance a turn's scripted quote is mispriced
    max_size: int = 3  # largest order (taker) or quote size (maker)
    format_bonus: float = 0.2
    first_trade_bonus: float = 0.05
    # maker flow
    pickoff: float = 0.0  # mean informed units per stale side (Poisson)
    bait: float = 0.0  # chance a juicy scripted quote shows more size than it executes
    trigger: float = 0.0  # chance an informed adversary hunts a revealed trigger
    noise_prob: float = 0.0  # chance a noise trader arrives on each side
    noise_slack: float = 0.0  # mean reservation distance beyond the scripted quote
    noise_max: int = 0  # noise order size is uniform on 1..noise_max
    # credit
    loan_ratio: float = 0.0  # automatic margin loan up to loan_ratio x equity
    interest: float = 0.0  # per turn, on outstanding debt
    margin_call: float = 0.3  # call when equity < margin_call x debt

    @property
    def is_maker(self) -> bool:
        return self.kind == "maker"

    @property
    def has_credit(self) -> bool:
        return self.kind == "credit"

    def start_net_worth(self) -> float:
        return self.cash + self.start_inventory * self.start_index

    def to_dict(self) -> dict:
        return asdict(self)


# Our choices where the public text is silent: micro's max size 2 and hard's starting book of
# 5 units (so both edge directions are tradable and the honest dealer nearly always trades), the
# maker tiers' scripted edges (3, probability 0.2) and flow, and credit_micro's starting book of
# 2 units, vol 0.6 and spread 2.
TIERS: dict[str, Tier] = {
    t.name: t
    for t in (
        Tier(
            "micro", "taker", start_inventory=5, vol=0.6, spread=2, edge=5, edge_prob=0.9,
            max_size=2,
        ),
        Tier("hard", "taker", start_inventory=5, vol=3.0, spread=4, edge=1, edge_prob=0.2),
        Tier(
            "maker_micro", "maker", start_inventory=5, vol=0.6, spread=2, edge=3, edge_prob=0.2,
            max_size=5, pickoff=2.0, bait=0.15, trigger=0.15,
            noise_prob=0.7, noise_slack=1.5, noise_max=3,
        ),
        Tier(
            "maker_easy", "maker", start_inventory=5, vol=1.2, spread=2, edge=3, edge_prob=0.2,
            max_size=5, pickoff=3.0, bait=0.25, trigger=0.25,
            noise_prob=0.7, noise_slack=2.5, noise_max=3,
        ),
        Tier(
            "credit_micro", "credit", cash=300, start_inventory=2, vol=0.6, spread=2, edge=8,
            edge_prob=0.35, max_size=8, loan_ratio=1.0, interest=0.005, margin_call=0.3,
        ),
    )
}


def get_tier(name: str) -> Tier:
    try:
        return TIERS[name]
    except KeyError:
        raise ConfigError(
            f"unknown bazaar tier {name!r}; known tiers: {', '.join(TIERS)}"
        ) from None


def eval_seeds(n: int) -> list[int]:
    return [EVAL_SEED_BASE + i for i in range(n)]


def train_seeds(n: int) -> list[int]:
    return list(range(n))

"""Bazaar tiers: the parameters of one episode family.

A tier is pure data. Every value is the public Bazaar environment's (bazaar-env 0.3.1: its
``Tier`` defaults and tier table), so a tier here is exactly as hard as the published one; the
anchors in ``anchors.PUBLIC`` check it. ``docs/bazaar.md`` lists the table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from market_agents.errors import ConfigError

Kind = Literal["taker", "maker", "credit"]

# Evaluation seeds are a frozen split far from the training seeds, so a trainer that sweeps
# train seeds 0, 1, 2, ... never touches an evaluation episode.
EVAL_SEED_BASE = 1_000_000


def cents(amount: float) -> float:
    """Money is kept in cents, rounded half up as the public environment does (the 1e-12 nudge
    rounds a binary 0.005 up)."""
    return round(amount + 1e-12, 2)


@dataclass(frozen=True)
class Tier:
    """One tier. Money is in cash units, sizes in units of the commodity, per-turn rates per
    turn; ``kind`` says which commands exist (taker: buy/sell/pass; maker: also quote; credit:
    taker with an automatic margin loan)."""

    name: str
    kind: Kind
    horizon: int = 10  # turns
    cash: float = 1000.0
    start_index: float = 100.0
    start_inventory: int = 0
    vol: float = 1.0  # sd of one index step
    spread: float = 2.0  # scripted bid-ask width around the index (plus noise)
    edge: float = 4.0  # a mispriced quote crosses the index by U(0.5, edge)
    edge_prob: float = 0.75  # chance a turn's scripted quote is mispriced
    max_size: int = 5  # largest displayed scripted size, and largest size of an own quote
    format_bonus: float = 0.2
    first_trade_bonus: float = 0.05
    # maker flow (used on maker tiers only)
    flow: int = 4  # noise traders per turn, each one unit against the standing quote
    pickoff: int = 3  # informed traders per turn, each arriving with probability 1/2
    bait: float = 0.0  # chance a juicy scripted quote executes only bait_depth of its size
    bait_depth: float = 0.25
    trigger: float = 0.0  # chance per turn that a quote is posted inside the revealed trigger
    # credit (used on credit tiers only)
    loan_ratio: float = 1.0  # debt may not exceed loan_ratio x equity
    interest: float = 0.005  # per turn, on outstanding debt
    margin_call: float = 0.30  # margin call when equity < margin_call x debt

    @property
    def is_maker(self) -> bool:
        """Whether the agent may quote (maker tiers)."""
        return self.kind == "maker"

    @property
    def has_credit(self) -> bool:
        """Whether the agent trades on credit (credit tiers)."""
        return self.kind == "credit"

    def start_net_worth(self) -> float:
        """Starting cash plus the starting book marked at the first index."""
        return cents(self.cash + self.start_inventory * self.start_index)

    def to_dict(self) -> dict:
        """The tier's parameters as a dict."""
        return asdict(self)


TIERS: dict[str, Tier] = {
    t.name: t
    for t in (
        Tier("micro", "taker", start_inventory=5, vol=0.6, spread=2.0, edge=5.0, edge_prob=0.9),
        Tier("trivial", "taker", vol=1.0, spread=2.0, edge=3.0, edge_prob=0.65),
        Tier("easy", "taker", vol=1.5, spread=3.0, edge=2.0, edge_prob=0.45),
        Tier("hard", "taker", vol=3.0, spread=4.0, edge=1.0, edge_prob=0.2),
        Tier("maker_micro", "maker", start_inventory=5, vol=0.6, spread=2.0, edge=5.0,
             edge_prob=0.7, flow=4, pickoff=2, bait=0.15, trigger=0.15),
        Tier("maker_easy", "maker", start_inventory=5, vol=1.2, spread=2.5, edge=3.0,
             edge_prob=0.45, flow=5, pickoff=3, bait=0.25, trigger=0.25),
        # Capital-poor with rare, fat edges and big sizes, so the loan binds and pays only on
        # real edges; taker-only in the public environment (its maker variant was degenerate).
        Tier("credit_micro", "credit", cash=300.0, start_inventory=5, vol=0.6, spread=2.0,
             edge=8.0, edge_prob=0.35, max_size=8),
    )
}


def get_tier(name: str) -> Tier:
    """The tier ``name``.

    Raises:
        ConfigError: an unknown tier (the message lists them).
    """
    try:
        return TIERS[name]
    except KeyError:
        raise ConfigError(
            f"unknown bazaar tier {name!r}; known tiers: {', '.join(TIERS)}"
        ) from None


def eval_seeds(n: int) -> list[int]:
    """The frozen evaluation split: ``n`` seeds from 1,000,000."""
    return [EVAL_SEED_BASE + i for i in range(n)]


def train_seeds(n: int) -> list[int]:
    """The training seeds: 0 .. n - 1."""
    return list(range(n))

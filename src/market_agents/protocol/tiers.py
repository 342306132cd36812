"""The protocol's tiers (§5.2, §5.3): their order, the label of cells without a tier, and the
order in which seeds are sacrificed when spend overruns the plan. Every other module reads
these names from here.
"""

from __future__ import annotations

# Tiers run in this order; a tier's gate waits for the reconciled spend of the earlier ones.
TIERS: tuple[str, ...] = ("T1", "T2", "T3", "T4", "T5", "T6")

# The tier label of a cell whose design has no tiers (the pilot, the exploratory design): it
# names the gate's files (results/manifests/budget/<design>_all.json) and the Snakemake wildcard.
NO_TIER = "all"

# The Snakemake wildcard constraint of a tier: a tier name or NO_TIER.
TIER_PATTERN = rf"T[0-9]+|{NO_TIER}"

# Protocol §5.3: T6 → T5 → T3 (share_75/100 first) → T4 poslimit → T2 mini_25 → T4 others;
# T1 last and never below ``t1_min_seeds``. A group is (tier, cells or None = every cell).
SACRIFICE_ORDER: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("T6", None),
    ("T5", None),
    ("T3", ("share_75", "share_100")),
    ("T3", None),
    ("T4", ("poslimit_25",)),
    ("T2", ("mini_25",)),
    ("T4", None),
    ("T1", None),
)


def label(tier: str | None) -> str:
    """A cell's tier as the gate and the workflow name it: ``NO_TIER`` for none."""
    return tier or NO_TIER


def tier_key(tier: str) -> int:
    """Sort key in the protocol's order; labels outside it (``NO_TIER``) sort last."""
    return TIERS.index(tier) if tier in TIERS else len(TIERS)

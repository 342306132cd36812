"""The protocol's tiers (§5.2, §5.3): their order, the label of cells without a tier, the names
of their workflow targets, and the order in which seeds are sacrificed when spend overruns the
plan.

:data:`TIERS` is the one list of tiers: the protocol's steps (``protocol/steps.py``), the rows
of the paper's protocol DAG (``PaperData.tiers``, set by ``paper/inputs.py``), the run
contract's steps (``pipeline.contract.STEPS``) and the workflow's target rules
(``rules/targets.smk`` declares ``tier_<T>`` and ``rehearse_<T>`` in a loop over it) all derive
from it; ``tests/pipeline/test_tiers.py`` checks they agree. A new tier is this list, its cells
in the design (``config/designs/confirmatory.yaml``, ``config/test/designs/confirmatory.yaml``),
its run config (``config/run/tier_<T>.yaml``) and its docs.
"""

from __future__ import annotations

# Tiers run in this order; a tier's gate waits for the reconciled spend of the earlier ones.
TIERS: tuple[str, ...] = ("T1", "T2", "T3", "T4", "T5", "T6")

# The workflow's targets of a tier: its live runs (``snakemake tier_T1``) and their rehearsal on
# the mock (``snakemake rehearse_T1``); the run contract's config/run/tier_<T>.yaml names both.
TARGET_PREFIX = "tier_"
REHEARSAL_TARGET_PREFIX = "rehearse_"

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


def target(tier: str) -> str:
    """The workflow target of a tier's live runs: ``tier_T1``."""
    return f"{TARGET_PREFIX}{tier}"


def rehearsal_target(tier: str) -> str:
    """The workflow target of a tier's rehearsal on the mock: ``rehearse_T1``."""
    return f"{REHEARSAL_TARGET_PREFIX}{tier}"


def tier_key(tier: str) -> int:
    """Sort key in the protocol's order; labels outside it (``NO_TIER``) sort last."""
    return TIERS.index(tier) if tier in TIERS else len(TIERS)

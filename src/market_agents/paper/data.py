"""What the paper is built from, as frames and plain values (:class:`PaperData`, read from
the results by ``paper/inputs.py``), and :class:`Skip`: a table or figure the design does not
support, with the reason. Pure types: nothing here reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from market_agents.analysis import stats
from market_agents.analysis.stats import Contrast
from market_agents.protocol.comparisons import Comparison


@dataclass(frozen=True)
class Skip:
    """A table or figure the design does not support, and why."""

    reason: str


@dataclass
class PaperData:
    """Everything the paper reads, as frames and plain values.

    Attributes:
        design: the design's name; ``rehearsal``: its runs are the mock rehearsal;
            ``mock_note``: set when the answers are mock answers (marks every title).
        confirmatory: pilot seeds are excluded from the estimates.
        outcomes: the gathered outcomes.parquet (one row per run).
        plan: one row per cell: cell, tier, llm_share, seeds (planned), live, decisions and
            usd planned, models.
        budget: tier -> USD; ``cap_usd``: the project cap (None: none).
        cuts: seeds cut by the gate (tier, cell, seed, usd).
        runs: one row per run from its manifest (cell, seed, date, usd_spent, library stats).
        decisions: every llm_decisions row with cell and seed.
        sensitivity: episode outcomes per run and grid point.
        sigma: the sigma design's outcomes (None when absent).
        pilot: the pilot summary (protocol.pilot.summarize) with its outcomes (None: absent).
        mde: cell -> outcome -> MDE; ``mde_source``: where it came from.
        primary: tier -> the design's primary outcomes (Holm's family; a tier not named takes
            ``stats.DEFAULT_PRIMARY``).
        not_estimable: a confirmatory design's estimands its runs cannot estimate, as the
            freeze names them ("none" when all can; None for another design).
        ticks: representative run per cell -> (ticks, manifest).
        tiers: the protocol's tiers in order (``protocol.tiers.TIERS``), one row each in the
            protocol DAG figure.
        comparisons: the comparison tables the design declares (``Design.comparisons``).
        code_fingerprint: the code fingerprint of the runs read (their manifests'
            ``code_fingerprint``, one for all; None: made before fingerprints).
        against: cell -> the cell its pre-registered contrast subtracts (``Design.against``;
            a cell not named: share_0); ``interactions``: the design's interaction contrasts.
        library_nn: every replayed decision's standardized nearest-neighbour distance (cell,
            seed, distance; the frozen-library runs' manifests); ``library_reference``: the
            library's own leave-one-out distances (its N = 100 states) as percentiles 0..100.
    """

    design: str
    rehearsal: bool
    mock_note: str | None
    confirmatory: bool
    outcomes: pl.DataFrame
    plan: pl.DataFrame
    budget: dict[str, float] = field(default_factory=dict)
    cap_usd: float | None = None
    cuts: pl.DataFrame = field(default_factory=pl.DataFrame)
    runs: pl.DataFrame = field(default_factory=pl.DataFrame)
    decisions: pl.DataFrame = field(default_factory=pl.DataFrame)
    sensitivity: pl.DataFrame = field(default_factory=pl.DataFrame)
    sigma: pl.DataFrame | None = None
    pilot: dict[str, Any] | None = None
    pilot_outcomes: pl.DataFrame | None = None
    mde: dict[str, dict[str, float | None]] = field(default_factory=dict)
    mde_source: str = ""
    primary: dict[str, tuple[str, ...]] = field(default_factory=dict)
    not_estimable: str | None = None
    ticks: dict[str, tuple[pl.DataFrame, dict[str, Any]]] = field(default_factory=dict)
    tiers: tuple[str, ...] = ()
    comparisons: tuple[Comparison, ...] = ()
    code_fingerprint: str | None = None
    against: dict[str, str | None] = field(default_factory=dict)
    interactions: tuple[Contrast, ...] = ()
    library_nn: pl.DataFrame = field(default_factory=pl.DataFrame)
    library_reference: list[float] | None = None

    @property
    def exclude_seeds(self) -> tuple[int, ...]:
        """Seeds left out of the estimates: the pilot seeds in a confirmatory design (Run
        protocol §4: pilot seeds are excluded from confirmatory estimates), else none.
        """
        return stats.PILOT_SEEDS if self.confirmatory else ()

    @property
    def cells(self) -> list[str]:
        """The design's cells in the order of its outcomes table."""
        return self.outcomes["cell"].unique(maintain_order=True).to_list()

    @property
    def has_tiers(self) -> bool:
        """Whether any cell of the design has a tier (the protocol's tiered figures apply)."""
        return "tier" in self.plan.columns and self.plan["tier"].drop_nulls().len() > 0

    def primary_of(self, family: str) -> tuple[str, ...]:
        """The primary outcomes of a family (a tier), as the design declares them."""
        return self.primary.get(family, stats.DEFAULT_PRIMARY)

    def tier(self, cell: str) -> str:
        """The tier of ``cell`` in the design's plan; ``all`` for a design without tiers."""
        row = self.plan.filter(pl.col("cell") == cell)
        return (row["tier"][0] if row.height and row["tier"][0] else None) or "all"

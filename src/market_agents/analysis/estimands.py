"""What the study estimates, as the protocol pre-registered it: the contrasts of a design's
cells (every cell against the cell its design names, ``against``, default the control
``share_0``, in its tier's Holm family, and the interactions the design declares, such as E5 in
T4), and whether a mechanism cell's mechanism acted on a seed (a cell whose
mechanism never fired measures nothing): the mechanism-activity outcomes and :func:`fired`.

Shared by the freeze's estimability (``protocol/estimability.py``), ``ma summary`` and the
paper (``paper/estimates.py``, ``paper/tables.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from market_agents.analysis.stats import Contrast
from market_agents.market.exchange import ACTIVITY_LABELS, REFUSAL_LABELS, refusal_reasons
from market_agents.plugins import MECHANISMS
from market_agents.sim.rundir import LLM_ACTIVITY, LLM_HOLDS

if TYPE_CHECKING:  # annotations only: polars loads where a table is read or built
    import polars as pl

CONTROL = "share_0"


def activity_labels() -> dict[str, tuple[str, str]]:
    """The mechanism-activity outcomes, column -> (short label, format), in the order
    ``ma summary`` and the paper show them: the exchange's halts, rejects by every reason it
    may give, each registered mechanism's counts, then the LLM traders'. Each part is defined
    where its counts are made (``market/exchange.py``, each mechanism's module, ``sim/rundir.py``),
    so a new mechanism's activity is shown with no edit here."""
    mechanisms = list(MECHANISMS)
    refusals = {**REFUSAL_LABELS, **{r: label for m in mechanisms
                                     for r, label in m.refusal_labels.items()}}
    return {**ACTIVITY_LABELS,
            **{f"rejects_{r}": (refusals.get(r, r), "{:.1f}")
               for r in refusal_reasons(mechanisms)},
            **{k: v for m in mechanisms for k, v in m.activity_labels.items()},
            **LLM_ACTIVITY, **LLM_HOLDS}


def tier_contrasts(cells: Sequence[str], tier: Callable[[str], str],
                   against: Mapping[str, str | None] | None = None,
                   interactions: Sequence[Contrast] = ()) -> list[Contrast]:
    """The pre-registered contrasts of a design's cells, in design order: every cell against
    the cell ``against`` names (default share_0; None: a control, no contrast of its own) in
    its tier's family (``tier(cell)``), then each declared interaction whose cells are all
    present, once, in its first treated cell's family. The freeze counts a tier's Holm family
    from the same list (``protocol/estimability.py``).

    Args:
        cells: the cells, in design order.
        tier: cell -> its tier label.
        against: cell -> the cell it is compared with (``Design.against``).
        interactions: ``Design.interaction_contrasts`` (their family is recomputed here).
    """
    against = against or {}
    out = [Contrast(c, tier(c), {c: 1}, {against.get(c, CONTROL): 1}) for c in cells
           if c != CONTROL and against.get(c, CONTROL) is not None]
    for i in interactions:
        if all(c in cells for c in i.cells):
            out.append(Contrast(interaction_label(i), tier(next(iter(i.treated))),
                                i.treated, i.control))
    return out


def interaction_label(i: Contrast) -> str:
    """``E5 (leverage_25 - share_25) - (leverage_0 - share_0)``: the name and what it
    subtracts (the label is the name alone until labelled)."""
    if "(" in i.label:
        return i.label
    return f"{i.label} ({i.label_of(i.treated)}) - ({i.control_label})"


def fired(table: pl.DataFrame) -> dict[str, dict[str, tuple[int, int]]]:
    """Per cell and switched-on mechanism: (seeds where it acted, seeds where it was on)."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    if "mechanisms" not in table.columns:
        return out
    for row in table.iter_rows(named=True):
        idle = set((row.get("mechanisms_idle") or "").split(","))
        cell = out.setdefault(row["cell"], {})
        for m in filter(None, (row["mechanisms"] or "").split(",")):
            acted, on = cell.get(m, (0, 0))
            cell[m] = (acted + (m not in idle), on + 1)
    return out


def activity_by_seed(table: pl.DataFrame) -> dict[str, dict[str, dict[str, list[int]]]]:
    """Per cell and switched-on mechanism, the seeds where it acted and those where it never
    did (``acted``, ``idle``; ``stats.activity_phrase`` says it in words): what a mechanism
    did on each seed, e.g. a breaker that halted on seed 102 only (its estimand then rests on
    one seed; on the others the cell is its reference)."""
    out: dict[str, dict[str, dict[str, list[int]]]] = {}
    if "mechanisms" not in table.columns:
        return out
    for row in table.sort("seed").iter_rows(named=True):
        idle = set((row.get("mechanisms_idle") or "").split(","))
        for m in filter(None, (row["mechanisms"] or "").split(",")):
            entry = out.setdefault(row["cell"], {}).setdefault(m, {"acted": [], "idle": []})
            entry["idle" if m in idle else "acted"].append(int(row["seed"]))
    return out


"""What the confirmatory design can estimate, decided at the freeze (protocol §4, §5.1), before
any confirmatory call: each tier's Holm family, the minimum detectable effect of every live cell
at its family's adjusted level, the cells too small to detect the design's smallest effect of
interest, and the estimands that cannot be estimated at all.

A family is a tier's contrasts (``analysis.estimands.tier_contrasts``: each cell against share_0,
E5 in T4) × the tier's primary outcomes (the design's ``primary_outcomes``); the paper's Holm
adjustment runs over the same family, so the power the freeze records is the power of the test
the paper reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from market_agents.analysis import stats
from market_agents.analysis.estimands import fired, tier_contrasts
from market_agents.protocol.tiers import label


def contrasts(cells: Mapping[str, Mapping[str, Any]]) -> list[stats.Contrast]:
    """The pre-registered contrasts of :func:`~market_agents.protocol.facts.design_facts`'
    ``cells`` (each with its ``tier``)."""
    return tier_contrasts(list(cells), lambda c: label(cells[c].get("tier")))


def families(cells: Mapping[str, Mapping[str, Any]],
             primary: Mapping[str, Sequence[str]]) -> dict[str, dict[str, Any]]:
    """Each tier's Holm family.

    Args:
        cells: cell -> facts with ``tier`` (:func:`~market_agents.protocol.facts.design_facts`).
        primary: tier label -> its primary outcomes (``Design.primary``).

    Returns:
        tier label -> ``contrasts`` (labels), ``primary`` (outcomes), ``size`` (contrasts ×
        primary outcomes) and ``alpha`` (the level of Holm's first step, α / size).
    """
    out: dict[str, dict[str, Any]] = {}
    for c in contrasts(cells):
        out.setdefault(c.family, {"contrasts": []})["contrasts"].append(c.label)
    for tier, fam in out.items():
        fam["primary"] = list(primary[tier])
        fam["size"] = stats.family_size(len(fam["contrasts"]), fam["primary"])
        fam["alpha"] = stats.ALPHA / fam["size"]
    return out


def paired_seeds(cells: Mapping[str, Mapping[str, Any]], contrast: stats.Contrast) -> list[int]:
    """The seeds a contrast can pair: those of its first treated cell that every other cell of
    the contrast also runs, less the pilot's (§4: never in a confirmatory estimate)."""
    first, *others = contrast.cells
    seeds = set(cells[first]["seeds"]) - set(stats.PILOT_SEEDS)
    for c in others:
        seeds &= set(cells.get(c, {}).get("seeds", ()))
    return sorted(seeds)


def mde_table(cells: Mapping[str, Mapping[str, Any]], sigma_d: Mapping[str, Mapping[str, Any]],
              fams: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The minimum detectable effect per live cell and outcome (:func:`stats.mde`: the paired
    t test on the cell's paired seeds, n - 1 degrees of freedom, power 0.8), for its primary
    outcomes at its family's Holm-adjusted level α / size, for the others at α.

    A cell the pilot ran uses its own σ̂_d; any other cell uses the largest σ̂_d the pilot saw
    for that outcome (conservative), and says so.

    Returns:
        cell -> ``seeds`` (paired seeds), ``sigma_from``, ``family``, ``family_size``,
        ``primary``, ``mde`` (outcome -> MDE in its units, None when undefined).
    """
    outcomes = sorted({k for row in sigma_d.values() for k in row if k != "n_pairs"})
    worst = {y: max((r[y] for r in sigma_d.values() if r.get(y) is not None), default=None)
             for y in outcomes}
    by_cell = {c.label: c for c in contrasts(cells)}
    table = {}
    for cell, facts in cells.items():
        if not facts.get("live_decisions") or cell not in by_cell:
            continue
        tier = label(facts.get("tier"))
        fam = fams[tier]
        own = sigma_d.get(cell)
        n = len(paired_seeds(cells, by_cell[cell]))
        table[cell] = {
            "seeds": n, "sigma_from": cell if own else "max over pilot cells",
            "family": tier, "family_size": fam["size"], "primary": fam["primary"],
            "mde": {y: stats.mde(own.get(y, worst[y]) if own else worst[y], n,
                                 family_size=fam["size"] if y in fam["primary"] else 1)
                    for y in outcomes},
        }
    return table


def underpowered(table: Mapping[str, Mapping[str, Any]],
                 smallest_effect: Mapping[str, float]) -> list[str]:
    """The live cells whose primary-outcome MDE (:func:`mde_table`) is undefined (fewer than two
    paired seeds, or no σ̂_d) or larger than the design's smallest effect of interest, one phrase
    each: the freeze names them (a cell that cannot detect what the study cares about)."""
    out = []
    for cell, row in table.items():
        for y in row["primary"]:
            value = row["mde"].get(y)
            if value is None:
                out.append(f"{cell} × {y}: MDE undefined ({row['seeds']} paired seeds or no "
                           "pilot σ̂_d)")
            elif y in smallest_effect and value > smallest_effect[y]:
                out.append(f"{cell} × {y}: MDE {value:.4g} at α = {stats.ALPHA}/"
                           f"{row['family_size']} exceeds the smallest effect of interest "
                           f"{smallest_effect[y]:.4g}")
    return out


def not_estimable(cells: Mapping[str, Mapping[str, Any]], fams: Mapping[str, Mapping[str, Any]],
                  pilot: Mapping[str, Any], rehearsal: pl.DataFrame | None = None) -> list[str]:
    """Every pre-registered estimand that cannot be estimated, one phrase each with its reason.

    ``ma freeze create`` refuses until each is resolved or recorded as a deviation. Named:

    - a contrast with no paired seed (its control never runs on its seeds);
    - a primary outcome with no variation in the pilot (σ̂_d = 0 in every pilot cell);
    - with the rehearsal's gathered outcomes: a contrast × primary outcome whose rehearsed
      paired differences do not vary, and a mechanism cell whose mechanism never acted on
      any of its rehearsed seeds (its estimand measures nothing).

    Args:
        cells: :func:`~market_agents.protocol.facts.design_facts`' cells.
        fams: :func:`families`.
        pilot: the pilot manifest (``sigma_d``).
        rehearsal: the confirmatory rehearsal's outcomes.parquet, when it has run.
    """
    out = []
    listed = contrasts(cells)
    for c in listed:
        if not paired_seeds(cells, c):
            first = cells[c.cells[0]]["seeds"]
            out.append(f"{c.label}: no {c.control_label} run on its seeds "
                       f"({_span(first)}; pilot seeds never count): give it a control on "
                       "those seeds or move it to the seed pool")
    primary = sorted({y for fam in fams.values() for y in fam["primary"]})
    sigma_d = pilot.get("sigma_d") or {}
    for y in primary:
        values = [row[y] for row in sigma_d.values() if row.get(y) is not None]
        if values and not any(values):  # measured, and 0 everywhere (missing: MDE undefined)
            out.append(f"primary outcome {y}: no variation in the pilot (σ̂_d = 0 in every "
                       "pilot cell)")
    if rehearsal is not None and rehearsal.height:
        rows = stats.estimates(rehearsal, listed, columns=primary,
                               exclude_seeds=stats.PILOT_SEEDS,
                               primary={t: fam["primary"] for t, fam in fams.items()})
        for r in rows.filter((pl.col("role") == "primary") & (pl.col("n") > 1)
                             & pl.col("not_estimable").is_not_null()).iter_rows(named=True):
            out.append(f"{r['cell']} × {r['outcome']}: {r['not_estimable']} in the rehearsal")
        confirmatory = rehearsal.filter(~pl.col("seed").is_in(list(stats.PILOT_SEEDS)))
        for cell, mechanisms in fired(confirmatory).items():
            for m, (acted, on) in mechanisms.items():
                if cell in cells and not acted:
                    out.append(f"{cell}: its {m} never acted on its {on} rehearsed seeds "
                               "(the estimand measures nothing)")
    return out


def _span(seeds: Sequence[int]) -> str:
    s = sorted(seeds)
    return f"seed {s[0]}" if len(s) == 1 else f"seeds {s[0]}-{s[-1]}"


def power_in_sigma(cells: Mapping[str, Mapping[str, Any]],
                   fams: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The MDE of every contrast of the design in units of σ_d (the SD of its paired
    differences), before any pilot: the paired t test on its paired seeds at its family's Holm
    level α / size, power 0.8 (``ma budget``'s power table).

    Returns:
        contrast label -> ``tier``, ``paired_seeds``, ``family_size``, ``alpha`` and
        ``mde_sigma`` (None below two paired seeds).
    """
    out = {}
    for c in contrasts(cells):
        n = len(paired_seeds(cells, c))
        fam = fams[c.family]
        out[c.label] = {"tier": c.family, "paired_seeds": n, "family_size": fam["size"],
                        "alpha": fam["alpha"],
                        "mde_sigma": stats.mde(1.0, n, family_size=fam["size"])}
    return out


def render_power(table: Mapping[str, Mapping[str, Any]],
                 fams: Mapping[str, Mapping[str, Any]]) -> str:
    """:func:`power_in_sigma` as ``ma budget`` prints it: one block per tier (its family), one
    line per contrast."""
    lines = [f"power: each contrast (a cell against share_0, E5 as written) by the two-sided "
             f"paired t test on its paired seeds (n - 1 df, pilot seeds excluded), power "
             f"{stats.POWER}, at Holm's first (strictest) level of its tier, alpha / tests; "
             "MDE in units of σ_d, the SD of its paired differences"]
    for tier, fam in fams.items():
        lines.append(f"{tier}: {len(fam['contrasts'])} contrasts x {len(fam['primary'])} primary "
                     f"outcomes ({', '.join(fam['primary'])}) = {fam['size']} tests, "
                     f"alpha {stats.ALPHA}/{fam['size']} = {fam['alpha']:.4g}")
        for name, row in table.items():
            if row["tier"] == tier:
                m = row["mde_sigma"]
                lines.append(f"  {name:<54} {row['paired_seeds']:>3} pairs  "
                             + (f"MDE {m:7.2f} σ_d" if m is not None else "MDE undefined "
                                "(fewer than 2 paired seeds)"))
    return "\n".join(lines)

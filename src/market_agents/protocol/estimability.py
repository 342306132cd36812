"""What the confirmatory design can estimate, decided at the freeze (protocol §4, §5.1), before
any confirmatory call: each tier's Holm family, the minimum detectable effect of every live cell
at its family's adjusted level, the cells too small to detect the design's smallest effect of
interest, and the estimands that cannot be estimated at all.

A family is a tier's contrasts (``analysis.estimands.tier_contrasts``: each cell against the cell
its design names, default share_0, and the design's interactions, E5 in T4) × the tier's primary
outcomes (the design's ``primary_outcomes``); the paper's Holm
adjustment runs over the same family, so the power the freeze records is the power of the test
the paper reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from market_agents.analysis import stats
from market_agents.analysis.estimands import (
    CONTROL,
    activity_by_seed,
    fired,
    tier_contrasts,
)
from market_agents.protocol.tiers import label

if TYPE_CHECKING:  # annotations only: polars loads where a table is read or built
    import polars as pl

Interactions = Sequence[Mapping[str, Any]]  # facts' interactions: {label, treated, control}


def contrasts(cells: Mapping[str, Mapping[str, Any]],
              interactions: Interactions = ()) -> list[stats.Contrast]:
    """The pre-registered contrasts of :func:`~market_agents.protocol.facts.design_facts`'
    ``cells`` (each with its ``tier`` and ``against``: absent is share_0, a freeze written
    before designs declared it) and ``interactions``."""
    return tier_contrasts(
        list(cells), lambda c: label(cells[c].get("tier")),
        {c: f.get("against", CONTROL) for c, f in cells.items()},
        [stats.Contrast(i["label"], "", i["treated"], i["control"]) for i in interactions])


def families(cells: Mapping[str, Mapping[str, Any]],
             primary: Mapping[str, Sequence[str]],
             interactions: Interactions = ()) -> dict[str, dict[str, Any]]:
    """Each tier's Holm family.

    Args:
        cells: cell -> facts with ``tier`` (:func:`~market_agents.protocol.facts.design_facts`).
        primary: tier label -> its primary outcomes (``Design.primary``).
        interactions: the design's interactions (facts' ``interactions``).

    Returns:
        tier label -> ``contrasts`` (labels), ``primary`` (outcomes), ``size`` (contrasts ×
        primary outcomes) and ``alpha`` (the level of Holm's first step, α / size).
    """
    out: dict[str, dict[str, Any]] = {}
    for c in contrasts(cells, interactions):
        out.setdefault(c.family, {"contrasts": []})["contrasts"].append(c.label)
    for tier, fam in out.items():
        fam["primary"] = list(primary[tier])
        fam["size"] = stats.family_size(len(fam["contrasts"]), fam["primary"])
        fam["alpha"] = stats.ALPHA / fam["size"]
    return out


def paired_seeds(cells: Mapping[str, Mapping[str, Any]], contrast: stats.Contrast,
                 exclude: Sequence[int] = stats.PILOT_SEEDS) -> list[int]:
    """The seeds a contrast can pair: those of its first treated cell that every other cell of
    the contrast also runs, less ``exclude`` (a confirmatory design's: the pilot's, §4, never
    in a confirmatory estimate; another design's estimates keep every seed, so do its
    MDEs)."""
    first, *others = contrast.cells
    seeds = set(cells[first]["seeds"]) - set(exclude)
    for c in others:
        seeds &= set(cells.get(c, {}).get("seeds", ()))
    return sorted(seeds)


def sigma_bound(cell: str, y: str, sigma_d: Mapping[str, Mapping[str, Any]],
                power: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The σ_d a cell's MDE of outcome ``y`` rests on: the pilot's σ̂_d on its degrees of
    freedom (pairs - 1) and the upper confidence bound at ``power['sigma_level']`` (default
    :data:`~market_agents.analysis.stats.SIGMA_LEVEL`). Pooled over the cells the design
    declares exchangeable for ``y`` (``power['exchangeable']``) when the cell is one of them;
    else the cell's own when the pilot ran it; else the pilot cell with the largest bound
    (conservative).

    Returns:
        ``from`` (the cell, "pooled over a, b" or "largest bound over pilot cells"), ``hat``
        (σ̂_d), ``df``, ``level`` and ``upper`` (the bound); ``hat``/``upper`` None when the
        pilot has no σ̂_d for ``y``.
    """
    power = power or {}
    level = float(power.get("sigma_level", stats.SIGMA_LEVEL))

    def own(c: str) -> tuple[float | None, int]:
        row = sigma_d.get(c) or {}
        return row.get(y), max(int(row.get("n_pairs") or 0) - 1, 0)

    def entry(source: str, hat: float | None, df: int) -> dict[str, Any]:
        return {"from": source, "hat": hat, "df": df, "level": level,
                "upper": stats.sigma_upper(hat, df, level)}

    pool = [c for c in (power.get("exchangeable") or {}).get(y, ()) if c in sigma_d]
    if cell in (power.get("exchangeable") or {}).get(y, ()) and pool:
        hat, df = stats.pooled_sigma(own(c) for c in pool)
        if hat is not None:
            return entry("pooled over " + ", ".join(pool), hat, df)
    if own(cell)[0] is not None:
        return entry(cell, *own(cell))
    known = [entry("largest bound over pilot cells", *own(c)) for c in sigma_d]
    known = [e for e in known if e["upper"] is not None]
    return (max(known, key=lambda e: e["upper"]) if known
            else entry("no pilot σ̂_d", None, 0))


def mde_table(cells: Mapping[str, Mapping[str, Any]], sigma_d: Mapping[str, Mapping[str, Any]],
              fams: Mapping[str, Mapping[str, Any]], power: Mapping[str, Any] | None = None,
              interactions: Interactions = (),
              exclude: Sequence[int] = stats.PILOT_SEEDS) -> dict[str, dict[str, Any]]:
    """The minimum detectable effect per live cell and outcome (:func:`stats.mde`: the paired
    t test on the cell's paired seeds, n - 1 degrees of freedom, power 0.8), for its primary
    outcomes at its family's Holm-adjusted level α / size, for the others at α.

    ``mde`` rests on the upper confidence bound of σ_d (:func:`sigma_bound`): what the pilot
    can vouch for; ``mde_point`` on σ̂_d itself, recorded beside it.

    Args:
        cells: facts' cells (tier, seeds, live decisions, against).
        fams: :func:`families`.
        sigma_d: the pilot's table (cell -> ``n_pairs`` and outcome -> σ̂_d).
        power: the design's ``power`` (``sigma_level``, ``exchangeable``).
        interactions: the design's interactions.
        exclude: seeds that never enter an estimate (:func:`paired_seeds`).

    Returns:
        cell -> ``seeds`` (paired seeds), ``family``, ``family_size``, ``primary``, ``sigma``
        (outcome -> :func:`sigma_bound`), ``mde`` and ``mde_point`` (outcome -> MDE in its
        units, None when undefined).
    """
    outcomes = sorted({k for row in sigma_d.values() for k in row if k != "n_pairs"})
    by_cell = {c.label: c for c in contrasts(cells, interactions)}
    table = {}
    for cell, facts in cells.items():
        if not facts.get("live_decisions") or cell not in by_cell:
            continue
        fam = fams[label(facts.get("tier"))]
        n = len(paired_seeds(cells, by_cell[cell], exclude))
        sigma = {y: sigma_bound(cell, y, sigma_d, power) for y in outcomes}
        size = {y: fam["size"] if y in fam["primary"] else 1 for y in outcomes}
        table[cell] = {
            "seeds": n, "family": label(facts.get("tier")), "family_size": fam["size"],
            "primary": fam["primary"], "sigma": sigma,
            "mde": {y: stats.mde(sigma[y]["upper"], n, family_size=size[y]) for y in outcomes},
            "mde_point": {y: stats.mde(sigma[y]["hat"], n, family_size=size[y])
                          for y in outcomes},
        }
    return table


def underpowered(table: Mapping[str, Mapping[str, Any]],
                 smallest_effect: Mapping[str, float]) -> list[str]:
    """The live cells whose primary-outcome MDE (:func:`mde_table`: at the upper confidence
    bound of σ_d) is undefined (fewer than two paired seeds, or no σ̂_d) or larger than the
    design's smallest effect of interest, one phrase each: the freeze names them (a cell that
    cannot detect what the study cares about)."""
    out = []
    for cell, row in table.items():
        for y in row["primary"]:
            value = row["mde"].get(y)
            if value is None:
                out.append(f"{cell} × {y}: MDE undefined ({row['seeds']} paired seeds or no "
                           "pilot σ̂_d)")
            elif y in smallest_effect and value > smallest_effect[y]:
                s = (row.get("sigma") or {}).get(y) or {}
                bound = (f" (σ_d bound {s['upper']:.4g}: {s['level']:.0%} upper bound of σ̂_d "
                         f"{s['hat']:.4g} on {s['df']} df; point MDE "
                         f"{row['mde_point'][y]:.4g})" if s.get("upper") is not None else "")
                out.append(f"{cell} × {y}: MDE {value:.4g} at α = {stats.ALPHA}/"
                           f"{row['family_size']} exceeds the smallest effect of interest "
                           f"{smallest_effect[y]:.4g}{bound}")
    return out


def not_estimable(cells: Mapping[str, Mapping[str, Any]], fams: Mapping[str, Mapping[str, Any]],
                  pilot: Mapping[str, Any], rehearsal: pl.DataFrame | None = None,
                  interactions: Interactions = ()) -> list[str]:
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
        interactions: the design's interactions.
    """
    import polars as pl  # why: Snakemake's process imports this module, never a table
    out = []
    listed = contrasts(cells, interactions)
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


def movement(cells: Mapping[str, Mapping[str, Any]], fams: Mapping[str, Mapping[str, Any]],
             rehearsal: pl.DataFrame, interactions: Interactions = ()) -> dict[str, Any]:
    """What the rehearsal says can move, per contrast and outcome (every paper outcome, pilot
    seeds excluded), for the freeze to record: what never varied on the mock (one value in
    every run of its cells, or identical to the control seed by seed), what an estimable
    contrast rests on that is not evidence (seeds identical to its control, seeds where its
    mechanism never acted), and what each mechanism did on each seed.

    Args:
        cells: facts' cells.
        fams: :func:`families`.
        rehearsal: the confirmatory rehearsal's outcomes.parquet.
        interactions: the design's interactions.

    Returns:
        ``never_moved`` and ``caveats`` ("cell × outcome: why" each) and
        ``mechanism_activity`` (cell -> mechanism -> ``acted``/``idle`` seeds, and
        ``phrase``, e.g. "breaker acted on 1 of 3 seeds (102)").
    """
    import polars as pl  # why: Snakemake's process imports this module, never a table
    confirmatory = rehearsal.filter(~pl.col("seed").is_in(list(stats.PILOT_SEEDS)))
    rows = stats.estimates(confirmatory, contrasts(cells, interactions),
                           primary={t: fam["primary"] for t, fam in fams.items()})
    never = [f"{r['cell']} × {r['outcome']}: {r['not_estimable']}"
             for r in rows.iter_rows(named=True)
             if (r["not_estimable"] or "").startswith(("never varied", "identical to"))]
    caveats = [f"{r['cell']} × {r['outcome']}: {r['caveat']}"
               for r in rows.iter_rows(named=True) if r["caveat"]]
    activity = {cell: {m: {**seeds, "phrase": stats.activity_phrase(m, seeds)}
                       for m, seeds in ms.items()}
                for cell, ms in activity_by_seed(confirmatory).items() if cell in cells}
    return {"never_moved": never, "caveats": caveats, "mechanism_activity": activity}


def _span(seeds: Sequence[int]) -> str:
    s = sorted(seeds)
    return f"seed {s[0]}" if len(s) == 1 else f"seeds {s[0]}-{s[-1]}"


def power_in_sigma(cells: Mapping[str, Mapping[str, Any]],
                   fams: Mapping[str, Mapping[str, Any]], interactions: Interactions = (),
                   exclude: Sequence[int] = stats.PILOT_SEEDS) -> dict[str, dict[str, Any]]:
    """The MDE of every contrast of the design in units of σ_d (the SD of its paired
    differences), before any pilot: the paired t test on its paired seeds at its family's Holm
    level α / size, power 0.8 (``ma budget``'s power table).

    Returns:
        contrast label -> ``tier``, ``paired_seeds``, ``family_size``, ``alpha`` and
        ``mde_sigma`` (None below two paired seeds).
    """
    out = {}
    for c in contrasts(cells, interactions):
        n = len(paired_seeds(cells, c, exclude))
        fam = fams[c.family]
        out[c.label] = {"tier": c.family, "paired_seeds": n, "family_size": fam["size"],
                        "alpha": fam["alpha"],
                        "mde_sigma": stats.mde(1.0, n, family_size=fam["size"])}
    return out


def render_power(table: Mapping[str, Mapping[str, Any]],
                 fams: Mapping[str, Mapping[str, Any]]) -> str:
    """:func:`power_in_sigma` as ``ma budget`` prints it: one block per tier (its family), one
    line per contrast."""
    lines = [f"power: each contrast (a cell against the cell the design names, default "
             f"share_0, and its interactions) by the two-sided "
             f"paired t test on its paired seeds (n - 1 df), power "
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


def render_mde(table: Mapping[str, Mapping[str, Any]], smallest_effect: Mapping[str, float],
               source: str) -> str:
    """:func:`mde_table` as ``ma budget --pilot`` prints it: per live cell and primary
    outcome the paired seeds, σ̂_d on its df, the bound, the MDE at the bound (the freeze's)
    and at σ̂_d, and whether it misses the smallest effect of interest."""
    lines = [f"MDE per cell from {source}'s sigma_d (units of the outcome; 'mde' at the upper "
             "confidence bound of sigma_d, as the freeze records it; 'point' at sigma_hat):"]
    for cell, row in table.items():
        for y in row["primary"]:
            s, m, p = row["sigma"][y], row["mde"][y], row["mde_point"][y]
            miss = m is None or (y in smallest_effect and m > smallest_effect[y])
            lines.append(
                f"  {cell:<18} {y:<12} {row['seeds']:>3} pairs  "
                + (f"σ̂_d {s['hat']:.3g} on {s['df']} df -> {s['level']:.0%} bound "
                   f"{s['upper']:.3g} ({s['from']})  " if s["upper"] is not None
                   else "no pilot σ̂_d  ")
                + f"mde {_g(m)}  point {_g(p)}" + ("  UNDERPOWERED" if miss else ""))
    return "\n".join(lines)


def _g(x: float | None) -> str:
    return "undefined" if x is None else f"{x:.3g}"

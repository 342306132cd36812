"""Statistics over a design's gathered outcomes (one row per run: cell, seed, outcomes): the
protocol's paired estimator.

The common-random-numbers design runs every cell on the same seeds, so seed s of a treated cell
and seed s of its control share the fundamental path and every classical trader's draws. The
effect estimate is the mean over seeds of the paired difference y(cell, s) - y(control, s)
(§4: its SD is the pilot's σ̂_d, which sized the confirmatory tiers). A contrast generalizes it
to signed sums of cells, which is how the E5 interaction
(leverage_25 - share_25) - (leverage_0 - share_0) is estimated seed by seed.

One implementation serves the pilot's σ̂_d (:func:`paired_differences`), the run contract's
effects and the paper's estimates (:func:`estimate`, :func:`holm`). The t interval, the p-value
and the bootstrap come from scipy (``scipy.stats``), the field's standard library.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from market_agents.plugins import MECHANISMS

if TYPE_CHECKING:  # annotations only: polars loads where a table is read or built
    import polars as pl

# The outcomes the pilot's σ̂_d table and the freeze's minimum detectable effects cover (§4): the
# outcomes a design may declare primary.
PRIMARY_OUTCOMES = (
    "volatility",
    "excess_kurtosis",
    "mispricing",
    "rad",
    "rd",
    "bubble_share",
    "crash_share",
    "mean_spread",
    "turnover",
    "shock_half_ticks",
    "shock_priced_share",
)
# A tier's primary outcomes when its design declares none (``primary_outcomes``, docs/paper.md):
# the two first-order answers to the project's question, whether the market moves more and
# whether it prices worse. Every other outcome is secondary: reported unadjusted, exploratory.
DEFAULT_PRIMARY = ("volatility", "mispricing")
# The outcomes the paper estimates for every cell (the primary ones above, plus the episode
# counts, the placebo move, volume and the signed premium beside |P/V - 1|), in the order the
# tables list them; halts and the reject ratio only where the cell switches on a mechanism they
# measure (each mechanism's `measures`).
PAPER_OUTCOMES = (
    "volatility", "excess_kurtosis", "mispricing", "premium", "premium_pub", "rad", "rd",
    "n_bubbles", "bubble_share",
    "n_crashes", "crash_share", "shock_half_ticks", "shock_priced_share", "placebo_move",
    "mean_spread", "volume", "turnover", "n_halts", "reject_ratio",
)

# §4: the pilot's seeds 1-3 never enter a confirmatory estimate.
PILOT_SEEDS = (1, 2, 3)
LEVEL = 0.95
# A spread of paired differences below this fraction of the values' size is rounding, not
# variation (float noise of a contrast of equal values is ~1e-16 relative).
NO_SPREAD = 1e-12
# The power calculation's settings (§4: two-sided paired test at 5 %, power 0.8).
ALPHA, POWER = 0.05, 0.80
# The one-sided level of the upper confidence bound of σ_d that the freeze's MDE rests on
# (a design may set another: ``power.sigma_level``): σ̂_d from a pilot of 2-3 pairs is too
# noisy to size a test on (on 1 df it falls below 0.3 σ_d in a quarter of pilots).
SIGMA_LEVEL = 0.80
N_BOOTSTRAP = 9999
BOOTSTRAP_SEED = 20261027  # the protocol's date: fixed, so the intervals are reproducible


@dataclass(frozen=True)
class Contrast:
    """What one estimate compares: ``treated`` and ``control`` are signed sums of cells, each
    evaluated per seed (a cell vs its control: ``{cell: 1}`` vs ``{"share_0": 1}``; E5:
    ``{"leverage_25": 1, "leverage_0": -1}`` vs ``{"share_25": 1, "share_0": -1}``)."""

    label: str
    family: str
    treated: Mapping[str, int]
    control: Mapping[str, int]

    @property
    def cells(self) -> list[str]:
        """Every cell the contrast reads: the treated cells, then the control's others."""
        return [*self.treated, *(c for c in self.control if c not in self.treated)]

    @property
    def control_label(self) -> str:
        """The control as text, e.g. ``share_25 - share_0``."""
        return _signed(self.control)

    @staticmethod
    def label_of(terms: Mapping[str, int]) -> str:
        """Signed cells as text, e.g. ``leverage_25 - share_25``."""
        return _signed(terms)


def _signed(terms: Mapping[str, int]) -> str:
    parts = [("- " if sign < 0 else "+ ") + cell for cell, sign in terms.items()]
    return " ".join(parts).removeprefix("+ ")


@dataclass
class PairedSample:
    """Per-seed values of a contrast over the seeds where every cell has a defined outcome;
    ``dropped`` names each seed of the treated cell that could not be paired, and why."""

    seeds: list[int]
    treated: np.ndarray
    control: np.ndarray
    dropped: dict[int, str] = field(default_factory=dict)

    @property
    def differences(self) -> np.ndarray:
        """Treated minus control per paired seed (shape ``(len(seeds),)``)."""
        return self.treated - self.control


def seed_values(outcomes: pl.DataFrame, y: str) -> dict[str, dict[int, float | None]]:
    """``{cell: {seed: y}}`` with undefined values (null, NaN, inf) as None."""
    out: dict[str, dict[int, float | None]] = {}
    if y not in outcomes.columns:
        return out
    for cell, seed, value in outcomes.select("cell", "seed", y).iter_rows():
        v = None if value is None else float(value)
        out.setdefault(cell, {})[int(seed)] = v if v is not None and math.isfinite(v) else None
    return out


def pair(values: Mapping[str, Mapping[int, float | None]], contrast: Contrast,
         exclude_seeds: Iterable[int] = ()) -> PairedSample:
    """The contrast seed by seed over the seeds of its first treated cell, less
    ``exclude_seeds`` (reported as dropped, like a seed whose control run is missing or whose
    outcome is undefined in one of the cells)."""
    first = next(iter(contrast.treated))
    excluded = set(exclude_seeds)
    seeds, treated, control, dropped = [], [], [], {}
    for seed in sorted(values.get(first, {})):
        if seed in excluded:
            dropped[seed] = "pilot seed (excluded from confirmatory estimates)"
            continue
        missing = [c for c in contrast.cells if seed not in values.get(c, {})]
        if missing:
            dropped[seed] = f"no {', '.join(missing)} run"
            continue
        undefined = [c for c in contrast.cells if values[c][seed] is None]
        if undefined:
            dropped[seed] = f"undefined in {', '.join(undefined)}"
            continue
        seeds.append(seed)
        treated.append(sum(s * values[c][seed] for c, s in contrast.treated.items()))
        control.append(sum(s * values[c][seed] for c, s in contrast.control.items()))
    return PairedSample(seeds, np.array(treated, dtype=float), np.array(control, dtype=float),
                        dropped)


def paired_differences(outcomes: pl.DataFrame, control: str,
                       columns: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per treated cell: ``{"n_pairs": seeds shared with the control, y: differences}``.

    Args:
        outcomes: one row per run with columns ``cell``, ``seed`` and the outcome columns.
        control: the control cell (``share_0`` in the protocol); it must be present.
        columns: outcome columns to difference; those absent from ``outcomes`` are skipped.

    Returns:
        Cells in sorted order (the control excluded); for each outcome a Float64 series of the
        finite differences y(cell, s) - y(control, s) (nulls and NaN/inf dropped).
    """
    import polars as pl  # why: Snakemake's process imports this module, never a table
    present = [y for y in columns if y in outcomes.columns]
    values = {y: seed_values(outcomes, y) for y in present}
    by_cell: dict[str, set[int]] = {}
    for cell, seed in outcomes.select("cell", "seed").iter_rows():
        by_cell.setdefault(cell, set()).add(int(seed))
    table: dict[str, dict[str, Any]] = {}
    for cell in sorted(set(by_cell) - {control}):
        row: dict[str, Any] = {"n_pairs": len(by_cell[cell] & by_cell.get(control, set()))}
        for y in present:
            sample = pair(values[y], Contrast(cell, "", {cell: 1}, {control: 1}))
            row[y] = pl.Series(y, sample.differences, dtype=pl.Float64)
        table[cell] = row
    return table


# Numeric columns of a gathered outcomes frame that describe the run, not its market.
RUN_COLUMNS = ("seed", "llm_share")


def outcome_columns(outcomes: pl.DataFrame) -> list[str]:
    """The numeric outcome columns of a gathered frame, in its order (run columns excluded)."""
    return [c for c in outcomes.columns
            if outcomes[c].dtype.is_numeric() and c not in RUN_COLUMNS]


def control_sd(outcomes: pl.DataFrame, control: str) -> pl.DataFrame:
    """The free σ estimates (protocol §3): for every outcome of the ``control`` cell, the number
    of runs with a finite value, their mean and their SD (ddof 1; null below two runs).

    Args:
        outcomes: one row per run (``cell``, ``seed``, outcome columns), e.g. the sigma design's
            outcomes.parquet (share_0, seeds 1-30).
        control: the control cell; ValueError when absent.

    Returns: columns outcome, n, mean, sd; one row per outcome, in the frame's column order.
    """
    import polars as pl  # why: Snakemake's process imports this module, never a table
    base = outcomes.filter(pl.col("cell") == control)
    if not base.height:
        raise ValueError(f"no runs of the control cell {control!r}")
    rows = []
    for y in outcome_columns(base):
        v = base[y].cast(pl.Float64).drop_nulls()
        v = v.filter(v.is_finite())
        rows.append({"outcome": y, "n": len(v), "mean": float(v.mean()) if len(v) else None,
                     "sd": float(v.std(ddof=1)) if len(v) > 1 else None})
    return pl.DataFrame(rows, schema={"outcome": pl.Utf8, "n": pl.Int64, "mean": pl.Float64,
                                      "sd": pl.Float64})


def estimate(sample: PairedSample, level: float = LEVEL, n_resamples: int = N_BOOTSTRAP,
             seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The pre-registered estimate of one paired sample.

    Args:
        sample: per-seed treated and control values (:func:`pair`).
        level: confidence level of both intervals.
        n_resamples: bootstrap resamples of the seeds.
        seed: the bootstrap's random seed (fixed: the same data give the same interval).

    Returns:
        ``n`` (pairs), ``treated_mean``, ``control_mean``, ``diff`` (mean paired difference),
        ``se`` (SD of the differences, ddof 1, over sqrt(n)), ``t_low``/``t_high`` (Student t
        interval, n - 1 degrees of freedom), ``boot_low``/``boot_high`` (percentile interval of
        the mean over seed-level resamples), ``p`` (two-sided one-sample t test of mean 0).
        Statistics a sample is too small for are None: means need 1 pair, the rest 2; with zero
        spread the intervals and p are None (nothing varies: :func:`not_estimable` says why).
    """
    from scipy import stats  # why: scipy takes ~0.3 s to load; only an estimate needs it

    d = sample.differences
    n = len(d)
    out: dict[str, Any] = {"n": n, "treated_mean": None, "control_mean": None, "diff": None,
                           "se": None, "t_low": None, "t_high": None, "boot_low": None,
                           "boot_high": None, "p": None}
    if n == 0:
        return out
    out.update(treated_mean=float(sample.treated.mean()), control_mean=float(sample.control.mean()),
               diff=float(d.mean()))
    if n < 2:
        return out
    se = float(d.std(ddof=1) / math.sqrt(n))
    scale = float(max(np.abs(sample.treated).max(), np.abs(sample.control).max()))
    if se <= NO_SPREAD * scale:
        # Every difference equal up to rounding (a contrast of sums of equal values leaves
        # ~1e-19 of float noise): no interval and no test (see :func:`not_estimable`).
        out["se"] = 0.0
        return out
    out["se"] = se
    test = stats.ttest_1samp(d, 0.0)
    ci = test.confidence_interval(level)
    boot = stats.bootstrap((d,), np.mean, n_resamples=n_resamples, confidence_level=level,
                           method="percentile", rng=np.random.default_rng(seed))
    out.update(t_low=float(ci.low), t_high=float(ci.high), p=float(test.pvalue),
               boot_low=float(boot.confidence_interval.low),
               boot_high=float(boot.confidence_interval.high))
    return out


def not_estimable(e: Mapping[str, Any], dropped: Mapping[int, str] | None = None,
                  sample: PairedSample | None = None,
                  contrast: Contrast | None = None) -> str | None:
    """Why an :func:`estimate` has no interval, in words, or None when it has one.

    Args:
        e: the estimate (``n``, ``se``, ``diff``).
        dropped: seed -> why it was not paired (:class:`PairedSample`), to name the cause of
            an empty sample.
        sample: the paired sample, to say why nothing varies: the outcome never varied (one
            value in every run of its cells: a bubble that never occurs) or the treated cells
            equal the control seed by seed.
        contrast: its contrast (the cells named).
    """
    if e["n"] == 0:
        reasons = sorted(set((dropped or {}).values()))
        return ("no paired seeds: " + "; ".join(reasons)) if reasons else "no paired seeds"
    if e["n"] == 1:
        return "one paired seed: no standard error"
    if e["se"] == 0:
        if sample is not None and contrast is not None:
            if _same(np.concatenate([sample.treated, sample.control])):
                return (f"never varied: {sample.treated[0]:.6g} in every run of "
                        f"{', '.join(contrast.cells)}")
            if _same(sample.differences) and abs(e["diff"]) <= _tiny(sample):
                return (f"identical to {contrast.control_label} seed by seed (the same runs' "
                        "values)")
        return f"no variation: every paired difference is {e['diff']:.6g}"
    return None


def _tiny(sample: PairedSample) -> float:
    scale = max(np.abs(sample.treated).max(), np.abs(sample.control).max(), 0.0)
    return NO_SPREAD * scale


def _same(x: np.ndarray) -> bool:
    return bool(len(x)) and float(x.max() - x.min()) <= NO_SPREAD * float(np.abs(x).max())


def identical_seeds(sample: PairedSample) -> list[int]:
    """The paired seeds where the treated cells' value equals the control's (up to rounding):
    where the treatment changed nothing this outcome measures, e.g. a breaker that never
    halted."""
    tol = _tiny(sample)
    return [s for s, d in zip(sample.seeds, sample.differences, strict=True) if abs(d) <= tol]


def caveat(sample: PairedSample, contrast: Contrast,
           idle: Mapping[int, Sequence[str]] | None = None) -> str | None:
    """What an estimate with an interval rests on that is not evidence, in words, or None:
    the seeds where the treated cells equal the control (part of the estimate is the control
    against itself), and the seeds where a mechanism of its first treated cell never acted
    (``idle``: seed -> idle mechanisms)."""
    parts = []
    same = identical_seeds(sample)
    if same and len(same) < len(sample.seeds):
        parts.append(f"identical to {contrast.control_label} on {len(same)} of "
                     f"{len(sample.seeds)} seeds ({', '.join(map(str, same))})")
    idle_on = {m: [s for s in sample.seeds if m in (idle or {}).get(s, ())]
               for ms in (idle or {}).values() for m in ms}
    for m, seeds in idle_on.items():
        if seeds:
            acted = [s for s in sample.seeds if s not in seeds]
            parts.append("its " + activity_phrase(m, {"acted": acted, "idle": seeds}))
    return "; ".join(parts) or None


def activity_phrase(m: str, seeds: Mapping[str, Sequence[int]]) -> str:
    """``breaker acted on 1 of 3 seeds (102)``: what mechanism ``m`` did, from its seeds
    ``acted`` and ``idle`` (``estimands.activity_by_seed``'s entry); the seeds it acted on
    are named when it did not act on all."""
    acted, n = seeds["acted"], len(seeds["acted"]) + len(seeds["idle"])
    return (f"{m} acted on {len(acted)} of {n} seeds"
            + (f" ({', '.join(map(str, acted))})" if acted and seeds["idle"] else ""))


def mde(sigma_d: float | None, n: int, alpha: float = ALPHA, power: float = POWER,
        family_size: int = 1) -> float | None:
    """The minimum detectable effect of the paper's test: the smallest true mean paired
    difference that the two-sided one-sample t test on ``n`` paired seeds (n - 1 degrees of
    freedom) rejects with probability ``power`` at the Holm-adjusted level α / ``family_size``
    (Holm's first step; the Bonferroni bound, so the power is at least ``power`` for every
    member of the family). Power comes from the noncentral t distribution (scipy), noncentrality
    δ√n/σ_d; no normal approximation, which understates the MDE 5.8-fold at n = 2.

    Args:
        sigma_d: SD of the paired differences (the pilot's σ̂_d), in the outcome's units.
        n: paired seeds.
        alpha: the family's level (two-sided).
        power: the power to reach (0 < power < 1).
        family_size: tests in the Holm family (the tier's contrasts × primary outcomes).

    Returns:
        The MDE in the outcome's units; None when undefined (no σ̂_d, or n < 2: a t test needs
        two pairs); 0.0 for σ̂_d = 0.
    """
    from scipy import optimize, stats  # why: scipy takes ~0.3 s to load; only an MDE needs it

    if sigma_d is None or not math.isfinite(sigma_d) or n < 2 or family_size < 1:
        return None
    if sigma_d == 0:
        return 0.0
    df, level = n - 1, alpha / family_size
    crit = float(stats.t.ppf(1 - level / 2, df))

    def excess_power(effect: float) -> float:  # effect in units of σ_d
        nc = effect * math.sqrt(n)
        # P(T > c) + P(T < -c), the lower tail as P(T' > c) with T' of noncentrality -nc:
        # scipy's nct.cdf far in the lower tail returns NaN at 1 df, its sf returns 0.
        return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc)) - power

    high = 1.0
    while excess_power(high) < 0:
        high *= 2
    return optimize.brentq(excess_power, 0.0, high, xtol=1e-12, rtol=1e-10) * abs(sigma_d)


def sigma_upper(sigma_hat: float | None, df: int, level: float = SIGMA_LEVEL) -> float | None:
    """The upper ``level`` confidence bound of σ_d from σ̂_d on ``df`` degrees of freedom:
    σ̂_d √(df / χ²_{1-level, df}), since df σ̂_d² / σ_d² ~ χ²_df for normal paired differences
    (Run protocol §4: the pilot's σ̂_d sizes the tiers; the bound is what it can vouch for).

    Args:
        sigma_hat: the SD of the paired differences (ddof 1), in the outcome's units.
        df: its degrees of freedom (pairs - 1; a pooled σ̂_d: the sum over its cells).
        level: the bound's one-sided confidence level (0 < level < 1).

    Returns:
        The bound in the outcome's units (2.12 σ̂_d on 2 df at 80 %); None when σ̂_d is
        missing or df < 1.
    """
    from scipy import stats  # why: scipy takes ~0.3 s to load; only an MDE needs it

    if sigma_hat is None or not math.isfinite(sigma_hat) or df < 1:
        return None
    return float(sigma_hat * math.sqrt(df / stats.chi2.ppf(1 - level, df)))


def pooled_sigma(parts: Iterable[tuple[float | None, int]]) -> tuple[float | None, int]:
    """σ̂_d pooled over cells a design declares exchangeable for an outcome: √(Σ df_i σ̂_i² /
    Σ df_i) on Σ df_i degrees of freedom; ``parts`` are (σ̂_i, df_i), missing σ̂ skipped.
    Returns (None, 0) when nothing is left."""
    kept = [(s, df) for s, df in parts if s is not None and math.isfinite(s) and df >= 1]
    df = sum(d for _, d in kept)
    if not df:
        return None, 0
    return math.sqrt(sum(d * s * s for s, d in kept) / df), df


def family_size(n_contrasts: int, primary: Sequence[str]) -> int:
    """Tests in a tier's Holm family: its contrasts × its primary outcomes."""
    return n_contrasts * len(primary)


def holm(p: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of one family's p-values (None: no test, left out of the
    family's count): sorted p_(1) <= ... <= p_(m), adjusted p_(i) = max over j <= i of
    min(1, (m - j + 1) p_(j))."""
    tested = sorted((v, i) for i, v in enumerate(p) if v is not None)
    m = len(tested)
    out: list[float | None] = [None] * len(p)
    running = 0.0
    for rank, (value, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * value))
        out[i] = running
    return out


def applies(y: str, mechanisms: set[str]) -> bool:
    """Whether outcome ``y`` is estimated for a cell with these switched-on mechanisms: an
    outcome that measures a mechanism (its ``measures``, e.g. the breaker's ``n_halts``) only
    where one that it measures is on."""
    need = {m.name for m in MECHANISMS if y in m.measures}
    return not need or bool(need & mechanisms)


def estimates(outcomes: pl.DataFrame, contrasts: Sequence[Contrast],
              columns: Sequence[str] = PAPER_OUTCOMES, exclude_seeds: Iterable[int] = (),
              mde: Mapping[str, Mapping[str, float | None]] | None = None,
              primary: Mapping[str, Sequence[str]] | None = None) -> pl.DataFrame:
    """One row per contrast and outcome: the :func:`estimate`, its role, the Holm-adjusted p
    within the contrast's family, the minimum detectable effect (``mde[cell][y]``, e.g. from
    freeze.json), why it is not estimable (:func:`not_estimable`: an outcome that never
    varied, a cell identical to its control), what an estimable one rests on that is not
    evidence (:func:`caveat`: seeds identical to the control, seeds where the mechanism never
    acted) and the seeds that were dropped, with the reason.

    Args:
        outcomes: the gathered outcomes (one row per run).
        contrasts: what to estimate, each with its family (a tier).
        columns: the outcomes to estimate.
        exclude_seeds: seeds left out (the pilot's, in a confirmatory design).
        mde: cell -> outcome -> MDE.
        primary: family -> its declared primary outcomes (the design's ``primary_outcomes``):
            Holm adjusts those rows within the family (its contrasts × primary outcomes);
            every other row is ``secondary`` (unadjusted, exploratory: ``p_holm`` None). None:
            every outcome is primary.

    Outcomes absent from ``outcomes`` are skipped, and so are halts and the reject ratio in a
    cell that does not switch on the breaker or the position limit (``mechanisms`` column).
    """
    import polars as pl  # why: Snakemake's process imports this module, never a table
    exclude = list(exclude_seeds)
    values = {y: seed_values(outcomes, y) for y in columns if y in outcomes.columns}
    switched: dict[str, set[str]] = {}
    idle: dict[str, dict[int, list[str]]] = {}  # cell -> seed -> mechanisms that never acted
    if "mechanisms" in outcomes.columns:
        for cell, mechs in outcomes.select("cell", "mechanisms").iter_rows():
            switched.setdefault(cell, set()).update(filter(None, (mechs or "").split(",")))
    if "mechanisms_idle" in outcomes.columns:
        for cell, seed, mechs in outcomes.select("cell", "seed", "mechanisms_idle").iter_rows():
            idle.setdefault(cell, {})[int(seed)] = [m for m in (mechs or "").split(",") if m]
    rows = []
    for c in contrasts:
        first = next(iter(c.treated))
        for y, vals in values.items():
            if not applies(y, switched.get(first, set())):
                continue
            sample = pair(vals, c, exclude)
            # keyed by the contrast: an interaction (E5) has no MDE of its own, not its first
            # cell's
            mde_y = (mde or {}).get(c.label, {}).get(y)
            e = estimate(sample)
            is_primary = primary is None or y in primary.get(c.family, ())
            why = not_estimable(e, sample.dropped, sample, c)
            rows.append({
                "family": c.family, "cell": c.label, "control": c.control_label, "outcome": y,
                "role": "primary" if is_primary else "secondary", **e, "p_holm": None,
                "mde": mde_y, "not_estimable": why,
                "caveat": None if why else caveat(sample, c, idle.get(first)),
                "dropped": "; ".join(f"{s}: {why}" for s, why in sample.dropped.items()),
            })
    for fam in dict.fromkeys(r["family"] for r in rows):
        members = [r for r in rows if r["family"] == fam and r["role"] == "primary"]
        for r, adj in zip(members, holm([r["p"] for r in members]), strict=True):
            r["p_holm"] = adj
    schema = {"family": pl.Utf8, "cell": pl.Utf8, "control": pl.Utf8, "outcome": pl.Utf8,
              "role": pl.Utf8, "n": pl.Int64,
              **dict.fromkeys(("treated_mean", "control_mean", "diff", "se", "t_low", "t_high",
                               "boot_low", "boot_high", "p", "p_holm", "mde"), pl.Float64),
              "not_estimable": pl.Utf8, "caveat": pl.Utf8, "dropped": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)

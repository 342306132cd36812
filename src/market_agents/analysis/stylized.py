"""Stylized facts of a price series: is the classical baseline a realistic market?

The targets (median over seeds) come from the empirical literature on intraday returns
(Cont 2001): fat tails (excess kurtosis > 1, Hill tail index of the top 5 % of |r| in 2–4.5),
no linear predictability (|acf lag 1| < 0.084), volatility clustering (mean acf of |r| over
lags 1–10 > 0.05), and prices that track value (no 5 %/10-tick bubble in ≥ 90 % of seeds).
"""

from __future__ import annotations

import numpy as np

from market_agents.analysis.outcomes import bubbles, excess_kurtosis, log_returns

TARGETS = {
    "excess_kurtosis": (1.0, None),
    "abs_acf1": (None, 0.084),
    "acf_abs_r_1_10": (0.05, None),
    "hill_tail_index": (2.0, 4.5),
}


def acf(x: np.ndarray, lag: int) -> float:
    """The sample autocorrelation of ``x`` (1-d) at ``lag`` ticks (0 for a constant series)."""
    x = x - x.mean()
    denom = float(np.dot(x, x))
    return float(np.dot(x[:-lag], x[lag:]) / denom) if denom > 0 else 0.0


def hill(abs_r: np.ndarray, tail: float = 0.05) -> float:
    """The Hill estimator of the tail index of ``abs_r`` (absolute returns, 1-d) over its
    top ``tail`` share (at least 2 points); NaN when the sample is too small.
    """
    x = np.sort(abs_r[abs_r > 0])[::-1]
    k = max(int(tail * len(x)), 2)
    if len(x) <= k:
        return float("nan")
    return float(1.0 / np.mean(np.log(x[:k] / x[k])))


def facts(mid: np.ndarray, value: np.ndarray, burn_in: int) -> dict[str, float]:
    """Facts of one run's mid-price path (ticks from ``burn_in`` on) against true value V.

    Returns, kurtosis and bubbles are scored by the same functions as the outcomes."""
    p, v = mid[burn_in:], value[burn_in:]
    r = log_returns(p)
    ab = np.abs(r)
    return {
        "excess_kurtosis": excess_kurtosis(r) or 0.0,
        "abs_acf1": abs(acf(r, 1)),
        "acf_abs_r_1_10": float(np.mean([acf(ab, k) for k in range(1, 11)])),
        "hill_tail_index": hill(ab),
        "bubble_5pct_10": float(bubbles(p, v, 0.05, 10)[0] > 0),
        "mean_abs_mispricing": float(np.mean(np.abs(p / v - 1))),
    }


def verdict(rows: list[dict[str, float]]) -> dict[str, tuple[float, bool]]:
    """Median of each fact over seeds and whether it meets its target."""
    out: dict[str, tuple[float, bool]] = {}
    for key, (lo, hi) in TARGETS.items():
        med = float(np.nanmedian([r[key] for r in rows]))
        out[key] = (med, (lo is None or med > lo) and (hi is None or med < hi))
    no_bubble = 1.0 - float(np.mean([r["bubble_5pct_10"] for r in rows]))
    out["seeds_without_bubble"] = (no_bubble, no_bubble >= 0.9)
    return out

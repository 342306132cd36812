"""The fundamental value V and the public value V^pub, drawn up front from one stream.

V_t = V_{t-1} + sigma·step_t + jumps, with steps and jumps loaded on a common factor when there
are two assets. Hidden jumps arrive inside news periods; V^pub is V as of the last news tick,
so traders learn a jump at the next release. A scheduled ``fundamental_jump`` moves V and is
announced at once (V^pub follows in the same tick); a ``placebo`` is announced and moves nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from market_agents.config import FundamentalsConfig, Shock


@dataclass(frozen=True)
class FundamentalPath:
    """The value paths of a run: V (hidden) and V^pub (public), shape ``(n_assets, ticks)``."""

    value: np.ndarray  # V, shape (n_assets, ticks)
    public: np.ndarray  # V^pub, same shape


def _loaded(common: np.ndarray, idio: np.ndarray, loading: np.ndarray) -> np.ndarray:
    """Mix a common and an idiosyncratic draw so each asset keeps unit variance."""
    b = loading[:, None]
    return b * common[None, :] + np.sqrt(1.0 - b**2) * idio


def draw_path(
    cfg: FundamentalsConfig, shocks: list[Shock], ticks: int, rng: np.random.Generator
) -> FundamentalPath:
    """Draw the value paths of a run: Gaussian steps and Student-t jumps on a common factor,
    scheduled shocks, and V^pub = V as of the last news release.

    Args:
        cfg: the ``fundamentals`` config.
        shocks: the scheduled shocks (jumps are announced at once; placebos move nothing).
        ticks: the run's length.
        rng: the fundamentals stream; every variate is drawn in a fixed order and shape.

    Returns:
        The :class:`FundamentalPath`.
    """
    n = cfg.n_assets
    loading = np.array(cfg.factor_loading if cfg.factor_loading else [0.0] * n, dtype=float)
    # Draw every variate in a fixed order and shape so the path depends only on the seed and
    # the fundamentals block, never on the population.
    steps = _loaded(rng.standard_normal(ticks), rng.standard_normal((n, ticks)), loading)
    n_periods = -(-ticks // cfg.news_interval)
    jump_on = rng.random(n_periods) < cfg.jump_prob
    jump_at = rng.integers(0, cfg.news_interval, size=n_periods)
    if cfg.jump_df is None:
        common, idio = rng.standard_normal(n_periods), rng.standard_normal((n, n_periods))
    else:  # unit-variance Student-t: fat-tailed news
        scale = np.sqrt((cfg.jump_df - 2) / cfg.jump_df)
        common = rng.standard_t(cfg.jump_df, n_periods) * scale
        idio = rng.standard_t(cfg.jump_df, (n, n_periods)) * scale
    jump_size = _loaded(common, idio, loading)

    increments = cfg.sigma * steps
    increments[:, 0] = 0.0
    for p in np.flatnonzero(jump_on):
        t = p * cfg.news_interval + jump_at[p]
        if 0 < t < ticks:
            increments[:, t] += cfg.jump_sigma * jump_size[:, p]
    announced = np.zeros(ticks, dtype=bool)
    announced[:: cfg.news_interval] = True
    for s in shocks:
        # A placebo is only logged (manifest, outcomes); it neither moves V nor releases news.
        if s.kind == "fundamental_jump":
            for a in range(n) if s.asset is None else [s.asset]:
                increments[a, s.time] += s.size
            announced[s.time] = True

    value = np.maximum(cfg.v0 + np.cumsum(increments, axis=1), 0.01 * cfg.v0)
    news_ticks = np.flatnonzero(announced)
    last_news = news_ticks[np.searchsorted(news_ticks, np.arange(ticks), side="right") - 1]
    public = value[:, last_news]
    return FundamentalPath(value=value, public=public)

"""The realism measures on series with known answers, the report's judgement, and a long run
of the classical market that keeps every trader type off its bounds (issue 23)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.analysis import realism, stylized
from market_agents.config import load_config
from market_agents.sim.simulation import simulate

BASELINE = Path(__file__).resolve().parents[2] / "config" / "baseline.yaml"


def garch(n: int, rng: np.random.Generator, omega=1e-6, alpha=0.1, beta=0.88) -> np.ndarray:
    """A GARCH(1,1) return series of length n (Bollerslev 1986)."""
    r = np.empty(n)
    var = omega / (1 - alpha - beta)
    for t in range(n):
        r[t] = np.sqrt(var) * rng.standard_normal()
        var = omega + alpha * r[t] ** 2 + beta * var
    return r


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=5, max_size=60),
       st.integers(1, 8))
def test_acf_matches_the_direct_sum(xs, max_lag):
    x = np.array(xs)
    d = x - x.mean()
    if np.abs(d).max() > 0:  # scale-free: squares of 1e-159 are subnormal and inexact
        d = d / np.abs(d).max()
    denom = float(np.dot(d, d))
    expected = [float(np.dot(d[:-k], d[k:]) / denom) if denom > 0 and k < len(x) else 0.0
                for k in range(1, max_lag + 1)]
    got = realism.acf_many(x, max_lag)
    assert got.shape == (max_lag,)
    assert np.allclose(got, expected, atol=1e-9 * max(1.0, np.abs(expected).max()))


def test_ljung_box_accepts_iid_returns_at_its_nominal_rate():
    rng = np.random.default_rng(1)
    p = [realism.ljung_box(rng.standard_normal(600), 10)[1] for _ in range(400)]
    share = np.mean(np.array(p) < 0.05)
    # 400 series: the nominal 5 % within about 3 binomial standard errors (0.011).
    assert 0.017 < share < 0.085, share
    # ... Student-t(4) returns (fat tails, no dependence) too.
    p = [realism.ljung_box(rng.standard_t(4, 600), 10)[1] for _ in range(400)]
    assert 0.017 < np.mean(np.array(p) < 0.05) < 0.085


def test_ljung_box_rejects_an_ar1_with_phi_0_2():
    rng = np.random.default_rng(2)
    rejects = 0
    for _ in range(100):
        e = rng.standard_normal(600)
        r = np.empty_like(e)
        r[0] = e[0]
        for t in range(1, len(e)):
            r[t] = 0.2 * r[t - 1] + e[t]
        q, p = realism.ljung_box(r, 10)
        rejects += p < 0.05
        assert q > 0
    assert rejects >= 90


def test_garch_volatility_clustering_is_detected_and_iid_is_not():
    rng = np.random.default_rng(3)
    r = garch(20_000, rng)
    band = realism.white_noise_band(len(r))
    abs_acf = realism.acf_many(np.abs(r), 100)
    assert np.all(abs_acf[:10] > band)  # significantly positive at short lags
    assert abs_acf[49] > band  # ... and still at lag 50 (persistence 0.98)
    beta, c = realism.power_law_decay(abs_acf)
    assert 0 < beta < 2 and c > 0
    iid = realism.acf_many(np.abs(rng.standard_normal(20_000)), 100)
    assert np.mean(np.abs(iid) < band) > 0.9
    # Returns of a GARCH process are uncorrelated: the band holds at most lags.
    assert np.mean(np.abs(realism.acf_many(r, 20)) < 2 * band) > 0.9


def test_kurtosis_by_scale_falls_toward_zero_with_aggregation():
    rng = np.random.default_rng(4)
    steps = rng.standard_t(5, 200_000) * 0.001
    k = realism.kurtosis_by_scale(np.cumsum(steps))
    assert k[1] > 3  # t(5): excess kurtosis 6
    assert k[100] < 1 and k[1] > k[5] > k[20]
    gauss = realism.kurtosis_by_scale(np.cumsum(rng.standard_normal(200_000)))
    assert all(abs(v) < 0.5 for v in gauss.values())


def test_hill_recovers_a_pareto_tail_index_within_its_standard_error():
    rng = np.random.default_rng(5)
    x = rng.pareto(3.0, 20_000) + 1.0
    alpha, se = realism.hill(x, tail=0.05)
    assert abs(alpha - 3.0) < 3 * se and se == pytest.approx(alpha / np.sqrt(1000))
    assert all(np.isnan(v) for v in realism.hill(np.array([1.0, 2.0]), 0.05))


def test_mispricing_share_and_longest_episode_leave_out_the_shock_window():
    v = np.full(1000, 100.0)
    p = v.copy()
    p[100:180] = 106.0  # an 80-tick episode beyond 5 %
    p[500:530] = 94.0  # inside the 50 ticks after a shock at 490
    excluded = realism.after_shocks(1000, [490], 50)
    m = realism.mispricing(p, v, excluded)
    assert m["longest_episode"] == 80
    assert m["share_beyond"] == pytest.approx(80 / 950)
    assert m["max"] == pytest.approx(0.06)
    assert realism.mispricing(p, v)["share_beyond"] == pytest.approx(110 / 1000)


def test_holdings_are_rebuilt_from_the_trade_log():
    held = realism.holdings_by_type(
        4, trade_tick=np.array([1, 1, 3]), trade_price=np.array([10.0, 11.0, 12.0]),
        trade_qty=np.array([2, 1, 3]), buyer=np.array([0, 0, 1]), seller=np.array([1, 2, 0]),
        slot_type={0: "a", 1: "b", 2: "b"}, start_cash={0: 100.0, 1: 50.0, 2: 50.0},
        start_shares={0: 5, 1: 5, 2: 5})
    assert held["a"]["shares"].tolist() == [5, 8, 8, 5]
    assert held["a"]["cash"].tolist() == [100, 69, 69, 105]
    assert held["b"]["shares"].tolist() == [5, 3.5, 3.5, 5]
    assert realism.share_below(np.array([1.0, 0.5, 0.0]), 10.0) == pytest.approx(2 / 3)
    assert realism.share_below(np.array([0.0]), 0.0) == 0.0


def _row(rng, n=600, ar=0.0):
    e = rng.standard_t(4, n)
    r = e.copy()
    for t in range(1, n):
        r[t] = ar * r[t - 1] + e[t]
    mid = 100 * np.exp(np.cumsum(r * 1e-3))
    return stylized.run_facts(mid, mid.copy(), np.ones(n), 0, [])


def test_the_report_judges_each_target_at_its_horizon_and_names_the_misses():
    rng = np.random.default_rng(6)
    good = stylized.report([_row(rng) for _ in range(20)], ticks=600)
    assert good["checks"]["ljung_box_reject_share"]["ok"] is True
    assert good["checks"]["raw_abs_acf_50"]["ok"] is None  # a long-horizon fact on 600 ticks
    # i.i.d. returns do not cluster: the short-lag clustering target is missed and named
    assert "raw_abs_acf_1_10" in stylized.misses(good)
    # a path without V^pub or trader types (PAMS's) is not judged on what needs them ...
    for name in ("premium", "value_null_excess", "public_longest_mispricing", "holdings_min"):
        assert good["checks"][name]["judged"] is False and good["checks"][name]["value"] is None
    # ... but a measure that is NaN (a price that never moves has no tail) is still a miss
    flat = np.full(600, 100.0)
    still = stylized.report([stylized.run_facts(flat, flat, np.ones(600), 0, [])] * 3, 600)
    assert "hill_tail_index" in stylized.misses(still)
    assert "ljung_box_reject_share" not in stylized.misses(good)
    bad = stylized.report([_row(rng, ar=0.3) for _ in range(20)], ticks=600)
    assert {"ljung_box_reject_share", "acf_within_band"} <= set(stylized.misses(bad))
    long = stylized.report([_row(rng) for _ in range(3)], ticks=20_000)
    assert long["checks"]["ljung_box_reject_share"]["ok"] is None
    assert long["checks"]["raw_abs_acf_50"]["judged"] is True


LONG_SEEDS = (7,)


@pytest.fixture(scope="module")
def long_runs():
    """5,000-tick baseline runs (seed -> (config, tables)), made once for the module."""
    config = load_config(BASELINE, ["simulation.ticks=5000"])
    return {seed: (config, simulate(config, seed, progress=False)) for seed in LONG_SEEDS}


def test_a_long_classical_run_keeps_every_trader_type_off_its_bounds(long_runs):
    # Before issue 23 the fundamentalists of seed 7 held half their shares by tick 2,000
    # and 1-2 of 20 in the bubbles after it; 5,000 ticks show the drain in a second or two.
    config, tables = long_runs[7]
    agents = tables["agents"]
    held, starts = stylized.holdings_of_run(config, tables)
    # The rebuilt holdings end where the exchange's accounts end.
    for kind in held:
        final = agents.filter(pl.col("type") == kind)
        assert held[kind]["shares"][-1] == pytest.approx(final["shares"].mean())
        assert held[kind]["cash"][-1] == pytest.approx(final["cash"].mean(), abs=0.01)
    for kind, series in held.items():
        start = starts[kind]
        for k in ("shares", "cash"):
            assert realism.share_below(series[k], start[k], 0.10) <= 0.01, (kind, k)
            # ... and never near it (trend followers' holdings swing with the trend, by
            # design inside [0, 2 x start]; the others' stay close to their start).
            assert series[k].min() > 0.25 * start[k], (kind, k)
    ticks = tables["ticks"]
    m = realism.mispricing(ticks["mid_price"].to_numpy(), ticks["fundamental"].to_numpy())
    assert m["share_beyond"] < 0.01 and m["longest_episode"] <= 100


def test_a_news_calendar_does_not_pass_for_volatility_clustering():
    # Independent returns, ten times larger every 10th tick (a release calendar): the raw
    # acf of |r| is high at lags 10, 20, ..., the deseasonalized one is not.
    rng = np.random.default_rng(7)
    n = 20_000
    r = rng.standard_normal(n) * np.where(np.arange(n) % 10 == 3, 10.0, 1.0)
    band = realism.white_noise_band(n)
    raw = realism.acf_many(np.abs(r), 100)
    assert raw[49] > 10 * band
    flat = realism.acf_many(realism.deseasonalize(np.abs(r), 10), 100)
    assert np.mean(np.abs(flat) < band) > 0.9 and abs(flat[49]) < 2 * band
    # ... and a GARCH series keeps its clustering after the same division.
    g = np.abs(garch(n, rng))
    assert realism.acf_many(realism.deseasonalize(g, 10), 100)[49] > band
    assert realism.deseasonalize(g, 1) is g


def test_the_robust_portmanteau_holds_its_size_under_clustering_where_ljung_box_does_not():
    # A GARCH(1,1) series is a martingale difference (unpredictable by construction), but
    # its volatility clustering inflates the variance of the sample acf: Ljung-Box rejects it
    # far above 5 % on 600 points; the heteroskedasticity-robust statistic does not.
    rng = np.random.default_rng(8)
    series = [garch(650, rng)[50:] for _ in range(300)]
    standard = np.mean([realism.ljung_box(r, 10)[1] < 0.05 for r in series])
    robust = np.mean([realism.robust_portmanteau(r, 10)[1] < 0.05 for r in series])
    assert standard > 0.15 and robust < 0.09, (standard, robust)
    iid = np.mean([realism.robust_portmanteau(rng.standard_t(4, 600), 10)[1] < 0.05
                   for _ in range(300)])
    assert 0.01 < iid < 0.09
    e = rng.standard_normal((100, 600))
    ar = np.empty_like(e)
    ar[:, 0] = e[:, 0]
    for t in range(1, 600):
        ar[:, t] = 0.2 * ar[:, t - 1] + e[:, t]
    assert np.mean([realism.robust_portmanteau(r, 10)[1] < 0.05 for r in ar]) >= 0.9


def _garch_paths(n: int, m: int, rng: np.random.Generator, alpha: float, persistence: float,
                 nu: float, burn: int = 500) -> np.ndarray:
    """``m`` GARCH(1,1) paths of ``n`` returns each, shape ``(m, n)``, with Student-t(``nu``)
    innovations scaled to unit variance (Bollerslev 1987; normal ones for ``nu=inf``), after
    ``burn`` ticks."""
    omega = 1e-6 * (1 - persistence)
    var = np.full(m, omega / (1 - persistence))
    z = (rng.standard_normal((n + burn, m)) if np.isinf(nu)
         else rng.standard_t(nu, (n + burn, m)) / np.sqrt(nu / (nu - 2)))
    out = np.empty((n + burn, m))
    for t in range(n + burn):
        out[t] = np.sqrt(var) * z[t]
        var = omega + alpha * out[t] ** 2 + (persistence - alpha) * var
    return out[burn:].T


@pytest.mark.parametrize("alpha,persistence", [(0.10, 0.95), (0.06, 0.995)])
def test_a_garch_that_meets_the_clustering_targets_fails_the_ljung_box_target(alpha,
                                                                              persistence):
    # Issue 35 asks for both: a median raw acf(|r|) over lags 1-10 of at least 0.05 (with
    # excess kurtosis above 3 and Hill in 2-5) and Ljung-Box rejecting in at most 10 % of
    # seeds. Ljung-Box assumes var(acf_k) = 1/n; under clustering it is
    # E[r_t^2 r_{t-k}^2]/(n sigma^4), larger. So the unpredictable series that meet the first
    # targets fail the second. Over a grid of 72 GARCH(1,1) (docs/market.md, "The same
    # conflict without any calendar"; bench/ljung_box_grid.py) every one that meets them
    # rejects in 23-71 % of 549-return samples (a 600-tick run's, after its burn-in). These
    # two are among the least-rejected, at 28-30 % here, while the robust test keeps its 5 %.
    rng = np.random.default_rng(35)
    paths = _garch_paths(549, 300, rng, alpha, persistence, nu=5)
    acf = np.median([np.mean(realism.acf_many(np.abs(r), 10)) for r in paths])
    kurt = np.median([np.mean((r - r.mean()) ** 4) / r.var() ** 2 - 3 for r in paths])
    hill = np.median([realism.hill(np.abs(r))[0] for r in paths])
    assert acf >= 0.05 and kurt > 3 and 2 < hill < 5, (acf, kurt, hill)
    rejects = np.mean([realism.ljung_box(r, 10)[1] < 0.05 for r in paths])
    robust = np.mean([realism.robust_portmanteau(r, 10)[1] < 0.05 for r in paths])
    assert rejects > 0.15 and robust < 0.10, (rejects, robust)


def test_hill_of_a_tied_tail_is_not_a_number_not_infinity():
    x = np.concatenate([np.full(30, 2.0), np.linspace(0.1, 1.0, 500)])
    assert all(np.isnan(v) for v in realism.hill(x, tail=0.05))


def _calendar(n: int, interval: int, rng: np.random.Generator, quiet_sd: float):
    """Returns of an efficient market on a news calendar: a Student-t(3) release every
    ``interval`` ticks, i.i.d. normal trading noise in between."""
    release = np.arange(n) % interval == 0
    news = np.where(release, rng.standard_t(3, n) * 0.006, 0.0)
    return news + np.where(release, 0.0, rng.normal(0.0, quiet_sd, n)), release, news


def test_news_variance_share_is_the_share_of_squared_returns_on_releases():
    r = np.array([0.02, 0.001, -0.001, -0.02, 0.0])
    release = np.array([True, False, False, True, False])
    assert realism.news_variance_share(r, release) == pytest.approx(0.0008 / 0.000802)
    assert np.isnan(realism.news_variance_share(np.zeros(3), np.zeros(3, dtype=bool)))


def test_the_calendar_null_keeps_the_news_and_the_quiet_variance():
    rng = np.random.default_rng(3)
    r, release, news = _calendar(20_000, 10, rng, 0.001)
    null = realism.calendar_null(r, release, news, np.random.default_rng(4))
    assert np.array_equal(null[release], news[release])
    assert np.std(null[~release]) == pytest.approx(np.std(r[~release]), rel=0.03)
    assert realism.acf_many(null[~release], 3) == pytest.approx(np.zeros(3), abs=0.03)


def test_ljung_box_over_rejects_an_unpredictable_market_whose_news_dominates():
    """Why the report carries the calendar null: with fat-tailed news on one tick in ten
    carrying most of the variance, Ljung-Box rejects an unpredictable series well above 5 %,
    and less so as trading variance between releases grows."""
    rng = np.random.default_rng(5)

    def rate(quiet_sd: float) -> float:
        return float(np.mean([realism.ljung_box(_calendar(550, 10, rng, quiet_sd)[0])[1] < 0.05
                              for _ in range(600)]))

    news_heavy, trading_heavy = rate(0.0005), rate(0.004)
    assert news_heavy > 0.08
    assert trading_heavy < news_heavy


def test_the_value_null_is_a_market_priced_at_the_public_value():
    """A hidden jump of V waits for the next release: a market priced at V^pub on every tick
    is 'beyond 5 % of V' on the ticks a large hidden jump waits, and the report says how
    often, beside the market's own share."""
    n = 400
    value = np.full(n, 100.0)
    value[105:] = 90.0  # a -10 % jump at tick 105, released at 110
    public = np.where(np.arange(n) < 110, 100.0, 90.0)
    mid = public.copy()
    facts = stylized.run_facts(mid, value, np.ones(n), 0, [], public=public)
    assert facts["value_null_mispricing"]["share_beyond"] == pytest.approx(5 / n)
    assert facts["mispricing"]["share_beyond"] == pytest.approx(5 / n)  # priced at V^pub
    lagging = mid.copy()
    lagging[110:130] = 100.0  # a market that leaves the release 20 ticks unpriced
    facts = stylized.run_facts(lagging, value, np.ones(n), 0, [], public=public)
    row = stylized.report([facts], ticks=n)["values"]
    assert row["value_null_mispriced_share_worst"] == pytest.approx(5 / n)
    assert row["mispriced_share_worst"] == pytest.approx(25 / n)


def test_raw_acf_of_abs_returns_sees_garch_clustering_and_not_iid_returns():
    # Issue 35's known answers: a GARCH(1,1) series clusters at short lags (mean raw acf of
    # |r| over lags 1-10 above 0.05 in the median of 20 series of 550 returns), i.i.d.
    # returns do not; ticks without a change are dropped before the acf.
    rng = np.random.default_rng(35)

    def facts(r):
        mid = 100 * np.exp(np.cumsum(np.concatenate([[0.0], r])) * 1e-3)
        return stylized.run_facts(mid, mid.copy(), np.ones(len(mid)), 0, [])

    g = [float(np.mean(facts(garch(600, rng)[50:])["raw_abs_acf"][:10])) for _ in range(20)]
    iid = [float(np.mean(facts(rng.standard_t(4, 550))["raw_abs_acf"][:10])) for _ in range(20)]
    assert np.median(g) > 0.05 > np.median(iid), (np.median(g), np.median(iid))
    # zero returns (a mid that did not move) are no observation: padding a series with them
    # leaves the raw acf as it was
    r = garch(600, rng)
    padded = np.zeros(1200)
    padded[::2] = r
    assert np.allclose(facts(padded)["raw_abs_acf"][:5], facts(r)["raw_abs_acf"][:5],
                       atol=1e-6)


def test_premium_and_value_null_excess_on_a_hand_made_path():
    public = np.full(100, 100.0)
    price = public.copy()
    price[:40] = 101.0  # +1 % on 40 ticks
    price[40:50] = 99.5  # -0.5 % on 10
    assert realism.premium(price, public) == pytest.approx((40 * 0.01 - 10 * 0.005) / 100)
    value = public.copy()
    value[60:70] = 110.0  # a hidden jump: V^pub is 9 % from V, the price with V^pub
    price[80:83] = 106.0  # the market's own excursion: 6 % from V where V^pub is at V
    excluded = np.zeros(100, dtype=bool)
    excluded[82] = True  # a shock window leaves its ticks out
    assert realism.value_null_excess(price, value, public) == pytest.approx(3 / 100)
    assert realism.value_null_excess(price, value, public, excluded) == pytest.approx(2 / 99)
    # ... while the plain share beyond 5 % of V counts the hidden jump too
    assert realism.mispricing(price, value)["share_beyond"] == pytest.approx(13 / 100)


def test_the_report_judges_the_premium_on_long_runs_and_names_a_house_premium():
    def row(premium, seed):
        rng = np.random.default_rng(seed)
        public = np.full(6000, 100.0)
        mid = public * (1 + premium + 0.001 * rng.standard_normal(6000))
        return stylized.run_facts(mid, public, np.ones(6000), 0, [], public=public)

    fair = stylized.report([row(0.0, s) for s in range(10)], ticks=6000)
    assert fair["checks"]["premium"]["ok"] is True
    house = stylized.report([row(0.002, s) for s in range(10)], ticks=6000)
    assert "premium" in stylized.misses(house)
    assert house["values"]["premium_positive_share"] == 1.0
    assert house["values"]["premium_mean"] == pytest.approx(0.002, abs=1e-4)

"""The paired estimator behind the pilot's σ̂_d, the contract's effects and the paper: known
answers computed by hand."""

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from market_agents.analysis.stats import (
    Contrast,
    PairedSample,
    estimate,
    estimates,
    holm,
    mde,
    not_estimable,
    pair,
    paired_differences,
    seed_values,
)


def test_pairs_only_shared_seeds_and_drops_undefined_values():
    frame = pl.DataFrame({
        "cell": ["share_0"] * 3 + ["share_25"] * 3,
        "seed": [1, 2, 3, 1, 2, 4],
        "volatility": [1.0, 2.0, 3.0, 1.5, float("nan"), 9.0],
        "rad": [0.1, 0.2, 0.3, None, 0.5, 0.6],
    })
    out = paired_differences(frame, "share_0", ["volatility", "rad", "not_a_column"])
    assert list(out) == ["share_25"]
    row = out["share_25"]
    assert row["n_pairs"] == 2  # seeds 1 and 2; seed 4 has no control
    assert row["volatility"].to_list() == [0.5]  # NaN dropped
    assert row["rad"].to_list() == [0.3]  # null dropped
    assert "not_a_column" not in row


@given(st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), min_size=1,
                max_size=20))
def test_differences_are_treated_minus_control_seed_by_seed(pairs):
    n = len(pairs)
    frame = pl.DataFrame({"cell": ["c"] * n + ["t"] * n, "seed": list(range(n)) * 2,
                          "y": [c for c, _ in pairs] + [t for _, t in pairs]})
    d = paired_differences(frame, "c", ["y"])["t"]["y"].to_list()
    assert len(d) == n
    assert all(math.isclose(x, t - c, abs_tol=1e-9) for x, (c, t) in zip(d, pairs, strict=True))


# --- the paper's estimator: known answers ------------------------------------------------------


T3 = 3.182446305284263  # Student t quantile 0.975 with 3 degrees of freedom (printed tables)


def t3_two_sided_p(t: float) -> float:
    """Exact two-sided p of Student's t with 3 degrees of freedom (closed form of its CDF)."""
    x = t / math.sqrt(3)
    return 1 - (2 / math.pi) * (x / (1 + x * x) + math.atan(x))


def frame(rows: dict[str, dict[int, float | None]], y: str = "y", **extra) -> pl.DataFrame:
    out = [{"cell": c, "seed": s, y: v, **{k: f(c) for k, f in extra.items()}}
           for c, by_seed in rows.items() for s, v in by_seed.items()]
    return pl.DataFrame(out, schema_overrides={y: pl.Float64})


KNOWN = {"share_0": {101: 1.0, 102: 2.0, 103: 3.0, 104: 4.0},
         "share_25": {101: 2.0, 102: 4.0, 103: 5.0, 104: 8.0}}  # d = 1, 2, 2, 4


def test_paired_difference_se_interval_and_p_are_known_exactly():
    sample = pair(seed_values(frame(KNOWN), "y"),
                  Contrast("share_25", "T1", {"share_25": 1}, {"share_0": 1}))
    e = estimate(sample)
    sd = math.sqrt(4.75 / 3)  # squared deviations from 2.25: 1.5625 + 0.0625 + 0.0625 + 3.0625
    se = sd / 2
    assert e["n"] == 4 and sample.seeds == [101, 102, 103, 104]
    assert e["treated_mean"] == 4.75 and e["control_mean"] == 2.5 and e["diff"] == 2.25
    assert e["se"] == pytest.approx(se, rel=1e-12)
    assert e["t_low"] == pytest.approx(2.25 - T3 * se, rel=1e-12)
    assert e["t_high"] == pytest.approx(2.25 + T3 * se, rel=1e-12)
    assert e["p"] == pytest.approx(t3_two_sided_p(2.25 / se), rel=1e-9)
    assert 1.0 <= e["boot_low"] <= 2.25 <= e["boot_high"] <= 4.0
    assert estimate(sample) == e  # the bootstrap's seed is fixed


def test_a_constant_difference_has_no_interval_and_says_it_is_not_estimable():
    """Zero spread is not an interval of [d, d]: nothing varies, so nothing is estimated."""
    e = estimate(PairedSample([1, 2, 3], np.array([3.0, 4.0, 5.0]), np.array([1.0, 2.0, 3.0])))
    assert (e["diff"], e["se"], e["t_low"], e["t_high"], e["boot_low"], e["boot_high"]) == (
        2.0, 0.0, None, None, None, None)
    assert e["p"] is None
    assert not_estimable(e) == "no variation: every paired difference is 2"


def test_small_samples_leave_undefined_statistics_empty():
    one = estimate(PairedSample([1], np.array([3.0]), np.array([1.0])))
    assert one["diff"] == 2.0 and one["se"] is None and one["p"] is None
    assert estimate(PairedSample([], np.array([]), np.array([])))["diff"] is None


def test_holm_adjustment_known_answer():
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm([0.9, 0.8, 0.7]) == pytest.approx([1.0, 1.0, 1.0])
    assert holm([0.01, 0.02, 0.03]) == pytest.approx([0.03, 0.04, 0.04])


@given(st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=12))
def test_holm_is_monotone_bounded_and_never_below_the_raw_p(p):
    adj = holm(p)
    tested = sorted((v, a) for v, a in zip(p, adj, strict=True) if v is not None)
    for (_, a), (_, b) in zip(tested, tested[1:], strict=False):
        assert a <= b + 1e-12
    for v, a in zip(p, adj, strict=True):
        assert (a is None) == (v is None)
        if v is not None:
            assert v - 1e-12 <= a <= 1.0


def test_e5_interaction_is_estimated_seed_by_seed():
    rows = {"leverage_25": {101: 10.0, 102: 12.0, 103: 15.0},
            "leverage_0": {101: 4.0, 102: 5.0, 103: 6.0},
            "share_25": {101: 3.0, 102: 3.5, 103: 4.0},
            "share_0": {101: 1.0, 102: 1.0, 103: 1.0}}
    e5 = Contrast("E5", "T4", {"leverage_25": 1, "leverage_0": -1},
                  {"share_25": 1, "share_0": -1})
    sample = pair(seed_values(frame(rows), "y"), e5)
    # (L25 - L0) = 6, 7, 9; (S25 - S0) = 2, 2.5, 3; interaction = 4, 4.5, 6
    assert sample.treated.tolist() == [6.0, 7.0, 9.0]
    assert sample.control.tolist() == [2.0, 2.5, 3.0]
    e = estimate(sample)
    assert e["diff"] == pytest.approx(14.5 / 3)
    assert e["se"] == pytest.approx(np.std([4, 4.5, 6], ddof=1) / math.sqrt(3))
    assert e5.control_label == "share_25 - share_0"
    # the interaction has no MDE of its own: not leverage_25's (the freeze sizes cells)
    t = estimates(frame(rows), [e5], columns=["y"], mde={"leverage_25": {"y": 0.1}})
    assert t["mde"].to_list() == [None]


def test_pilot_seeds_never_enter_and_a_missing_control_seed_is_dropped_and_reported():
    rows = {"share_0": {1: 50.0, 2: -50.0, 3: 7.0, **KNOWN["share_0"]},
            "share_25": {1: 0.0, 2: 0.0, 3: 0.0, **KNOWN["share_25"], 105: 99.0}}
    table = estimates(frame(rows), [Contrast("share_25", "T1", {"share_25": 1},
                                             {"share_0": 1})],
                      columns=["y"], exclude_seeds=(1, 2, 3), mde={"share_25": {"y": 0.5}})
    row = table.row(0, named=True)
    assert row["n"] == 4 and row["diff"] == 2.25 and row["mde"] == 0.5
    assert row["dropped"] == ("1: pilot seed (excluded from confirmatory estimates); 2: pilot "
                              "seed (excluded from confirmatory estimates); 3: pilot seed "
                              "(excluded from confirmatory estimates); 105: no share_0 run")
    assert row["p_holm"] == row["p"]  # a family of one


def test_holm_runs_within_each_tier_family():
    rows = {**KNOWN, "share_50": {101: 1.5, 102: 2.5, 103: 3.5, 104: 4.0},
            "memory_25": {101: 2.0, 102: 4.0, 103: 5.0, 104: 8.0}}
    contrasts = [Contrast("share_25", "T1", {"share_25": 1}, {"share_0": 1}),
                 Contrast("share_50", "T1", {"share_50": 1}, {"share_0": 1}),
                 Contrast("memory_25", "T4", {"memory_25": 1}, {"share_0": 1})]
    t = estimates(frame(rows), contrasts, columns=["y"])
    p = dict(zip(t["cell"], t["p"], strict=True))
    adj = dict(zip(t["cell"], t["p_holm"], strict=True))
    assert adj["memory_25"] == pytest.approx(p["memory_25"])  # alone in T4
    assert [adj["share_25"], adj["share_50"]] == pytest.approx(holm([p["share_25"],
                                                                     p["share_50"]]))


def test_halts_and_rejects_are_estimated_only_where_their_mechanism_is_on():
    rows = {"share_0": {1: 0.0, 2: 0.0}, "breaker_25": {1: 1.0, 2: 2.0},
            "share_25": {1: 0.0, 2: 1.0}}
    mechs = {"share_0": "", "breaker_25": "breaker", "share_25": ""}
    f = frame(rows, "n_halts", mechanisms=mechs.get)
    t = estimates(f, [Contrast(c, "all", {c: 1}, {"share_0": 1})
                      for c in ("breaker_25", "share_25")], columns=["n_halts"])
    assert t["cell"].to_list() == ["breaker_25"]


@pytest.mark.parametrize("n", [2, 3, 10])
@pytest.mark.parametrize("family", [1, 6])
def test_mde_is_the_effect_the_paired_t_test_detects_with_power_08(n, family):
    """Known answer: simulate the paper's test (one-sample t on n paired differences, level
    alpha / family) at the MDE; it rejects in 80 % of 40,000 draws (within 5 %)."""
    from scipy import stats as sps

    effect = mde(1.0, n, family_size=family)
    rng = np.random.default_rng(20 + n + family)
    d = rng.normal(effect, 1.0, size=(40_000, n))
    power = float((sps.ttest_1samp(d, 0.0, axis=1).pvalue < 0.05 / family).mean())
    assert power == pytest.approx(0.80, rel=0.05)


def test_mde_at_two_seeds_is_far_above_the_normal_approximation():
    # the developers' guide: on 2 seeds the MDE is about 11.6 sigma_d at alpha 0.05, power 0.8
    assert mde(1.0, 2) == pytest.approx(11.55, abs=0.05)
    assert mde(2.0, 10) == pytest.approx(2 * mde(1.0, 10))
    assert mde(1.0, 3, family_size=10) > mde(1.0, 3)
    assert mde(None, 4) is None and mde(1.0, 1) is None and mde(0.0, 5) == 0.0


def test_holm_runs_over_the_declared_primary_outcomes_only():
    """A hand-made family: two contrasts x primary outcome y; z is secondary (unadjusted, no
    Holm p), so it neither enters nor inflates the family."""
    base = {101: 1.0, 102: 2.0, 103: 3.0, 104: 4.0}
    rows = {"share_0": base, "a": {101: 2.0, 102: 3.5, 103: 4.0, 104: 6.0},
            "b": {101: 1.5, 102: 2.0, 103: 4.0, 104: 4.5}}
    outcomes = pl.DataFrame([{"cell": c, "seed": s, "y": v, "z": 2 * v}
                             for c, by in rows.items() for s, v in by.items()])
    contrasts = [Contrast(c, "T1", {c: 1}, {"share_0": 1}) for c in ("a", "b")]
    t = estimates(outcomes, contrasts, columns=["y", "z"], primary={"T1": ["y"]})
    y = t.filter(pl.col("outcome") == "y")
    assert y["role"].to_list() == ["primary", "primary"]
    assert y["p_holm"].to_list() == pytest.approx(holm(y["p"].to_list()))
    z = t.filter(pl.col("outcome") == "z")
    assert z["role"].to_list() == ["secondary", "secondary"] and z["p_holm"].null_count() == 2
    assert z["p"].null_count() == 0  # reported, unadjusted


def test_an_estimand_without_control_seeds_and_a_constant_outcome_are_not_estimable():
    rows = {"share_0": {101: 1.0, 102: 2.0, 103: 3.0}, "auction_25": {1: 1.0, 2: 5.0},
            "flat": {101: 1.0, 102: 2.0, 103: 3.0}}
    contrasts = [Contrast(c, "T6", {c: 1}, {"share_0": 1}) for c in ("auction_25", "flat")]
    t = estimates(frame(rows), contrasts, columns=["y"])
    why = dict(zip(t["cell"], t["not_estimable"], strict=True))
    assert why["auction_25"] == "no paired seeds: no share_0 run"
    assert why["flat"] == "identical to share_0 seed by seed (the same runs' values)"
    assert t["t_low"].null_count() == 2 and t["p_holm"].null_count() == 2


def test_outcomes_that_cannot_move_are_named_not_estimated():
    """Known answers: an outcome 0 in every run (bubbles on the mock) never varied; a cell equal
    to its control seed by seed is the control against itself; a breaker that acted on one of
    three seeds, identical to its reference on the other two, is estimated with that said."""
    rows = []
    for seed, (ref, brk, idle) in {101: (1.0, 1.0, "breaker"), 102: (2.0, 2.7, ""),
                                   103: (3.0, 3.0, "breaker")}.items():
        for cell, y, mech, id_ in (("share_25", ref, "", ""), ("breaker_25", brk, "breaker", idle),
                                   ("copy", ref, "", "")):
            rows.append({"cell": cell, "seed": seed, "y": y, "n_bubbles": 0,
                         "mechanisms": mech, "mechanisms_idle": id_})
    outcomes = pl.DataFrame(rows)
    contrasts = [Contrast(c, "T4", {c: 1}, {"share_25": 1}) for c in ("breaker_25", "copy")]
    t = estimates(outcomes, contrasts, columns=["y", "n_bubbles"])
    row = {(r["cell"], r["outcome"]): r for r in t.iter_rows(named=True)}
    assert row[("breaker_25", "n_bubbles")]["not_estimable"] == (
        "never varied: 0 in every run of breaker_25, share_25")
    assert row[("copy", "y")]["not_estimable"] == (
        "identical to share_25 seed by seed (the same runs' values)")
    b = row[("breaker_25", "y")]
    assert b["not_estimable"] is None and b["t_low"] is not None
    assert b["caveat"] == ("identical to share_25 on 2 of 3 seeds (101, 103); its breaker "
                           "acted on 1 of 3 seeds (102)")


@pytest.mark.parametrize("df", [1, 2, 3])
def test_the_sigma_bound_covers_sigma_d_at_its_level(df):
    """Known answer: σ̂_d of df + 1 normal paired differences (the pilot's 2-4 pairs), 20,000
    pilots; the 80 % upper bound covers the true σ_d in 80 % of them, so the MDE from the
    bound reaches the true MDE in 80 % of them; σ̂_d itself only about half the time."""
    from market_agents.analysis.stats import mde, sigma_upper

    rng = np.random.default_rng(36)
    d = rng.normal(0.0, 1.0, size=(20_000, df + 1))
    hat = d.std(axis=1, ddof=1)
    factor = sigma_upper(1.0, df)
    assert sigma_upper(0.5, df) == pytest.approx(0.5 * factor)  # linear in σ̂_d
    covered = np.mean(hat * factor >= 1.0)
    assert covered == pytest.approx(0.80, abs=0.01)
    assert np.mean(hat >= 1.0) < 0.62  # the point estimate vouches for much less
    true = mde(1.0, 10, family_size=4)
    per_sigma = mde(1.0, 10, family_size=4)  # the MDE is linear in σ: compare through it
    assert np.mean(hat * factor * per_sigma >= true) == pytest.approx(0.80, abs=0.01)


def test_sigma_bound_known_values_and_pooling():
    from market_agents.analysis.stats import pooled_sigma, sigma_upper

    assert sigma_upper(1.0, 2) == pytest.approx(2.1169, abs=1e-4)  # √(2 / χ²_{0.2, 2})
    assert sigma_upper(1.0, 2, level=0.95) > sigma_upper(1.0, 2)
    assert sigma_upper(None, 2) is None and sigma_upper(1.0, 0) is None
    hat, df = pooled_sigma([(1.0, 1), (3.0, 2), (None, 5)])
    assert df == 3 and hat == pytest.approx(np.sqrt((1 + 2 * 9) / 3))
    assert pooled_sigma([]) == (None, 0)

"""Outcomes with known answers, on hand-made run directories."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from market_agents.analysis.outcomes import Thresholds, bubbles, crashes, spillover_dy
from market_agents.analysis.scoring import load_run, score_run, write_outcomes
from market_agents.sim.rundir import RunDirError
from tests.support.fake_run import LLM_DECISION_COLUMNS, bubble_crash_path, make_run


def test_dy_independent_series_is_near_zero():
    x = np.random.default_rng(0).standard_normal((5000, 2))
    assert spillover_dy(x, p=1, horizon=10) < 0.5


def test_dy_contemporaneous_correlation_matches_closed_form():
    rho = 0.8
    cov = np.array([[1.0, rho], [rho, 1.0]])
    x = np.random.default_rng(1).multivariate_normal([0, 0], cov, size=20_000)
    expected = 100 * rho**2 / (1 + rho**2)  # 39.02 %
    assert spillover_dy(x, p=1, horizon=10) == pytest.approx(expected, abs=1.0)
    assert spillover_dy(x, p=2, horizon=5) == pytest.approx(expected, abs=1.0)


def test_dy_detects_lagged_spillover():
    rng = np.random.default_rng(2)
    e = rng.standard_normal((5000, 2))
    x = np.zeros_like(e)
    for t in range(1, len(e)):
        x[t, 0] = e[t, 0]
        x[t, 1] = 0.9 * x[t - 1, 0] + e[t, 1]  # asset 0 drives asset 1 one tick later
    assert spillover_dy(x) > 15


def test_dy_rejects_too_short_series():
    with pytest.raises(ValueError, match="too few"):
        spillover_dy(np.zeros((3, 2)), p=2)


def test_bubble_and_crash_on_hand_made_path(tmp_path):
    p, v = bubble_crash_path()
    out = score_run(make_run(tmp_path / "r", p, v))
    assert out["n_bubbles"] == 1
    assert out["bubble_share"] == pytest.approx(15 / 300)
    assert out["n_crashes"] == 1
    assert out["crash_share"] == pytest.approx(18 / 300)  # ticks 204-221
    assert out["mispricing"] == pytest.approx(np.mean(np.abs(p / v - 1)))
    assert out["rd"] == pytest.approx(np.mean(p - v) / 100)
    assert out["rad"] == pytest.approx(np.mean(np.abs(p - v)) / 100)


def test_signed_premium_on_a_hand_made_path(tmp_path):
    """Known answer: P 101, 99, 102, 100 against V = 100 and V^pub 100, 100, 102, 100. The
    market is 1 % off V on average (|P/V - 1|), half of it a premium (+0.5 %), and none of it
    above what the traders see (P/V^pub - 1 averages 0)."""
    from market_agents.sim.rundir import table_file

    p = np.array([101.0, 99.0, 102.0, 100.0])
    run = make_run(tmp_path / "r", p)
    ticks = pl.read_parquet(run / table_file("ticks"))
    ticks.with_columns(public_value=pl.Series([100.0, 100.0, 102.0, 100.0])).write_parquet(
        run / table_file("ticks"))
    out = score_run(run)
    assert out["mispricing"] == pytest.approx(0.01)
    assert out["premium"] == pytest.approx(0.005)
    assert out["premium_pub"] == pytest.approx(0.0, abs=1e-15)
    # ticks saved without V^pub: the premium over it is undefined, the rest stands
    ticks.drop("public_value").write_parquet(run / table_file("ticks"))
    out = score_run(run)
    assert out["premium_pub"] is None and out["premium"] == pytest.approx(0.005)


def test_thresholds_are_arguments(tmp_path):
    p, v = bubble_crash_path()
    run = make_run(tmp_path / "r", p, v)
    strict = score_run(run, Thresholds(bubble_gap=0.08, crash_drop=0.20))
    assert (strict["n_bubbles"], strict["n_crashes"]) == (0, 0)
    loose = score_run(run, Thresholds(bubble_ticks=5))
    assert loose["n_bubbles"] == 2
    # the fall is 3 % a tick: 6 % within 2 ticks is no 10 % crash, but it is a 5 % one, and so
    # are the two 106 -> 100 drops at the end of the bubble and of the blip
    assert score_run(run, Thresholds(crash_ticks=2))["n_crashes"] == 0
    assert score_run(run, Thresholds(crash_ticks=2, crash_drop=0.05))["n_crashes"] == 3


def test_burn_in_excludes_early_ticks(tmp_path):
    p, v = bubble_crash_path()
    assert score_run(make_run(tmp_path / "r", p, v, burn_in=120))["n_bubbles"] == 0


def test_market_quality_numbers(tmp_path):
    p = 100 * np.exp(np.cumsum(np.random.default_rng(3).normal(0, 0.01, 400)))
    out = score_run(make_run(tmp_path / "r", p, p * 1.02))
    r = np.diff(np.log(p))
    assert out["volatility"] == pytest.approx(np.std(r, ddof=1))
    d = r - r.mean()
    assert out["excess_kurtosis"] == pytest.approx(np.mean(d**4) / np.mean(d**2) ** 2 - 3)
    assert out["mean_spread"] == pytest.approx(0.1)
    assert out["volume"] == 800
    assert out["turnover"] == pytest.approx(800 / 80)
    assert out["ret_corr"] is None and out["spillover_dy"] is None


def test_two_assets_define_corr_and_spillover(tmp_path):
    rng = np.random.default_rng(4)
    common = rng.normal(0, 0.01, 500)
    p0 = 100 * np.exp(np.cumsum(common + rng.normal(0, 0.005, 500)))
    p1 = 100 * np.exp(np.cumsum(common + rng.normal(0, 0.005, 500)))
    out = score_run(make_run(tmp_path / "r", [p0, p1], [p0, p1]))
    assert 0.6 < out["ret_corr"] < 0.95
    assert 20 < out["spillover_dy"] < 50
    assert out["turnover"] == pytest.approx(2 * 2 * 500 / 160)


def test_shock_half_pricing_and_placebo(tmp_path):
    p = np.full(600, 100.0)
    p[300:] = 100 + 10 * (1 - np.exp(-np.arange(300) / 8.0))  # approaches +10 with time constant 8
    shocks = [{"time": 300, "kind": "fundamental_jump", "size": 10.0, "asset": None},
              {"time": 450, "kind": "placebo", "size": 0.0, "asset": None}]
    out = score_run(make_run(tmp_path / "r", p, shocks=shocks))
    assert out["shock_half_ticks"] == int(np.ceil(8 * np.log(2)))  # first tick past half: 6
    assert out["shock_priced_share"] == pytest.approx(1.0, abs=0.01)
    assert out["placebo_move"] == pytest.approx(0.0, abs=1e-6)


def test_shock_never_priced_is_null(tmp_path):
    shocks = [{"time": 300, "kind": "fundamental_jump", "size": 10.0}]
    out = score_run(make_run(tmp_path / "r", np.full(600, 100.0), shocks=shocks))
    assert out["shock_half_ticks"] is None
    assert out["shock_priced_share"] == pytest.approx(0.0)


def test_exchange_outcomes(tmp_path):
    halted = np.zeros(100, dtype=bool)
    halted[40:60] = True
    out = score_run(make_run(tmp_path / "r", np.full(100, 100.0), halts=[[40, 60]],
                             halted=halted))
    assert (out["n_halts"], out["halted_ticks"]) == (1, 20)
    assert out["reject_ratio"] == pytest.approx(1 / 3)  # cancels are not orders


def test_llm_outcomes(tmp_path):
    dec = pl.DataFrame({
        "tick": [50, 70, 90, 110, 130], "slot": [0] * 5,
        "valid": [True, True, False, None, None],
        "error_class": [None, None, "schema", "timeout", "budget_halt"],
        "tokens_in": [760] * 3 + [0] * 2, "tokens_out": [230] * 3 + [0] * 2,
        "tokens_reasoning": [100] * 3 + [0] * 2, "usd": [0.00044] * 3 + [0.0] * 2},
        schema=LLM_DECISION_COLUMNS)
    usage = {"usd_spent": 0.00088, "budget_halt_events": [{"scope": "run"}], "cached_hits": 0.25}
    out = score_run(make_run(tmp_path / "r", np.full(100, 100.0), decisions=dec,
                             manifest_extra={"llm_usage": usage}))
    assert out["llm_share_traders"] == 0.25 and out["n_llm_agents"] == 1
    assert out["llm_order_share"] == pytest.approx(1 / 3)
    assert out["llm_volume_share"] == pytest.approx(3 / 8)
    assert out["n_llm_decisions"] == 5 and out["llm_decisions_per_agent"] == 5
    assert out["llm_valid_rate"] == pytest.approx(2 / 3)  # unanswered rows do not count
    assert out["llm_failure_rate"] == pytest.approx(1 / 5)  # the timeout, not the halt
    assert out["llm_cached_hits"] == 0.25  # of the 4 decisions sent
    assert (out["llm_tokens_in"], out["llm_tokens_out"]) == (2280, 690)
    assert out["llm_usd"] == pytest.approx(0.00132)
    assert out["llm_usd_spent"] == pytest.approx(0.00088)
    assert (out["llm_budget_halts"], out["llm_budget_halt_events"]) == (1, 1)


def test_no_llm_rates_are_null(tmp_path):
    out = score_run(make_run(tmp_path / "r", np.full(100, 100.0)))
    assert out["n_llm_decisions"] == 0 and out["llm_valid_rate"] is None


def test_write_outcomes_is_json_and_atomic(tmp_path):
    run = make_run(tmp_path / "r", *bubble_crash_path())
    target, out = write_outcomes(run)
    assert target == run / "outcomes.json"
    assert json.loads((run / "outcomes.json").read_text()) == out
    assert out["config_hash"] == "abc123" and out["seed"] == 1
    assert out["thresholds"] == {"bubble_gap": 0.05, "bubble_ticks": 10, "crash_drop": 0.10,
                                 "crash_ticks": 20, "var_order": 1, "horizon": 10}
    assert not list(run.glob(".*tmp"))


@given(gap=st.sampled_from([0.03, 0.05, 0.08]), drop=st.sampled_from([0.07, 0.10, 0.15]),
       ticks=st.integers(1, 30))
def test_only_the_protocols_thresholds_write_outcomes_json(gap, drop, ticks):
    """Any other thresholds name their own file, distinct per thresholds: re-scoring never
    overwrites what gather reads."""
    from market_agents.analysis.scoring import outcomes_name

    th = Thresholds(bubble_gap=gap, bubble_ticks=ticks, crash_drop=drop)
    name = outcomes_name(th)
    assert (name == "outcomes.json") == (th == Thresholds())
    assert name != outcomes_name(Thresholds(gap, ticks + 1, drop))


def test_missing_file_is_named(tmp_path):
    run = make_run(tmp_path / "r", np.full(50, 100.0))
    (run / "trades.parquet").unlink()
    with pytest.raises(RunDirError, match="trades.parquet: missing"):
        load_run(run)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.8, 1.2), min_size=30, max_size=120), st.floats(0.5, 50))
@example([1.0] * 14 + [1.125, 1.125, 1.125, 1.109375, 1.1953125, 0.875, 0.875, 0.875, 0.875,
                       0.8515625, 0.9921875, 0.9, 1.0, 1.0, 1.0, 1.0], 3.0)  # falls exactly 10 %
def test_episodes_are_scale_free(ratios, scale):
    p = np.cumprod(np.asarray(ratios)) * 100
    v = np.full(len(p), 100.0)
    assert bubbles(p, v, 0.05, 3) == bubbles(p * scale, v * scale, 0.05, 3)
    assert crashes(p, 0.1, 5) == crashes(p * scale, 0.1, 5)


def test_placebo_ignores_news_the_price_follows(tmp_path):
    v = np.full(600, 100.0)
    v[470:] = 104.0  # unrelated news after the placebo; the price follows V
    shocks = [{"time": 450, "kind": "placebo", "size": 0.0}]
    out = score_run(make_run(tmp_path / "r", v.copy(), v, shocks=shocks))
    assert out["placebo_move"] == pytest.approx(0.0, abs=1e-12)
    p = v.copy()
    p[455:] *= 1.03  # a 3 % reaction to nothing
    assert score_run(make_run(tmp_path / "s", p, v, shocks=shocks))["placebo_move"] == \
        pytest.approx(0.03)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(-0.9, 0.9), st.integers(1, 3), st.integers(1, 12))
def test_dy_is_bounded_and_symmetric_in_asset_order(seed, rho, p, horizon):
    rng = np.random.default_rng(seed)
    x = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=300)
    s = spillover_dy(x, p, horizon)
    assert 0.0 <= s <= 50.0 + 1e-9  # 100 (N - 1) / N for N = 2
    assert spillover_dy(x[:, ::-1], p, horizon) == pytest.approx(s)


def test_crossed_books_do_not_count_in_the_spread(tmp_path):
    run = make_run(tmp_path / "r", np.full(100, 100.0))
    ticks = pl.read_parquet(run / "ticks.parquet")
    spread = np.where(np.arange(100) % 5 == 0, 0.1, -3.0)  # crossed between auctions
    ticks.with_columns(pl.Series("spread", spread)).write_parquet(run / "ticks.parquet")
    assert score_run(run)["mean_spread"] == pytest.approx(0.1)


# --- mechanism activity ----------------------------------------------------------------------


def test_activity_counts_rejects_by_reason_and_the_manifest_counts(tmp_path):
    counts = [["margin_calls", 2], ["forced_sale_volume", 30], ["llm_channel_sent", 4],
              ["llm_channel_read", 9], ["llm_memory_lines", 12], ["plugin_count", 7]]
    out = score_run(make_run(tmp_path / "r", np.full(50, 100.0),
                             manifest_extra={"activity": counts}))
    assert out["rejects_position_limit"] == 1  # the fake run's one rejected order
    assert out["rejects_halted"] == out["rejects_insufficient_funds"] == 0
    assert out["rejects_invalid"] == 0
    assert (out["margin_calls"], out["forced_sale_volume"]) == (2, 30)
    assert (out["llm_channel_sent"], out["llm_channel_read"], out["llm_memory_lines"]) == (
        4, 9, 12)
    assert out["plugin_count"] == 7  # any mechanism's count, in the order the run wrote them
    keys = list(out)
    assert keys.index("margin_calls") < keys.index("llm_memory_lines") < keys.index(
        "plugin_count")
    assert out["llm_decision_cap_holds"] == 0
    # a reason the run's exchange could give is counted; one it could not is not a column
    only = score_run(make_run(tmp_path / "o", np.full(50, 100.0),
                              manifest_extra={"reject_reasons": ["invalid", "halted"]}))
    assert "rejects_position_limit" not in only and only["rejects_halted"] == 0


def test_mechanisms_switched_on_and_idle_are_the_manifests(tmp_path):
    run = make_run(tmp_path / "r", np.full(50, 100.0), halts=[[10, 30]], manifest_extra={
        "mechanisms": ["breaker", "leverage", "memory"], "mechanisms_idle": ["leverage"]})
    out = score_run(run)
    assert out["mechanisms"] == "breaker,leverage,memory"
    assert out["mechanisms_idle"] == "leverage"
    plain = score_run(make_run(tmp_path / "p", np.full(50, 100.0)))
    assert plain["mechanisms"] == plain["mechanisms_idle"] == ""


def test_decision_cap_holds_are_counted(tmp_path):
    dec = pl.DataFrame({
        "tick": [1, 2, 3], "slot": [0, 0, 0], "valid": [True, None, None],
        "error_class": [None, "decision_cap", "budget_halt"], "tokens_in": [700, 0, 0],
        "tokens_out": [200, 0, 0], "tokens_reasoning": [100, 0, 0], "usd": [0.0004, 0.0, 0.0],
    }, schema=LLM_DECISION_COLUMNS)
    out = score_run(make_run(tmp_path / "r", np.full(50, 100.0), decisions=dec))
    assert out["llm_decision_cap_holds"] == 1 and out["llm_budget_halts"] == 1


# --- short runs (issue 11) -------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(n_ticks=st.integers(1, 60), n_assets=st.sampled_from([1, 2]),
       burn_in=st.integers(0, 60), seed=st.integers(0, 2**16), flat=st.booleans(),
       shock=st.integers(0, 70))
@pytest.mark.slow(3)  # CPU s on 2 cores: out of the quick subset
def test_outcomes_on_runs_of_1_to_60_ticks_never_raise(n_ticks, n_assets, burn_in, seed, flat,
                                                       shock):
    import contextlib
    import io
    import tempfile
    from pathlib import Path

    from market_agents.cli import main

    rng = np.random.default_rng(seed)
    prices = [np.full(n_ticks, 100.0) if flat and a == 0 else
              100 * np.exp(np.cumsum(rng.normal(0, 0.01, n_ticks))) for a in range(n_assets)]
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp) / "r", prices, burn_in=burn_in, shocks=[
            {"time": shock, "kind": "fundamental_jump", "size": 5.0},
            {"time": shock, "kind": "placebo"}])
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["outcomes", str(run)]) == 0
        out = json.loads((run / "outcomes.json").read_text())
    returns = max(0, n_ticks - min(burn_in, n_ticks) - 1)
    notes = out["notes"]
    for key in ("volatility", "excess_kurtosis", "spillover_dy", "shock_priced_share",
                "placebo_move"):
        if out[key] is None and not (key == "spillover_dy" and n_assets == 1):
            assert key in notes, (key, notes)
    if n_assets == 2 and returns < 5:  # a VAR(1) of two series needs 5 returns
        assert out["spillover_dy"] is None
    if returns >= 4 and not flat:
        assert out["excess_kurtosis"] is not None


def test_two_asset_run_too_short_for_its_var(tmp_path, capsys):
    """Issue 11: `ma outcomes` on a 54-tick two-asset run raised '3 observations are too few
    for a VAR(1)'; an impossible --var-order did the same."""
    from market_agents.cli import main

    run = tmp_path / "k2"
    assert main(["run", "config/baseline.yaml", "--seed", "1", "--out", str(run),
                 "--set", "simulation.ticks=54", "--set", "fundamentals.n_assets=2",
                 "--set", "fundamentals.factor_loading=[0.7, 0.7]"]) == 0
    assert main(["outcomes", str(run)]) == 0
    out = json.loads((run / "outcomes.json").read_text())
    assert out["spillover_dy"] is None and "too few for a VAR(1)" in out["notes"]
    long_run = tmp_path / "long"
    assert main(["run", "config/baseline.yaml", "--seed", "1", "--out", str(long_run),
                 "--set", "simulation.ticks=150", "--set", "fundamentals.n_assets=2",
                 "--set", "fundamentals.factor_loading=[0.7, 0.7]"]) == 0
    assert main(["outcomes", str(long_run), "--var-order", "40"]) == 0  # beside outcomes.json
    out = json.loads((long_run / "outcomes_bubble0.05x10_crash0.1x20_var40_h10.json").read_text())
    assert out["spillover_dy"] is None and "VAR(40) (needs 122)" in out["notes"]
    assert main(["outcomes", str(long_run), "--var-order", "2"]) == 0
    assert json.loads((long_run / "outcomes_bubble0.05x10_crash0.1x20_var2_h10.json")
                      .read_text())["spillover_dy"] is not None
    capsys.readouterr()


@pytest.mark.parametrize("args, message", [
    (["--var-order", "0"], "--var-order 0: must be in 1..100"),
    (["--var-order", "1000000"], "--var-order 1000000: must be in 1..100"),
    (["--horizon", "0"], "--horizon 0: must be in 1..1000"),
    (["--horizon", "1000000000"], "--horizon 1000000000: must be in 1..1000"),
    (["--bubble", "1.5:10"], "--bubble '1.5:10'"),
])
def test_impossible_outcome_options_get_one_line_and_exit_2(tmp_path, capsys, args, message):
    from market_agents.cli import main

    run = make_run(tmp_path / "r", np.full(50, 100.0))
    assert main(["outcomes", str(run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (run / "outcomes.json").exists()

import numpy as np
import pytest

from market_agents.config import load_config
from market_agents.market.fundamentals import draw_path
from market_agents.rng import Streams

CONFIRMATORY = ["fundamentals.jump_prob=1.0", "fundamentals.jump_sigma=4.0",
                "shocks=[{time: 300, kind: fundamental_jump, size: 10.0}, "
                "{time: 450, kind: placebo}]"]


def paths(baseline_path, sets, seeds):
    cfg = load_config(baseline_path, sets)
    return cfg, [draw_path(cfg.fundamentals, cfg.shocks, cfg.simulation.ticks,
                           Streams(s).generator("fundamentals")) for s in seeds]


def test_confirmatory_calibration_public_value_error_is_half_a_percent(baseline_path):
    _, drawn = paths(baseline_path, CONFIRMATORY, range(1, 201))
    sd = [np.std(p.public[0] / p.value[0] - 1) for p in drawn]
    assert np.median(sd) == pytest.approx(0.005, abs=0.0005)


def test_protocol_shock_is_about_two_percent_of_value(baseline_path):
    cfg, _ = paths(baseline_path, CONFIRMATORY, [1])
    assert cfg.shocks[0].size / cfg.fundamentals.v0 == pytest.approx(0.021, abs=0.0005)


def test_two_assets_share_the_common_factor(baseline_path):
    sets = ["fundamentals.n_assets=2", "fundamentals.factor_loading=[0.7, 0.7]",
            "fundamentals.jump_prob=0.0"]
    _, drawn = paths(baseline_path, sets, range(1, 21))
    corr = [np.corrcoef(np.diff(p.value[0]), np.diff(p.value[1]))[0, 1] for p in drawn]
    assert np.mean(corr) == pytest.approx(0.49, abs=0.05)  # loadings 0.7 x 0.7


def test_value_stays_positive(baseline_path):
    _, drawn = paths(baseline_path, ["fundamentals.sigma=50", "fundamentals.v0=10"], [1, 2])
    assert all((p.value > 0).all() and (p.public > 0).all() for p in drawn)

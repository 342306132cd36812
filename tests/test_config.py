import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from market_agents.config import (
    Config,
    apply_overrides,
    config_hash,
    load_config,
    parse_set,
)
from market_agents.errors import ConfigError


def test_baseline_file_is_the_defaults(baseline_path):
    assert load_config(baseline_path) == Config()


def test_set_values_are_yaml():
    assert parse_set("population.llm.provider_mix={openai: 1.0}") == (
        "population.llm.provider_mix", {"openai": 1.0})
    assert parse_set("exchange.halt_threshold=0.05") == ("exchange.halt_threshold", 0.05)
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set("exchange.halt_threshold")


def test_override_reaches_the_model(baseline_path):
    cfg = load_config(baseline_path, ["exchange.halt_threshold=0.05", "population.llm_share=0.25"])
    assert cfg.exchange.halt_threshold == 0.05
    assert cfg.population.n_llm == 25


def test_unknown_key_names_path_and_file(baseline_path):
    with pytest.raises(ConfigError, match=r"baseline\.yaml: exchange\.halt_treshold: Extra"):
        load_config(baseline_path, ["exchange.halt_treshold=0.05"])


def test_negative_count_is_rejected(baseline_path):
    with pytest.raises(ConfigError, match=r"population\.n_traders: .*greater than or equal"):
        load_config(baseline_path, ["population.n_traders=-5"])


def test_shares_must_sum_to_one(baseline_path):
    with pytest.raises(ConfigError, match=r"population\.mix: .*sum to 1"):
        load_config(baseline_path, ["population.mix.noise=0.5"])


def test_malformed_yaml_names_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("simulation: [ticks: 600\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: malformed YAML"):
        load_config(bad)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read"):
        load_config(tmp_path / "nope.yaml")


def test_override_through_a_scalar_is_an_error():
    with pytest.raises(ConfigError, match=r"exchange\.halt_threshold\.x: 'halt_threshold'"):
        apply_overrides({"exchange": {"halt_threshold": 0.1}}, {"exchange.halt_threshold.x": 1},
                        "here")


def test_config_hash_is_canonical_and_sensitive():
    a, b = Config(), Config()
    assert config_hash(a) == config_hash(b)
    assert len(config_hash(a)) == 64
    changed = Config.model_validate({"exchange": {"halt_threshold": 0.05}})
    assert config_hash(changed) != config_hash(a)


def test_shocks_must_fit_the_run():
    with pytest.raises(ConfigError, match=r"shocks\.0\.time 900 is past the last tick"):
        from market_agents.config import validate

        validate({"shocks": [{"time": 900, "kind": "placebo"}]}, "x.yaml")


def test_llm_share_at_one_leaves_market_makers():
    cfg = Config.model_validate({"population": {"llm_share": 1.0}})
    assert cfg.population.n_llm == 95


# --- issue 11: every input validated before any work -----------------------------------------
# Each case below was tried on main at 3d92a05 and ended in a traceback, a hang or a silently
# wrong run; each is now one ConfigError naming the file and the key.
@pytest.mark.parametrize(("override", "message"), [
    # OverflowError deep in the exchange
    ("fundamentals.v0=.inf", r"fundamentals\.v0: Input should be a finite number \(got inf\)"),
    ("population.initial_cash=.inf", r"population\.initial_cash: .*finite number"),
    ("shocks=[{time: 100, kind: fundamental_jump, size: .inf}]",
     r"shocks\.0\.size: .*finite number"),
    # silently NaN fundamentals
    ("fundamentals.sigma=.inf", r"fundamentals\.sigma: .*finite number"),
    ("shocks=[{time: 100, kind: fundamental_jump, size: .nan}]",
     r"shocks\.0\.size: .*finite number \(got nan\)"),
    # a bare NaN in manifest.json
    ("treatment.x=.nan", r"treatment\.x: Input should be a finite number \(got nan\)$"),
    # IndexError, and a NaN share that passed the sum-to-1 check
    ("population.llm.provider_mix={mock: .nan}",
     r"population\.llm\.provider_mix\.mock: .*finite number"),
    ("population.llm.provider_mix={mock: 1, openai: .nan}",
     r"population\.llm\.provider_mix\.openai: .*finite number"),
    # a polars TypeError after the whole simulation ran
    ("population.initial_shares=100000000000000000000",
     r"population\.initial_shares: integer does not fit in 64 bits"),
    ("population.initial_shares=100000000000000000",
     r"population\.initial_shares and mm_initial_shares: the traders' shares total 9\.5e\+18; "
     r"it must stay below 9\.01e\+15"),
    ("fundamentals.news_interval=10000000000000000000000", r"fundamentals\.news_interval: "),
    ("simulation.decision_interval=10000000000000000000", r"simulation\.decision_interval: "),
    ("exchange.max_leverage=1e300", r"exchange\.max_leverage: .*less than or equal to 100"),
    # prices and cash that do not fit in exact integer ticks
    ("exchange.tick_size=1e-300", r"fundamentals\.v0 475 is 4\.75e\+302 ticks"),
    ("population.initial_cash=1e300",
     r"population\.initial_cash, leveraged_cash and mm_initial_cash: the traders' cash "
     r"totals 9\.5e\+303 ticks"),
    ("fundamentals.sigma=1e300", r"fundamentals\.sigma 1e\+300 is 1e\+302 ticks"),
    # runs that hung past 60 s
    ("simulation.ticks=1000000", r"simulation: too long a run: 9,749,810 trader decisions"),
    ("population.llm.providers={mock: {latency_s: 1000000000}}",
     r"population\.llm\.providers\.mock\.latency_s: .*less than or equal to 10"),
])
def test_issue_11_bad_values_are_refused_naming_the_key(baseline_path, override, message):
    with pytest.raises(ConfigError, match=r"^config/baseline\.yaml: " + message) as info:
        load_config("config/baseline.yaml", [override])
    assert "\n" not in str(info.value)


def test_a_run_of_the_largest_allowed_size_is_accepted(baseline_path):
    cfg = load_config(baseline_path, ["population.n_traders=100000"])  # 600 ticks
    assert cfg.population.n_traders == 100_000
    with pytest.raises(ConfigError, match=r"60,100,000 trader-ticks \(at most 60,000,000\)"):
        load_config(baseline_path, ["population.n_traders=100000", "simulation.ticks=601"])


def test_a_key_written_twice_in_a_config_is_refused(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("exchange:\n  halt_threshold: 0.05\n  halt_threshold: 0.10\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: exchange\.halt_threshold: key written "
                                          r"twice \(lines 2 and 3\)"):
        load_config(f)


def test_a_set_given_twice_is_refused(baseline_path):
    with pytest.raises(ConfigError, match=r"--set exchange\.halt_threshold: given twice"):
        load_config(baseline_path, ["exchange.halt_threshold=0.05",
                                    "exchange.halt_threshold=0.1"])
    with pytest.raises(ConfigError, match=r"key 'exchange\.\.tick_size' has an empty part"):
        load_config(baseline_path, ["exchange..tick_size=0.1"])


# --- issue 25: market parameters checked against each other -------------------------------


@pytest.mark.parametrize("tick", ["1000", "1e308", "4.76"])
def test_a_tick_coarser_than_one_percent_of_the_price_is_refused(baseline_path, tick):
    # A tick of 1,000 (or 1e308) on a price of 475 ran to the end, exit 0, every trade at one
    # tick and no bids.
    shown = re.escape(f"{float(tick):g}")
    with pytest.raises(ConfigError, match=rf"^config/baseline\.yaml: exchange\.tick_size {shown} "
                       r"against fundamentals\.v0 475: a tick must be at most 1% of the opening "
                       r"value \(4\.75\)") as info:
        load_config("config/baseline.yaml", [f"exchange.tick_size={tick}"])
    assert "\n" not in str(info.value)


def test_a_breaker_that_one_tick_trips_is_refused(baseline_path):
    with pytest.raises(ConfigError, match=r"exchange\.halt_threshold 0\.002 and "
                       r"exchange\.tick_size 1: one tick is 0\.211% of fundamentals\.v0 475"):
        load_config(baseline_path, ["exchange.tick_size=1", "exchange.halt_threshold=0.002"])
    assert load_config(baseline_path, ["exchange.tick_size=1", "exchange.halt_threshold=0.05"])


@settings(max_examples=200, deadline=None)
@given(v0=st.floats(1.0, 1e5), share=st.floats(1e-5, 10.0))
def test_the_tick_bound_is_one_percent_of_v0(v0, share):
    data = {"fundamentals": {"v0": v0}, "exchange": {"tick_size": share * v0 / 100}}
    tick = data["exchange"]["tick_size"]
    if tick <= 0.01 * v0:
        assert Config.model_validate(data).exchange.tick_size == tick
    else:
        with pytest.raises(ValidationError, match=r"exchange\.tick_size .* against "
                           r"fundamentals\.v0"):
            Config.model_validate(data)

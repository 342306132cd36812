import pytest

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

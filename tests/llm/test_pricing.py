import pytest

from market_agents.errors import ConfigError
from market_agents.llm import pricing
from market_agents.llm.types import Usage


def test_protocol_planning_figures():
    assert round(pricing.planned_cost("gpt-5.4-nano", 760, 230), 5) == 0.00044
    assert round(pricing.planned_cost("gpt-5.4-mini", 760, 230), 4) == 0.0016
    assert pricing.planned_cost("mock-trader", 760, 230) == 0.0


def test_every_row_has_date_and_source():
    table = pricing.load_prices()
    assert {"gpt-5.4-nano", "gpt-5.4-mini", "claude-haiku-5-5"} <= set(table.models)
    assert any("sonnet" in m for m in table.models)
    for row in table.models.values():
        assert row.date and len(row.source) > 3


def test_unknown_model_is_named():
    with pytest.raises(ConfigError, match="'gpt-9-ultra' has no price"):
        pricing.cost("gpt-9-ultra", Usage(input=1))


def test_cached_and_cache_write_tokens_are_priced_apart():
    row = pricing.load_prices().price("claude-haiku-5-5")
    # normalized usage: input counts all input tokens, cache reads and writes included
    u = Usage(input=1000, cached_input=600, cache_write=300, output=100)
    expect = (100 * row.input + 600 * row.cached_input + 300 * row.input
              * row.cache_write_multiplier + 100 * row.output) / 1e6
    assert pricing.cost("claude-haiku-5-5", u) == pytest.approx(expect)
    assert pricing.cost("claude-haiku-5-5", u) < pricing.cost("claude-haiku-5-5",
                                                              Usage(input=1000, output=100))


@pytest.mark.parametrize("body,match", [
    ("currency: EUR\nper_tokens: 1000000\nmodels: {}\n", "currency"),
    ("currency: USD\nper_tokens: 1000000\nmodels:\n  m: {provider: openai, input: -1, "
     "cached_input: 0, output: 1, date: '2026-01-01', source: abc}\n", "models.m.input"),
    ("currency: USD\nper_tokens: 1000000\nmodels:\n  m: {provider: openai, input: 1, "
     "cached_input: 0, output: 1, date: 'yesterday', source: abc}\n", "models.m.date"),
    ("currency: USD\nper_tokens: 1000000\nmodels:\n  m: {provider: openai, input: 1, "
     "cached_input: 0, output: 1, source: abc}\n", "models.m.date"),
    ("[unclosed\n", "malformed YAML"),
])
def test_bad_price_file_names_the_key(tmp_path, body, match):
    path = tmp_path / "prices.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=match):
        pricing.load_prices(path)


def test_missing_price_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read price table"):
        pricing.load_prices(tmp_path / "nope.yaml")

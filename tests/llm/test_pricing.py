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


# --- what a table that means money refuses (issue 33) -------------------------------------------

import math  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from market_agents import provider_kinds  # noqa: E402
from market_agents.config_llm import LLMConfig  # noqa: E402
from market_agents.prices import MAX_USD_PER_MTOK  # noqa: E402


def table_text(per_tokens: int = 1_000_000, **rows: dict) -> str:
    """A price table with ``rows`` (model -> fields over an openai row priced 1, 0.1 and 2 USD
    per 1M tokens)."""
    lines = ["currency: USD", f"per_tokens: {per_tokens}", "models:"]
    scale = per_tokens / 1_000_000
    for model, fields in rows.items():
        row = {"provider": "openai", "input": repr(1.0 * scale),
               "cached_input": repr(0.1 * scale), "output": repr(2.0 * scale),
               "date": "'2026-01-01'", "source": "test row"} | fields
        lines.append(f"  {model}: {{{', '.join(f'{k}: {v}' for k, v in row.items())}}}")
    return "\n".join(lines) + "\n"


def load(tmp_path, text: str) -> pricing.PriceTable:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    return pricing.load_prices(path)


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(["input", "cached_input", "output"]),
       per_tokens=st.sampled_from([1, 1000, 1_000_000]),
       per_mtok=st.floats(MAX_USD_PER_MTOK * 1.000001, 1e308))
def test_a_rate_above_the_bound_is_refused_naming_file_row_and_key(tmp_path_factory, key,
                                                                   per_tokens, per_mtok):
    # e83eada took 1e308 per 1M tokens, halted every call (worst case inf) and died writing
    # the manifest
    tmp = tmp_path_factory.mktemp("p")
    rate = per_mtok / 1_000_000 * per_tokens
    with pytest.raises(ConfigError, match=rf"prices\.yaml: models\.m\.{key}: .* above the "
                                          r"most a row may charge \(10,000 USD per 1M"):
        load(tmp, table_text(per_tokens, m={key: repr(rate)}))


@settings(max_examples=40, deadline=None)
@given(per_tokens=st.sampled_from([1, 1000, 1_000_000]),
       rates=st.tuples(*[st.floats(0.0, MAX_USD_PER_MTOK)] * 3).filter(
           # a row must charge something (a zero row is refused); a denormal rate scaled by
           # per_tokens / 1e6 underflows to 0.0, so keep the rate a real price
           lambda r: max(r[0], r[2]) >= 1e-6),
       multiplier=st.floats(0, 10),
       tokens=st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)))
def test_every_worst_case_of_a_loaded_table_is_finite(tmp_path_factory, per_tokens, rates,
                                                      multiplier, tokens):
    tmp = tmp_path_factory.mktemp("p")
    per = [r / 1_000_000 * per_tokens for r in rates]
    table = load(tmp, table_text(per_tokens, m={"input": repr(per[0]),
                                                "cached_input": repr(per[1]),
                                                "output": repr(per[2]),
                                                "cache_write_multiplier": repr(multiplier)}))
    assert math.isfinite(table.worst_cost("m", *tokens))


def test_the_cache_write_multiplier_is_bounded(tmp_path):
    with pytest.raises(ConfigError, match=r"models\.m\.cache_write_multiplier"):
        load(tmp_path, table_text(m={"cache_write_multiplier": 11}))


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai_compatible"])
def test_a_row_priced_zero_for_a_provider_that_bills_is_refused_naming_the_row(tmp_path,
                                                                              provider):
    # e83eada ran a hosted route priced 0/0 with its USD caps inert and no warning
    with pytest.raises(ConfigError, match=rf"prices\.yaml: models\.m: priced 0 USD \(input and "
                                          rf"output\) for provider '{provider}', which bills"):
        load(tmp_path, table_text(m={"provider": provider, "input": 0, "cached_input": 0,
                                     "output": 0}))


def test_the_free_kinds_may_be_priced_zero_and_a_half_priced_row_is_priced(tmp_path):
    table = load(tmp_path, table_text(
        free={"provider": "mock", "input": 0, "cached_input": 0, "output": 0},
        out_only={"input": 0, "cached_input": 0}))
    assert table.worst_cost("free", 1000, 1000) == 0.0
    assert table.worst_cost("out_only", 1000, 1000) > 0


def test_the_project_table_passes_its_own_rules():
    table = pricing.load_prices()
    billed = set(provider_kinds.price_keys()) - {"mock"}
    for row in table.models.values():
        assert row.provider not in billed or row.input > 0 or row.output > 0
        assert max(row.input, row.cached_input, row.output) <= MAX_USD_PER_MTOK


def route(kind: str, model: str, **settings) -> LLMConfig:
    providers = {"r": {"kind": kind, **settings}}
    return LLMConfig(provider_mix={"r": 1.0}, models={"r": model}, usd_cap=1.0,
                     providers=providers)


@pytest.mark.parametrize("kind,model,row_provider", [
    ("openai", "claude-haiku-5-5", "anthropic"),
    ("anthropic", "gpt-5.4-nano", "openai"),
])
def test_a_row_priced_for_another_provider_than_its_route_is_refused(kind, model, row_provider):
    # e83eada priced an openai route's calls from an anthropic row
    llm = route(kind, model)
    with pytest.raises(ConfigError, match=rf"config/prices\.yaml: models\.{model}\.provider: the "
                                          rf"row is priced for provider '{row_provider}', but "
                                          rf"route 'r' .* is kind '{kind}'"):
        pricing.run_prices(llm)


def test_a_gateway_route_may_be_priced_by_any_providers_row():
    # openai_compatible is a wire format proxies speak (LiteLLM in front of OpenAI)
    assert provider_kinds.get("openai_compatible").gateway
    for model in ("gpt-5.4-nano", "claude-haiku-5-5"):
        pricing.run_prices(route("openai_compatible", model, base_url="http://127.0.0.1:8/v1"))


def test_routes_priced_by_their_own_rows_the_mock_and_free_routes_pass():
    pricing.run_prices(route("openai", "gpt-5.4-nano"))
    pricing.run_prices(route("anthropic", "claude-haiku-5-5"))
    # a rehearsal prices the mock at the live model's row, whoever's it is
    pricing.run_prices(route("mock", "claude-haiku-5-5"))
    table = pricing.run_prices(route("openai_compatible", "local-1", free=True,
                                     base_url="http://127.0.0.1:8000/v1"))
    assert table.price("local-1").provider == "openai_compatible"
    assert table.worst_cost("local-1", 1000, 1000) == 0.0

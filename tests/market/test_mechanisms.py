"""Mechanisms on the exchange's events (market/mechanism.py, market/mechanisms/): each
built-in switched on by its config and recorded as the run's data; the transaction tax's
money path; a mechanism from outside the package found by registration alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.config import Config, ExchangeConfig, load_config
from market_agents.errors import ConfigError
from market_agents.market.exchange import Exchange
from market_agents.market.mechanism import trading_fee
from market_agents.market.types import BUY, SELL, Order
from market_agents.plugins import MECHANISMS
from market_agents.sim.simulation import simulate
from tests.support import ROOT

BASELINE = ROOT / "config" / "baseline.yaml"


def run_summary(*sets: str) -> dict:
    config = load_config(BASELINE, ["simulation.ticks=300", *sets])
    return simulate(config, 1, progress=False)["summary"]


def taxed_exchange(rate: float, n: int = 3, cash: float = 10_000.0) -> Exchange:
    config = Config(exchange=ExchangeConfig.model_validate({"transaction_tax": rate}))
    ex = Exchange(config.exchange, 1, [100.0])
    for slot in range(n):
        ex.open_account(slot, "noise", False, cash, 50)
    ex.install(m(config, ex) for m in MECHANISMS if m.installed(config))
    ex.seal()
    ex.begin_tick(0)
    return ex


def test_a_plain_run_switches_on_no_mechanism_and_counts_every_reason():
    s = run_summary()
    assert s["mechanisms"] == s["mechanisms_idle"] == []
    assert s["reject_reasons"] == ["invalid", "halted", "position_limit", "insufficient_funds"]
    assert dict(s["activity"]) == {"margin_calls": 0, "forced_sale_volume": 0,
                                   "llm_channel_sent": None, "llm_channel_read": None,
                                   "llm_memory_lines": None}


def test_each_switch_turns_its_mechanism_on_and_the_run_says_whether_it_acted():
    s = run_summary("exchange.halt_threshold=0.002", "exchange.position_limit=25",
                    "population.mix.leveraged=0.2", "population.mix.noise=0.2")
    assert s["mechanisms"] == ["breaker", "leverage", "position_limit"]
    assert "breaker" not in s["mechanisms_idle"] and s["halts"]  # a 0.2 % band halts
    assert "position_limit" not in s["mechanisms_idle"]
    quiet = run_summary("exchange.position_limit=100000")
    assert quiet["mechanisms"] == quiet["mechanisms_idle"] == ["position_limit"]


def test_the_tax_is_a_config_switch_hashed_only_when_set():
    plain = load_config(BASELINE)
    taxed = load_config(BASELINE, ["exchange.transaction_tax=0.001"])
    off = load_config(BASELINE, ["exchange.transaction_tax=null"])
    assert "transaction_tax" not in plain.model_dump()["exchange"]
    assert taxed.model_dump()["exchange"]["transaction_tax"] == 0.001
    assert off.model_dump() == plain.model_dump()
    assert trading_fee(taxed) == 0.001 and trading_fee(plain) == 0.0
    assert Config.model_validate(taxed.model_dump()) == taxed  # a dumped config reloads


@pytest.mark.parametrize("value", ["0", "-0.01", "0.5", "abc", ".nan"])
def test_a_bad_tax_is_one_line_naming_the_key(value):
    with pytest.raises(ConfigError) as err:
        load_config(BASELINE, [f"exchange.transaction_tax={value}"])
    assert "exchange" in str(err.value) and "transaction_tax" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_unknown_exchange_key_still_names_the_nearest():
    with pytest.raises(ConfigError, match="did you mean 'halt_threshold'"):
        load_config(BASELINE, ["exchange.halt_treshold=0.05"])


def test_each_side_pays_the_tax_into_the_pot_and_cash_is_conserved():
    ex = taxed_exchange(0.001)
    ex.submit(0, Order(SELL, 10, 100.0))
    ex.submit(1, Order(BUY, 10, 100.0))
    # 10 x 100.00 = 100,000 ticks of value; 0.1 % = 100 ticks (1.00) from each side
    assert ex.accounts[1].cash == 1_000_000 - 100_000 - 100
    assert ex.accounts[0].cash == 1_000_000 + 100_000 - 100
    assert ex.pot == 200 and ex.conservation_ok()
    tax = ex.mechanisms[-1]
    assert tax.activity() == {"ftt_trades": 1, "ftt_paid": 2.0} and tax.acted()


def test_a_buy_that_cannot_pay_its_tax_is_refused():
    ex = taxed_exchange(0.01, cash=1_000.0)
    ex.submit(0, Order(SELL, 10, 100.0))
    ex.submit(1, Order(BUY, 10, 100.0))  # 1,000 of shares + 10 of tax on 1,000 of cash
    assert ex.order_log["reason"][-1] == "insufficient_funds"
    ex.submit(1, Order(BUY, 9, 100.0))
    assert ex.order_log["status"][-1] == "accepted" and ex.accounts[1].cash >= 0


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(1e-4, 0.05), orders=st.lists(st.tuples(
    st.integers(0, 3), st.sampled_from([BUY, SELL]), st.integers(1, 40),
    st.integers(9_000, 11_000)), max_size=40))
def test_any_order_flow_under_any_tax_conserves_cash_and_leaves_no_debt(rate, orders):
    ex = taxed_exchange(rate, n=4, cash=3_000.0)
    for slot, side, qty, cents in orders:
        ex.submit(slot, Order(side, qty, cents / 100))
    assert ex.conservation_ok()
    assert ex.pot == sum(int(rate * q * p / 0.01 + 0.5) * 2 for p, q in zip(
        ex.trade_log["price"], ex.trade_log["qty"], strict=True))
    assert all(a.cash >= 0 for a in ex.accounts.values())  # limits: no unpaid tax


def test_a_taxed_run_records_its_activity_and_conserves_cash():
    s = run_summary("exchange.transaction_tax=0.001")
    activity = dict(s["activity"])
    assert s["mechanisms"] == ["transaction_tax"] and s["mechanisms_idle"] == []
    assert activity["ftt_trades"] > 0 and activity["ftt_paid"] > 0
    assert s["final_conservation_ok"]


def test_traders_see_the_fee_and_the_llm_prompt_states_it_only_when_set():
    from market_agents.agents.llm_trader import prompt_rules
    from market_agents.llm.prompting import system_text

    taxed = load_config(BASELINE, ["exchange.transaction_tax=0.001"])
    plain = load_config(BASELINE)
    assert prompt_rules(taxed)["fee_rate"] == 0.001 and "fee_rate" not in prompt_rules(plain)
    assert "0.001 of its value (10 basis points" in system_text(prompt_rules(taxed))
    assert "basis points" not in system_text(prompt_rules(plain))
    run = simulate(load_config(BASELINE, ["simulation.ticks=60", "exchange.transaction_tax=0.001"]),
                   1, progress=False)
    assert run["summary"]["final_conservation_ok"]

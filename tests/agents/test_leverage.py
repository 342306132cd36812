"""Leverage that binds: the margin rule liquidates accounts below maintenance, and on the
confirmatory base margin calls follow the shock (the E5 amplification channel; calibration in
docs/mechanisms.md, "Leverage and margin calls"). The leveraged trend followers' own rule is
tests/agents/traders/test_leveraged.py."""

from __future__ import annotations

import hashlib

import polars as pl
import pytest
import yaml

from market_agents.config import Config, ExchangeConfig, load_config
from market_agents.market.exchange import Exchange
from market_agents.market.mechanisms.leverage import MarginCall
from market_agents.market.types import BUY, SELL, Order
from market_agents.protocol.design import load_design
from market_agents.sim.simulation import simulate
from tests.support import ROOT

CALIBRATION = ROOT / "config" / "designs" / "leverage.yaml"
CONFIRMATORY = ROOT / "config" / "designs" / "confirmatory.yaml"
SEEDS = range(101, 111)
SHOCK = 300


def levered_exchange(**cfg) -> Exchange:
    """Slot 0 leveraged (1,000 cash, 4x), slots 1-2 ordinary traders with shares and cash."""
    ex = Exchange(ExchangeConfig(**cfg), 1, [100.0])
    ex.open_account(0, "leveraged", False, 1_000.0, 0, leverage=4.0)
    for slot in (1, 2):
        ex.open_account(slot, "noise", False, 100_000.0, 200)
    ex.seal()
    ex.begin_tick(0)
    return ex


def quote(ex: Exchange, t: int, mid: float, bid_qty: int = 5) -> None:
    """Tick t with a one-tick book around ``mid`` (bid from slot 2, ask from slot 1)."""
    ex.begin_tick(t)
    ex.submit(2, Order(BUY, bid_qty, mid - 0.5, ttl=1))
    ex.submit(1, Order(SELL, 5, mid + 0.5, ttl=1))
    ex.end_tick()


def test_margin_rule_liquidates_below_maintenance_and_counts_one_call():
    ex = levered_exchange(maintenance_margin=0.22)
    rule = MarginCall(Config(exchange=ex.cfg), ex)
    ex.install([rule])
    ex.submit(1, Order(SELL, 35, 100.0))
    ex.submit(0, Order(BUY, 35, 100.0))  # 3,500 of stock on 1,000 of equity: 3.5x
    assert ex.accounts[0].shares == [35] and ex.accounts[0].cash == -250_000  # ticks
    ex.end_tick()
    quote(ex, 1, 96.0)  # equity 860 >= 0.22 x 3,360 = 739: no call
    assert rule.calls == [] and "margin_call" not in ex.order_log["kind"]
    quote(ex, 2, 91.0, bid_qty=20)  # equity 685 < 0.22 x 3,185 = 701: called
    assert rule.calls == [[2, 0]]
    log = ex.order_log
    forced = [i for i, k in enumerate(log["kind"]) if k == "margin_call"]
    assert [(log["side"][i], log["qty"][i]) for i in forced] == [(SELL, 35)]
    assert rule.volume == 20 and ex.accounts[0].shares == [15]  # the bid's 20 shares
    # Selling 20 shares lifted it back above maintenance (675 >= 0.22 x 1,365): the call ends.
    quote(ex, 3, 91.0)
    assert rule.calls == [[2, 0]] and ex.order_log["kind"].count("margin_call") == 1
    # A later fall is a new call (equity 135 < 0.22 x 825); with no bid the sale waits.
    ex.begin_tick(4)
    ex.submit(1, Order(SELL, 5, 55.5, ttl=1))
    ex.submit(2, Order(BUY, 5, 54.5, ttl=1))
    ex.end_tick()
    assert rule.calls == [[2, 0], [4, 0]] and rule.volume == 25
    assert ex.conservation_ok()


def test_forced_sale_waits_for_the_next_call_auction():
    ex = levered_exchange(mechanism="call_auction", auction_interval=5, maintenance_margin=0.5)
    rule = MarginCall(Config(exchange=ex.cfg), ex)
    ex.install([rule])
    ex.accounts[0].shares[0], ex.accounts[0].cash = 30, -200_000  # 3,000 on 1,000: 3x
    ex.accounts[1].shares[0], ex.accounts[1].cash = 170, 300_000
    ex.seal()
    ex.begin_tick(1)
    ex.submit(2, Order(BUY, 50, 99.0))  # rests for the auction at tick 5
    ex.end_tick()  # equity 1,000 < 0.5 x 3,000: called at tick 1
    assert rule.calls == [[1, 0]]
    for t in range(2, 6):
        ex.begin_tick(t)
        ex.end_tick()
    assert rule.volume == 30 and ex.accounts[0].shares == [0]
    assert ex.conservation_ok()


def leverage_cell(cell: str):
    return load_design(CONFIRMATORY).cell_config(cell, mock=True)


def margin(summary: dict) -> dict:
    """A run's margin-call activity and events, as its manifest records them."""
    return {**dict(summary["activity"]),
            "events": summary["mechanism_events"].get("leverage", [])}


@pytest.fixture(scope="module")
def leverage_0_runs():
    config = leverage_cell("leverage_0")
    return {seed: margin(simulate(config, seed, progress=False)["summary"]) for seed in SEEDS}


@pytest.fixture(scope="module")
def leverage_25_runs():
    config = leverage_cell("leverage_25")
    return {seed: margin(simulate(config, seed, progress=False)["summary"]) for seed in SEEDS}


def called(runs) -> list[int]:
    return [seed for seed, s in runs.items() if s["margin_calls"]]


def test_leverage_25_reaches_margin_calls_in_at_least_3_of_10_seeds(leverage_25_runs):
    assert len(called(leverage_25_runs)) >= 3
    for s in leverage_25_runs.values():  # recorded in the manifest, one event per call
        assert s["margin_calls"] == len(s["events"])
        assert (s["forced_sale_volume"] > 0) == (s["margin_calls"] > 0)


def test_leverage_alone_produces_margin_calls(leverage_0_runs):
    assert len(called(leverage_0_runs)) >= 3


def test_margin_calls_come_in_many_episodes_over_the_session(leverage_0_runs):
    """Without LLM traders, margin calls fall in many 30-tick windows of the session, not in one
    cascade, and the scheduled shock does not time them.

    Before issue 23 they clustered in the 30 ticks after the +2.1 % shock three times over
    (31 of 190 on seeds 101-110): the market answered the shock with momentum. Since the
    market prices news at once they spread over the session: 15 of 236 after the shock
    (6.4 %) with the first version of issue 23, 3 of 244 (1.2 %) since its second
    (docs/mechanisms.md): a count that moves with a few cascades of one seed, so the test
    claims the spread, not a share."""
    ticks = [t for s in leverage_0_runs.values() for t, _ in s["events"]]
    windows = {t // 30 for t in ticks}
    assert len(windows) >= 8
    biggest = max(sum(t // 30 == w for t in ticks) for w in windows)
    assert biggest < len(ticks) / 2


def test_reported_knobs_now_change_the_run(baseline_path):
    """Issue 18: on the baseline fundamentals with the leverage_25 population, max_leverage 1.5
    or maintenance_margin 0.5 left every table of seed 2 byte-identical."""
    pop = ["population.mix.leveraged=0.19", "population.mix.trend=0.06"]

    def digest(extra):
        tables = simulate(load_config(baseline_path, pop + extra), 2, progress=False)
        return [hashlib.sha256(tables[n].write_csv().encode()).hexdigest()
                for n in ("ticks", "trades", "orders", "agents")]

    base = digest([])
    assert digest(["exchange.max_leverage=1.5"]) != base
    assert digest(["exchange.maintenance_margin=0.5"]) != base


def test_calibration_design_is_the_confirmatory_leverage_cells():
    calib, conf = (yaml.safe_load(p.read_text()) for p in (CALIBRATION, CONFIRMATORY))
    assert calib["overrides"] == conf["overrides"] and calib["base"] == conf["base"]
    conf_cells = {c["name"]: c["overrides"] for c in conf["cells"]}
    for cell in calib["cells"]:
        assert cell["overrides"] == conf_cells[cell["name"]]
    design, confirmatory = load_design(CALIBRATION), load_design(CONFIRMATORY)
    assert design.cells["leverage_25"].seeds == list(SEEDS)
    for name in ("leverage_25", "leverage_0"):
        assert design.cell_config(name, mock=True) == confirmatory.cell_config(name, mock=True)


def test_unlevered_accounts_never_borrow_in_a_leverage_market():
    tables = simulate(leverage_cell("leverage_0"), 101, progress=False)
    agents = tables["agents"]
    others = agents.filter(pl.col("type") != "leveraged")
    assert (others["cash"] >= 0).all() and (others["shares"] >= 0).all()
    assert tables["summary"]["final_conservation_ok"]

import pytest

from market_agents.errors import BudgetExceeded
from market_agents.llm.budget import Budget


def test_run_cap_halts_before_the_call_that_would_pass_it():
    b = Budget(usd_cap=0.0010, planned=lambda m: 0.0004)
    r1 = b.admit("a", "openai", "nano", live=True)
    r2 = b.admit("b", "openai", "nano", live=True)
    with pytest.raises(BudgetExceeded, match="usd_cap 0.001 would be passed") as exc:
        b.admit("c", "openai", "nano", live=True)  # 0.0012 reserved > cap
    assert exc.value.scope == "budget_halt" and b.halted
    b.settle("openai", "nano", r1, 0.0003, live=True)
    b.settle("openai", "nano", r2, 0.0003, live=True)
    assert b.spent == pytest.approx(0.0006)
    with pytest.raises(BudgetExceeded, match="halted earlier"):  # a halt is final
        b.admit("d", "openai", "nano", live=True)
    assert b.halts[0]["scope"] == "run"


def test_estimate_learns_from_recorded_costs():
    b = Budget(usd_cap=1.0, planned=lambda m: 0.5)
    r = b.admit("a", "openai", "nano", live=True)
    b.settle("openai", "nano", r, 0.01, live=True)
    assert b.estimate("nano") == pytest.approx(0.01)
    for _ in range(50):
        b.settle("openai", "nano", b.admit("a", "openai", "nano", live=True), 0.01, live=True)
    assert b.spent == pytest.approx(0.51)


def test_provider_cap_halts_only_that_route():
    b = Budget(usd_cap=10.0, provider_caps={"openai_mini": 0.001}, planned=lambda m: 0.0006)
    b.settle("openai_mini", "mini", b.admit("a", "openai_mini", "mini", True), 0.0006, True)
    with pytest.raises(BudgetExceeded, match="providers.openai_mini.usd_cap"):
        b.admit("a", "openai_mini", "mini", live=True)
    b.admit("b", "openai", "nano", live=True)  # other routes go on
    assert not b.halted and b.halted_routes == {"openai_mini"}


def test_decision_cap_per_agent_and_mock_is_free():
    b = Budget(usd_cap=0.0, decision_cap=2, planned=lambda m: 1.0)
    b.admit("a", "mock", "m", live=False)
    b.admit("a", "mock", "m", live=False)
    with pytest.raises(BudgetExceeded, match="a: decision_cap 2") as exc:
        b.admit("a", "mock", "m", live=False)
    assert exc.value.scope == "decision_cap"
    b.admit("b", "mock", "m", live=False)
    b.settle("mock", "m", 0.0, 5.0, live=False)
    assert b.spent == 0.0 and not b.halted

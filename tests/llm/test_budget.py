import pytest

from market_agents.errors import BudgetExceeded
from market_agents.llm.budget import Budget


def test_run_cap_halts_before_the_call_that_would_pass_it():
    b = Budget(usd_cap=0.0010, planned=lambda m: 0.0004)
    r1 = b.admit("a", "openai", "nano")
    r2 = b.admit("b", "openai", "nano")
    with pytest.raises(BudgetExceeded, match="usd_cap 0.001 would be passed") as exc:
        b.admit("c", "openai", "nano")  # 0.0012 reserved > cap
    assert exc.value.scope == "budget_halt" and b.halted
    b.settle("openai", "nano", r1, 0.0003)
    b.settle("openai", "nano", r2, 0.0003)
    assert b.spent == pytest.approx(0.0006)
    with pytest.raises(BudgetExceeded, match="halted earlier"):  # a halt is final
        b.admit("d", "openai", "nano")
    assert b.halts[0]["scope"] == "run"


def test_estimate_learns_from_recorded_costs():
    b = Budget(usd_cap=1.0, planned=lambda m: 0.5)
    b.settle("openai", "nano", b.admit("a", "openai", "nano"), 0.01)
    assert b.estimate("nano") == pytest.approx(0.01)
    for _ in range(50):
        b.settle("openai", "nano", b.admit("a", "openai", "nano"), 0.01)
    assert b.spent == pytest.approx(0.51)
    b.settle("openai", "nano", b.admit("a", "openai", "nano"), None)  # failed: no charge
    assert b.spent == pytest.approx(0.51) and b._reserved == pytest.approx(0.0)


def test_provider_cap_halts_only_that_route():
    b = Budget(usd_cap=10.0, provider_caps={"openai_mini": 0.001}, planned=lambda m: 0.0006)
    b.settle("openai_mini", "mini", b.admit("a", "openai_mini", "mini"), 0.0006)
    with pytest.raises(BudgetExceeded, match="providers.openai_mini.usd_cap"):
        b.admit("a", "openai_mini", "mini")
    b.admit("b", "openai", "nano")  # other routes go on
    assert not b.halted and b.halted_routes == {"openai_mini"}


def test_decision_cap_per_agent_and_no_run_cap():
    b = Budget(usd_cap=None, decision_cap=2, planned=lambda m: 1.0)
    b.admit("a", "mock", "m")
    b.admit("a", "mock", "m")
    with pytest.raises(BudgetExceeded, match="a: decision_cap 2") as exc:
        b.admit("a", "mock", "m")
    assert exc.value.scope == "decision_cap"
    free = Budget(usd_cap=None, planned=lambda m: 1.0)
    for _ in range(100):  # no usd cap: any spend goes
        free.settle("mock", "m", free.admit("b", "mock", "m"), 5.0)
    assert free.spent == 500.0 and not free.halted

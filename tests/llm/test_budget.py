import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.errors import BudgetExceeded
from market_agents.llm.budget import Budget


def test_run_cap_halts_before_the_call_whose_worst_case_could_pass_it():
    b = Budget(usd_cap=0.0010)
    r1 = b.admit("a", "openai", 0.0004, "tick 3", 3)
    r2 = b.admit("b", "openai", 0.0004, "tick 3", 3)
    with pytest.raises(BudgetExceeded, match="usd_cap 0.001 could be passed") as exc:
        b.admit("c", "openai", 0.0004, "tick 3", 3)  # 0.0012 reserved > cap
    assert exc.value.scope == "budget_halt" and b.halted
    assert b.halts == [{"scope": "run", "at": "tick 3", "tick": 3, "spent": 0.0,
                        "reserved": pytest.approx(0.0008), "next_worst": 0.0004,
                        "cap": 0.001}]
    b.settle("openai", r1, 0.0003)  # the answers cost less than their worst case
    b.settle("openai", r2, 0.0001)
    assert b.spent == pytest.approx(0.0004) and b.reserved == pytest.approx(0.0)
    with pytest.raises(BudgetExceeded, match="halted earlier"):  # a halt is final
        b.admit("d", "openai", 0.0)


def test_failed_call_releases_its_reservation_without_charge():
    b = Budget(usd_cap=1.0)
    b.settle("openai", b.admit("a", "openai", 0.5), None)
    assert b.spent == 0.0 and b.reserved == 0.0
    b.settle("openai", b.admit("a", "openai", 0.5), 0.2)
    assert b.spent == pytest.approx(0.2)


def test_provider_cap_halts_only_that_route():
    b = Budget(usd_cap=10.0, provider_caps={"openai_mini": 0.001})
    b.settle("openai_mini", b.admit("a", "openai_mini", 0.0006), 0.0006)
    with pytest.raises(BudgetExceeded, match="providers.openai_mini.usd_cap"):
        b.admit("a", "openai_mini", 0.0006)
    b.admit("b", "openai", 0.0006)  # other routes go on
    assert not b.halted and b.halted_routes == {"openai_mini"}
    assert b.halts[0]["scope"] == "provider:openai_mini"


def test_decision_cap_per_agent_and_no_run_cap():
    b = Budget(usd_cap=None, decision_cap=2)
    b.admit("a", "mock", 1.0)
    b.admit("a", "mock", 1.0)
    with pytest.raises(BudgetExceeded, match="a: decision_cap 2") as exc:
        b.admit("a", "mock", 1.0)
    assert exc.value.scope == "decision_cap"
    free = Budget(usd_cap=None)
    for _ in range(100):  # no usd cap: any spend goes
        free.settle("mock", free.admit("b", "mock", 5.0), 5.0)
    assert free.spent == 500.0 and not free.halted


@settings(max_examples=200, deadline=None)
@given(cap=st.floats(1e-4, 2.0), batches=st.lists(st.lists(
    st.tuples(st.floats(0.0, 0.05), st.floats(0.0, 1.0)), max_size=16), max_size=30))
def test_spent_never_passes_the_cap_when_answers_cost_at_most_their_worst_case(cap, batches):
    """Whatever the batch sizes (concurrency) and however much of its worst case each answer
    bills, settled spend stays within the cap."""
    b = Budget(usd_cap=cap)
    for batch in batches:
        admitted = []
        for worst, share in batch:
            try:
                admitted.append((b.admit("", "openai", worst), worst * share))
            except BudgetExceeded:
                pass
        for reserved, usd in admitted:
            b.settle("openai", reserved, usd)
        assert b.spent <= cap + 1e-12
    assert b.over_cap_usd == 0.0

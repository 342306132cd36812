"""The budget gate's arithmetic: caps, reconciliation and the order of sacrifice."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from market_agents.errors import BudgetExceeded
from market_agents.pipeline.workflow_config import DEFAULTS
from market_agents.protocol.gate import Caps, approve, is_approved, sacrifice
from market_agents.protocol.planning import RunPlan


def _caps(**kw):
    base = dict(tier_budget_usd=None, pilot_cap_usd=None, project_cap_usd=40.0,
                project_spent_usd=0.0, tolerance=DEFAULTS.reconcile_tolerance,
                t1_min_seeds=DEFAULTS.t1_min_seeds)
    base.update(kw)
    return Caps(**base)


def _t1(spent=None):
    runs = [RunPlan("T1", "share_0", s, 0, 0.0, 0.0 if spent else None) for s in range(101, 131)]
    for cell, dec in (("share_25", 675), ("share_50", 1350)):
        runs += [RunPlan("T1", cell, s, dec, dec * 0.0005, spent) for s in range(101, 111)]
    return runs


def _later():
    runs = []
    for tier, cell, seeds in [("T2", "mini_25", 4), ("T2", "diverse_25", 6), ("T3", "share_75", 2),
                              ("T3", "share_100", 2), ("T3", "share_5", 4),
                              ("T4", "poslimit_25", 2), ("T4", "memory_25", 3),
                              ("T5", "mini_25_equalusd", 3), ("T6", "k2_25", 2)]:
        runs += [RunPlan(tier, cell, 101 + i, 675, 0.34) for i in range(seeds)]
    return runs


def test_t1_plan_counts_live_runs_decisions_and_usd():
    m = approve("confirmatory", "T1", _t1(), _caps(tier_budget_usd=10.13))
    assert m["plan"] == {"live_runs": 20, "decisions": 20250, "usd": pytest.approx(10.125)}
    assert m["approved"]["share_25"] == list(range(101, 111))
    assert m["cut"] == [] and not m["reconciliation"]["cut_applied"]


def test_refuses_over_tier_budget_naming_cap_plan_and_spent():
    with pytest.raises(BudgetExceeded, match=r"plan 10\.13 USD \+ spent 0\.00 USD.*tier T1 "
                       r"budget 5\.00 USD"):
        approve("confirmatory", "T1", _t1(), _caps(tier_budget_usd=5.0))


def test_refuses_over_project_cap_counting_other_designs_spend():
    with pytest.raises(BudgetExceeded, match=r"spent 35\.00 USD.*project cap 40\.00"):
        approve("confirmatory", "T1", _t1(), _caps(project_spent_usd=35.0))


def test_pilot_cap_counts_design_spend():
    runs = [RunPlan("pilot", "share_50", s, 1350, 2.03, 2.0 if s == 1 else None)
            for s in (1, 2, 3)]
    with pytest.raises(BudgetExceeded, match=r"spent 2\.00 USD = 6\.06 USD exceeds the pilot "
                       r"cap 5\.00 USD"):
        approve("pilot_openai", "pilot", runs, _caps(pilot_cap_usd=5.0))


def test_finished_runs_are_not_planned_again():
    runs = _t1(spent=None)
    runs = [RunPlan(r.tier, r.cell, r.seed, r.decisions, r.usd,
                    r.usd if r.seed <= 105 else None) for r in runs]
    m = approve("confirmatory", "T1", runs, _caps())
    assert m["plan"]["live_runs"] == 10
    assert m["approved"]["share_50"] == list(range(101, 111))  # finished stay approved


def test_overrun_cuts_in_order_of_sacrifice_t6_then_t5():
    runs = [RunPlan(r.tier, r.cell, r.seed, r.decisions, r.usd, r.usd * 1.2) for r in _t1()]
    runs += _later()
    m = approve("confirmatory", "T2", runs, _caps())
    assert m["reconciliation"]["cut_applied"]
    overrun = m["reconciliation"]["overrun_usd"]
    assert overrun == pytest.approx(0.2 * 10.125)
    cut = [(c["tier"], c["cell"], c["seed"]) for c in m["cut"]]
    # 2.03 USD: both T6 seeds (0.68), all three T5 seeds (1.02), then share_75/100 seed 102
    assert cut[:2] == [("T6", "k2_25", 102), ("T6", "k2_25", 101)]
    assert [c[0] for c in cut[2:5]] == ["T5"] * 3
    assert {c[1] for c in cut[5:]} <= {"share_75", "share_100"}
    assert sum(c["usd"] for c in m["cut"]) >= overrun
    assert m["approved"]["mini_25"] == [101, 102, 103, 104]  # T2 untouched


def test_within_tolerance_nothing_is_cut():
    runs = [RunPlan(r.tier, r.cell, r.seed, r.decisions, r.usd, r.usd * 1.09) for r in _t1()]
    m = approve("confirmatory", "T2", runs + _later(), _caps())
    assert m["cut"] == []


def test_t1_is_never_cut_below_min_seeds():
    runs = _t1()  # T1 unfinished, huge deficit
    cut = sacrifice(runs, "T1", 1e9, t1_min_seeds=8)
    left = {c: 10 - sum(1 for r in cut if r.cell == c) for c in ("share_25", "share_50")}
    assert left == {"share_25": 8, "share_50": 8}
    assert all(r.seed in (109, 110) for r in cut)


def test_is_approved_reads_manifest():
    m = approve("confirmatory", "T1", _t1(), _caps())
    assert is_approved(m, "share_25", 105) and not is_approved(m, "share_25", 111)


@given(st.floats(min_value=0, max_value=50), st.integers(min_value=1, max_value=10))
def test_sacrifice_covers_deficit_or_exhausts_and_respects_floor(deficit, floor):
    runs = _t1() + _later()
    cut = sacrifice(runs, "T1", deficit, t1_min_seeds=floor)
    saved = sum(r.usd for r in cut)
    # diverse_25 is not in the order of sacrifice
    cuttable = sum(r.usd for r in runs if r.tier != "T1" and r.cell != "diverse_25") + sum(
        r.usd for r in runs if r.tier == "T1" and r.usd > 0 and r.seed > 100 + floor)
    assert saved >= deficit - 1e-9 or saved == pytest.approx(cuttable)
    assert len({(r.cell, r.seed) for r in cut}) == len(cut)


def test_a_runs_spend_is_the_priced_cost_of_its_paid_answers_which_survives_a_kill(tmp_path):
    """A run killed and resumed paid for the answers before the kill in its first execution:
    its usd_spent counts only the last execution, usd_live every paid answer it used."""
    import json

    from market_agents.protocol.ledger import recorded_usd

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / "manifest.json").write_text(json.dumps({"llm_usage": {
        "usd": 0.2, "usd_live": 0.158, "usd_spent": 0.127}}))
    older = tmp_path / "older"  # a manifest from before usd_live
    older.mkdir()
    (older / "manifest.json").write_text(json.dumps({"llm_usage": {"usd_spent": 0.05}}))
    assert recorded_usd(resumed) == 0.158 and recorded_usd(older) == 0.05
    assert recorded_usd(tmp_path / "unfinished") is None

"""Pilot manifest: paired SDs vs the control and the pass/fail criteria."""

import polars as pl
import pytest

from market_agents.errors import ConfigError
from market_agents.pipeline.workflow_config import DEFAULTS
from market_agents.protocol.pilot import criteria, paired_sd, summarize

PILOT = {"control": DEFAULTS.control, "usd_per_decision": DEFAULTS.planning_usd_per_decision}


def _outcomes(valid=0.95, usd_per=0.0005, halts=0):
    rows = []
    for s in (1, 2, 3):
        rows.append(dict(cell="share_0", seed=s, volatility=0.01 * s, n_llm_decisions=0,
                         llm_usd=0.0, llm_valid_rate=None, llm_failure_rate=None,
                         llm_cached_hits=None, llm_budget_halts=0, llm_tokens_in=0,
                         llm_tokens_out=0, llm_tokens_reasoning=0, llm_order_share=None,
                         llm_volume_share=None))
        rows.append(dict(cell="share_25", seed=s, volatility=0.01 * s + [0.0, 0.002, 0.001][s - 1],
                         n_llm_decisions=100, llm_usd=100 * usd_per, llm_valid_rate=valid,
                         llm_failure_rate=0.02, llm_cached_hits=0.0,
                         llm_budget_halts=halts if s == 1 else 0, llm_tokens_in=76000,
                         llm_tokens_out=23000, llm_tokens_reasoning=0, llm_order_share=0.3,
                         llm_volume_share=0.25))
    return pl.DataFrame(rows)


def test_paired_sd_is_sd_of_differences_over_shared_seeds():
    table = paired_sd(_outcomes(), "share_0")
    assert table["share_25"]["n_pairs"] == 3
    assert table["share_25"]["volatility"] == pytest.approx(0.001)  # sd of 0, .002, .001


def test_summary_passes_good_pilot():
    m = summarize(_outcomes(), **PILOT)
    assert m["decisions"] == 300 and m["total_usd"] == pytest.approx(0.15)
    assert m["tokens_per_decision"]["in"] == pytest.approx(760)
    assert m["pass"] and all(c["pass"] for c in m["criteria"].values())
    assert m["realized_shares"]["share_25"]["llm_volume_share"] == pytest.approx(0.25)
    # The mean spend per live run of each cell (T5's equal-USD cap is share_25's).
    assert m["usd_per_run"] == {"share_25": {"mean_usd": pytest.approx(0.05), "runs": 3,
                                             "models": []}}
    with_models = summarize(_outcomes(), **PILOT, models={"share_25": ["gpt-5.4-nano"]})
    assert with_models["usd_per_run"]["share_25"]["models"] == ["gpt-5.4-nano"]


@pytest.mark.parametrize("kw, failing", [({"valid": 0.7}, "validity"),
                                         ({"usd_per": 0.0007}, "cost_per_decision"),
                                         ({"halts": 1}, "no_budget_halts")])
def test_each_criterion_fails_on_its_own(kw, failing):
    m = summarize(_outcomes(**kw), **PILOT)
    assert not m["pass"]
    assert [k for k, c in m["criteria"].items() if not c["pass"]] == [failing]


def test_cost_band_edges():
    base = dict(validity_rate=0.9, failure_rate=0.0, budget_halts=0)
    assert criteria({**base, "usd_per_decision": 0.00065}, 0.0005)["cost_per_decision"]["pass"]
    assert not criteria({**base, "usd_per_decision": 0.00034}, 0.0005)["cost_per_decision"]["pass"]


def test_missing_control_is_named():
    with pytest.raises(ConfigError, match="no control cell 'share_0'"):
        paired_sd(_outcomes().filter(pl.col("cell") != "share_0"), "share_0")


def test_cost_rule_names_the_planned_rate_it_checks():
    m = summarize(_outcomes(usd_per=0.001), control="share_0", usd_per_decision=0.001)
    assert m["criteria"]["cost_per_decision"]["pass"]
    assert m["criteria"]["cost_per_decision"]["rule"] == "usd per decision within ±30 % of 0.001"


FAILED = {"pass": False, "criteria": {"validity": {"pass": False}, "failures": {"pass": True}}}


def test_the_failure_path_starts_only_after_a_failed_pilot(tmp_path):
    import json

    from market_agents.protocol.pilot import require_failed

    path = tmp_path / "pilot.json"
    with pytest.raises(ConfigError, match="pilot.json does not exist: the re-pilot"):
        require_failed(path)
    path.write_text(json.dumps({"pass": True, "criteria": {"validity": {"pass": True}}}))
    with pytest.raises(ConfigError, match="records a pilot that passed"):
        require_failed(path)
    path.write_text(json.dumps(FAILED))
    assert require_failed(path) == {"path": str(path), "failed": ["validity"]}


def test_the_freeze_follows_a_failed_pilot_only_through_a_passing_repilot():
    from market_agents.protocol.pilot import after_failed_pilot

    assert after_failed_pilot({"pass": True, "criteria": {}}, None, ["v1"], "r.json") is None
    with pytest.raises(ConfigError, match=r"failed: validity, and r\.json does not exist"):
        after_failed_pilot(FAILED, None, ["v2"], "r.json")
    with pytest.raises(ConfigError, match="records a re-pilot that failed too"):
        after_failed_pilot(FAILED, {"pass": False}, ["v2"], "r.json")
    passed = {"pass": True, "prompt_versions": ["v2"], "criteria": {}}
    with pytest.raises(ConfigError, match=r"confirmatory design uses \['v1'\]"):
        after_failed_pilot(FAILED, passed, ["v1"], "r.json")
    assert after_failed_pilot(FAILED, passed, ["v2"], "r.json")["failed_pilot_criteria"] == [
        "validity"]

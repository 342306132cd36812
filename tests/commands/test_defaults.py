"""The protocol's defaults are defined once, in the workflow config model: every command option
that takes one defaults to it, and so do the planning functions and the run contract."""

import inspect

from market_agents.cli import build_parser
from market_agents.llm.config import TokenProfile
from market_agents.pipeline.contract import RunSpec
from market_agents.pipeline.workflow_config import DEFAULTS, WorkflowConfig
from market_agents.protocol.planning import plan_cell, plan_design


def _args(*argv):
    return build_parser(argv[0]).parse_args(list(argv))


def test_the_defaults_are_the_protocols():
    assert (DEFAULTS.tokens_in, DEFAULTS.tokens_out) == (760, 230)
    assert DEFAULTS.project_cap_usd == 40.0 and DEFAULTS.pilot_cap_usd == 5.0
    assert DEFAULTS.reconcile_tolerance == 0.10 and DEFAULTS.t1_min_seeds == 8
    assert DEFAULTS.control == "share_0" and DEFAULTS.planning_usd_per_decision == 0.0005
    assert DEFAULTS == WorkflowConfig()


def test_every_command_option_defaults_to_the_workflow_config():
    gate = _args("gate", "approve", "d.yaml", "--tier", "T1", "--out", "x.json")
    assert (gate.project_cap, gate.tolerance, gate.t1_min_seeds) == (
        DEFAULTS.project_cap_usd, DEFAULTS.reconcile_tolerance, DEFAULTS.t1_min_seeds)
    budget = _args("budget", "d.yaml")
    assert (budget.tokens_in, budget.tokens_out) == (DEFAULTS.tokens_in, DEFAULTS.tokens_out)
    pilot = _args("pilot", "d.yaml")
    assert (pilot.control, pilot.usd_per_decision) == (
        DEFAULTS.control, DEFAULTS.planning_usd_per_decision)


def test_planning_and_the_contract_use_the_same_defaults():
    profile = TokenProfile()
    assert (profile.tokens_in, profile.tokens_out) == (DEFAULTS.tokens_in, DEFAULTS.tokens_out)
    for fn in (plan_cell, plan_design):
        params = inspect.signature(fn).parameters
        assert params["tokens_in"].default == DEFAULTS.tokens_in
        assert params["tokens_out"].default == DEFAULTS.tokens_out
    spec = RunSpec(run_id="x", step="exploratory", target="exploratory", designs=["exploratory"])
    assert spec.control == DEFAULTS.control

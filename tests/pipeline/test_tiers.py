"""One tier list (``protocol.tiers.TIERS``) and everything that names the tiers: the workflow's
target rules (``tier_<T>``, ``rehearse_<T>``, declared in a loop in rules/targets.smk), the run
contract's steps and run configs (``config/run/tier_<T>.yaml``) and the rows of the paper's
protocol DAG agree. A hand-written rule for a tier not in the list, a tier without its rules, a
step list or paper rows spelled apart from the list: each fails here."""

from __future__ import annotations

import re

import polars as pl
import pytest

from market_agents.paper import figures
from market_agents.pipeline.contract import STEPS, load_run_spec
from market_agents.pipeline.workflow import TARGETS
from market_agents.protocol.tiers import (
    REHEARSAL_TARGET_PREFIX,
    TARGET_PREFIX,
    TIERS,
    rehearsal_target,
    target,
)
from tests.support import ROOT
from tests.support.workflow import smk

# A tier's name as the rules spell it (T1, T2, ...): what a hand-written tier rule would match.
TIER_NAME = re.compile(r"T[0-9]+")


def _rules(workdir) -> list[str]:
    done = smk(workdir, "--list-rules")
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.strip() for line in done.stdout.splitlines()
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", line.strip())]


@pytest.mark.slow(5)
def test_the_workflow_declares_one_live_and_one_rehearsal_target_per_tier(workdir):
    rules = _rules(workdir)
    live = [r for r in rules if r.startswith(TARGET_PREFIX)]
    rehearsals = [r for r in rules if r.startswith(REHEARSAL_TARGET_PREFIX)
                  and TIER_NAME.fullmatch(r.removeprefix(REHEARSAL_TARGET_PREFIX))]
    assert sorted(live) == sorted(target(t) for t in TIERS)
    assert sorted(rehearsals) == sorted(rehearsal_target(t) for t in TIERS)
    # the catch-all's message names the first and the last tier's targets
    assert f"{target(TIERS[0])} … {target(TIERS[-1])}" in TARGETS
    assert f"{rehearsal_target(TIERS[0])} … {rehearsal_target(TIERS[-1])}" in TARGETS


def test_the_contract_has_one_step_and_one_run_config_per_tier():
    assert STEPS[STEPS.index("freeze") + 1:STEPS.index("paper")] == TIERS
    tier_steps = []
    for path in sorted((ROOT / "config/run").glob("*.yaml")):
        spec = load_run_spec(path.stem, ROOT)
        if spec.step in TIERS:
            tier_steps.append(spec.step)
            assert spec.run_id == target(spec.step), path
            assert spec.target == target(spec.step) and spec.tier == spec.step, path
            assert spec.mode("sanity").target == rehearsal_target(spec.step), path
    assert sorted(tier_steps, key=TIERS.index) == list(TIERS)


def test_the_paper_draws_one_row_per_tier_in_order():
    plan = pl.DataFrame({"cell": ["share_0", "share_25"], "tier_label": [TIERS[0], TIERS[-1]],
                         "seeds": [2, 2], "live": [True, True], "usd": [1.0, 2.0]})
    nodes, edges = figures.protocol_graph(plan, TIERS)
    gates = sorted((n for n in nodes if n.key.startswith("gate_")), key=lambda n: n.row)
    assert [n.key.removeprefix("gate_") for n in gates] == list(TIERS)
    assert [n.row for n in gates] == list(range(gates[0].row, gates[0].row + len(TIERS)))
    keys = {n.key for n in nodes}
    assert all(a in keys and b in keys for a, b in edges)
    # each tier's gate waits for the previous tier's reconciliation
    for before, after in zip(TIERS, TIERS[1:], strict=False):
        assert (f"rec_{before}", f"gate_{after}") in edges

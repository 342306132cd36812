"""`ma gate` on run directories: spend recorded by finished runs drives the reconciliation, an
overrun cuts seeds in the order of sacrifice, and a cut run is refused by `ma gate check`."""

import json

import pytest

from tests.support import inprocess
from tests.support.workflow import env

DESIGN = "config/test/designs/confirmatory.yaml"


# The gate's arithmetic, apart from the freeze: the tiered test design is not the confirmatory
# one here (tests/protocol/test_guards.py covers the freeze on the gate).
GUARDS = json.dumps({"confirmatory": "main_study"})


def _ma(workdir, *args):
    return inprocess.ma(args, env(OPENAI_API_KEY="sk-x", MARKET_AGENTS_GUARDS=GUARDS), workdir)


def _finish(workdir, cell, seed, usd):
    run = workdir / f"results/runs/confirmatory/{cell}/seed{seed:04d}"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"llm_usage": {"usd_spent": usd}}))


@pytest.mark.slow(4)
def test_overrun_cuts_t2_and_check_refuses_the_cut_seed(workdir):
    path = workdir / DESIGN
    # T1 and T2 only (later tiers would be cut first), share_50 renamed mini_25.
    text = path.read_text().split("  - name: mix_25")[0]
    path.write_text(text.replace("name: share_50, tier: T2", "name: mini_25, tier: T2"))
    for seed in (101, 102, 103):
        _finish(workdir, "share_0", seed, 0.0)
    for seed in (101, 102):  # planned 25 decisions x 0.0005 = 0.0125 USD each; spent 0.02
        _finish(workdir, "share_25", seed, 0.02)
    done = _ma(workdir, "gate", "approve", DESIGN, "--tier", "T2", "--out", "gate.json")
    assert done.returncode == 0, done.stderr
    gate = json.loads((workdir / "gate.json").read_text())
    assert gate["reconciliation"]["overrun_usd"] == 0.015 and gate["reconciliation"]["cut_applied"]
    assert gate["cut"] == [{"tier": "T2", "cell": "mini_25", "seed": 102, "usd": 0.025}]
    assert gate["approved"] == {"mini_25": [101]}
    assert gate["spent_usd"]["project"] == 0.04

    assert _ma(workdir, "gate", "check", "gate.json", "--cell", "mini_25", "--seed", "101")\
        .returncode == 0
    refused = _ma(workdir, "gate", "check", "gate.json", "--cell", "mini_25", "--seed", "102")
    assert refused.returncode == 2
    assert "mini_25 seed 102 is not approved (cut by the order of sacrifice" in refused.stderr


def test_tier_budget_refusal_names_cap_plan_and_spent(workdir):
    _finish(workdir, "share_25", 101, 0.04)  # seed 102 still planned: 0.0125 USD
    done = _ma(workdir, "gate", "approve", DESIGN, "--tier", "T1", "--out", "gate.json")
    assert done.returncode == 2
    assert ("refused: plan 0.0125 USD + spent 0.0400 USD = 0.0525 USD exceeds the tier T1 "
            "budget 0.0500 USD; no live call was made") in done.stderr
    assert not (workdir / "gate.json").exists()

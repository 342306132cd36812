"""The pilot's failure path (§4) by one target: `snakemake repilot` re-runs the re-pilot design
(prompt v2) on the mock, then runs its one live seed under the 0.7 USD cap, and only once a
failed pilot is recorded: without a pilot, or after a pilot that passed, no request is sent."""

import json

import pytest

from market_agents.testing.fakeserver import FakeAPI
from tests.support.workflow import smk

FAILED = {"pass": False, "criteria": {"validity": {"pass": False}, "failures": {"pass": True}}}


@pytest.mark.slow(44)
def test_repilot_runs_only_after_a_failed_pilot(workdir):
    pilot = workdir / "results/manifests/pilot.json"
    with FakeAPI() as api:
        keys = dict(OPENAI_BASE_URL=f"{api.url}/v1", OPENAI_API_KEY="sk-test")
        none = smk(workdir, "--cores", "2", "repilot", **keys)
        assert none.returncode != 0
        assert "pilot.json does not exist: the re-pilot (§4) runs only after the pilot" in (
            none.stdout + none.stderr)
        rehearsal = json.loads((workdir / "results/rehearsal/manifests/repilot.json").read_text())
        assert rehearsal["rehearsal"] and rehearsal["prompt_versions"] == ["v2"]  # mock first

        pilot.parent.mkdir(parents=True, exist_ok=True)
        pilot.write_text(json.dumps({"pass": True, "criteria": {"validity": {"pass": True}}}))
        passed = smk(workdir, "--cores", "2", "repilot", **keys)
        assert passed.returncode != 0
        assert "records a pilot that passed" in passed.stdout + passed.stderr
        assert api.requests == []

        pilot.write_text(json.dumps(FAILED))
        done = smk(workdir, "--cores", "2", "repilot", **keys)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        assert len(api.requests) == 25  # share_25: 5 agents x 5 decisions, one seed
        assert all("Limits: quantity is a whole number" in json.dumps(r["body"])
                   for r in api.requests)  # prompt v2
    repilot = json.loads((workdir / "results/manifests/repilot.json").read_text())
    assert repilot["prompt_versions"] == ["v2"] and repilot["decisions"] == 25
    assert not repilot["rehearsal"]
    gate = json.loads((workdir / "results/manifests/budget/repilot_openai_all.json").read_text())
    assert gate["after_failed_pilot"]["failed"] == ["validity"]
    assert gate["caps_usd"]["pilot"] == 0.7
    assert gate["approved"] == {"share_0": [1], "share_25": [1]}

"""Issue 33: the fault corpus (faults/cases.yaml, kept apart from these tests) gives 0
tracebacks, 0 silent acceptances that pay, 0 answers paid and not recorded, 0 files removed,
0 wrong outcomes and no key in any output (faults/run.py counts them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from tests.support import ROOT

FAULTS = ROOT / "faults"


def test_every_case_names_what_it_expects_once():
    cases = yaml.safe_load((FAULTS / "cases.yaml").read_text())
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)) and len(names) >= 60
    assert {c["expect"] for c in cases} <= {"refused", "ok", "stopped"}


def _corpus(out, *args):
    proc = subprocess.run([sys.executable, str(FAULTS / "run.py"), "--workers", "4", "--json",
                           str(out), *args], capture_output=True, text=True, timeout=1500)
    last = proc.stdout.strip().splitlines()[-1]
    assert proc.returncode == 0, "\n".join(
        line for line in proc.stdout.splitlines() if "FAIL" in line) + "\n" + proc.stderr[-2000:]
    assert last.endswith("0 traceback, 0 wrong_outcome, 0 silent_paying, 0 paid_unrecorded, "
                         "0 removed, 0 secret"), last
    return {c["name"]: c for c in json.loads(out.read_text())["cases"]}


# An `ma` process per case: the longest test the quick subset had (it ran alone at the end of
# a loaded `make test-quick` for several minutes), so it is slow and runs first. Four cases at
# once: most of a case is waiting on its fake server (latency, hangs, retries).
@pytest.mark.slow(120)
def test_the_fault_corpus_counts_zero_of_everything(tmp_path):
    forked = _corpus(tmp_path / "faults.json")
    assert len(forked) >= 60
    # The cases' processes are forked from one that imported the SDKs (faults/run.py): a
    # new interpreter per case judges a live run, environment switches and working-directory
    # refusals alike: the same exit, requests, answers, records and line (but for the
    # scratch folder's name).
    fresh = _corpus(tmp_path / "fresh.json", "--fresh", "--only", "answer-ok-openai", "env-",
                    "out-dot")
    assert len(fresh) == 7

    def judged(case):
        line = re.sub(r"ma-fault-[A-Za-z0-9_]+", "ma-fault-", case["line"])
        return [case[k] for k in ("exit", "requests", "answered", "recorded")] + [line]

    assert {n: judged(c) for n, c in fresh.items()} == {n: judged(forked[n]) for n in fresh}

"""What `.gitignore` keeps out of a commit and what it must not (issue 27): the files `vf-eval`
leaves are ignored."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import ROOT


def _ignored(path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
    if done.returncode == 128:
        pytest.skip("not a git checkout")
    return done.returncode == 0


def test_what_vf_eval_saves_is_ignored():
    assert _ignored("outputs/evals/bazaar--m/0a1b2c3d/results.jsonl")

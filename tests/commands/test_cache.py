"""``ma cache retry-failures`` on paths that are not a cache (issue 25): refused in one line,
exit 2, with or without ``--dry-run``, and nothing created there."""

from __future__ import annotations

import pytest

from market_agents.cli import main
from market_agents.llm.cache import ResponseCache


@pytest.mark.parametrize("dry_run", [False, True], ids=["remove", "dry_run"])
@pytest.mark.parametrize("what", ["missing", "missing_parent", "empty_dir"])
def test_retry_failures_refuses_a_path_that_is_not_a_cache(tmp_path, capsys, dry_run, what):
    # Opened for writing, a missing path once became a new, empty cache ("removed 0").
    path = {"missing": tmp_path / "nope", "missing_parent": tmp_path / "a" / "b",
            "empty_dir": tmp_path / "empty"}[what]
    if what == "empty_dir":
        path.mkdir()
    before = sorted(tmp_path.rglob("*"))
    argv = ["cache", "retry-failures", str(path), *(["--dry-run"] if dry_run else [])]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (f"ma cache: error: {path}: not an LLM response cache (no "
                                    "cache.db inside)")
    assert sorted(tmp_path.rglob("*")) == before  # nothing created


def test_retry_failures_still_opens_a_cache_for_writing(tmp_path, capsys):
    cache = ResponseCache(tmp_path / "c")
    cache.put("f", {"request": {"model": "gpt-5.4-nano"}, "status": "failed",
                    "error_class": "timeout"})
    cache.close()
    assert main(["cache", "retry-failures", str(tmp_path / "c")]) == 0
    assert "removed 1 recorded failure(s) (timeout 1)" in capsys.readouterr().out
    assert len(ResponseCache(tmp_path / "c", readonly=True)) == 0

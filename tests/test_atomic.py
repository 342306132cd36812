"""Atomic writers: readers see the old file or the new one; a failed write (a full disk) leaves
nothing behind and raises OSError naming the file; JSON is strict."""

from __future__ import annotations

import errno
import math
import os

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from market_agents.atomic import (
    NotJSON,
    json_text,
    naming,
    write_atomic,
    write_json_atomic,
    write_parquet_atomic,
)
from tests.support import strict_loads


def test_a_failed_write_keeps_the_old_file_and_names_the_path(tmp_path):
    path = tmp_path / "out.json"
    write_json_atomic(path, {"v": 1})

    def torn(fh):
        fh.write(b'{"v": ')
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"No space left on device") as info:
        write_atomic(path, torn)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    assert strict_loads(path.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_polars_reports_a_full_disk_as_an_os_error_naming_the_file(tmp_path):
    with pytest.raises(OSError, match="No space left on device") as info, naming(tmp_path / "t"):
        raise pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device "
                                         "(os error 28)")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "t")


def test_a_write_failure_without_an_errno_is_an_os_error_naming_the_file(tmp_path):
    # What a parquet write on a disk with 16-20 KiB free raised: no `os error N` in the text,
    # so naming re-raised it and the command ended in a 32-line traceback (issue 25).
    target = tmp_path / "run" / "orders.parquet"  # not there yet: the free space of its parent
    with pytest.raises(OSError, match=r"^\[Errno 5\] cannot write: parquet: File out of "
                       r"specification: Invalid thrift: transport error \(polars ComputeError; "
                       r"[\d,]+ KiB free on its file system\)") as info, naming(target):
        raise pl.exceptions.ComputeError("parquet: File out of specification: Invalid thrift: "
                                         "transport error")
    assert info.value.errno == errno.EIO and info.value.filename == str(target)
    with pytest.raises(OSError, match="polars PanicException"), naming(target):
        raise pl.exceptions.PanicException("called `Result::unwrap()` on an `Err` value")


@given(st.text() | st.text().map(lambda t: f"{t} (os error {len(t) * 10**9})"))
def test_any_polars_failure_in_a_write_is_one_line_naming_the_path(message):
    with pytest.raises(OSError) as info, naming("/no/such/dir/t.parquet"):
        raise pl.exceptions.ComputeError(message)
    assert info.value.filename == "/no/such/dir/t.parquet"
    assert info.value.errno and "\n" not in info.value.strerror and info.value.strerror


def test_parquet_is_written_whole(tmp_path):
    frame = pl.DataFrame({"a": [1, 2, 3]})
    write_parquet_atomic(tmp_path / "t.parquet", frame)
    assert pl.read_parquet(tmp_path / "t.parquet").equals(frame)
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


@given(st.sampled_from([math.nan, math.inf, -math.inf]))
def test_json_is_strict(value):
    with pytest.raises(ValueError, match=r"^x\.1\.y is (nan|inf|-inf): JSON holds finite "):
        json_text({"x": [1.0, {"y": value}]})


@given(st.recursive(st.floats(allow_nan=False, allow_infinity=False) | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12),
       st.sampled_from([math.nan, math.inf, -math.inf]))
def test_a_non_finite_number_anywhere_is_named_by_file_and_key(data, value):
    # issue 33: e83eada let "Out of range float values are not JSON compliant: inf" reach ma
    # as a traceback (a price of 1e308 made a manifest's worst case infinite)
    doc = {"llm_usage": {"worst": [0.5, value]}, "other": data}
    with pytest.raises(NotJSON, match=r"^manifest\.json: llm_usage\.worst\.1 is "):
        json_text(doc, where="manifest.json")


def test_write_json_atomic_names_the_file_and_writes_nothing(tmp_path):
    with pytest.raises(NotJSON, match=rf"^{tmp_path / 'm.json'}: a is inf"):
        write_json_atomic(tmp_path / "m.json", {"a": math.inf})
    assert list(tmp_path.iterdir()) == []


# --- issue 37: result files take the user's umask, not a temporary file's 0600 -------------


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_an_atomic_write_gets_the_mode_the_umask_gives(tmp_path, mask):
    from market_agents import atomic

    before = os.umask(mask)
    atomic._umask.cache_clear()
    try:
        atomic.write_atomic(tmp_path / "f.bin", lambda fh: fh.write(b"x"))
    finally:
        os.umask(before)
        atomic._umask.cache_clear()
    assert (tmp_path / "f.bin").stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_run_and_its_figure_are_readable_by_a_colleague_under_umask_022(tmp_path):
    """On e83eada a run directory was 0700 (mkdtemp) and ma plot's PNG 0600 (mkstemp)."""
    import subprocess
    import sys

    from tests.support import ROOT

    def ma(*args):
        return subprocess.run([sys.executable, "-m", "market_agents.cli", *args], cwd=tmp_path,
                              capture_output=True, text=True, preexec_fn=lambda: os.umask(0o022),
                              timeout=300)

    assert ma("run", str(ROOT / "config" / "baseline.yaml"), "--seed", "1", "--out", "r",
              "--quiet").returncode == 0
    assert ma("plot", "r").returncode == 0
    assert (tmp_path / "r").stat().st_mode & 0o777 == 0o755
    for f in (tmp_path / "r").iterdir():
        assert f.stat().st_mode & 0o777 == 0o644, f.name

"""Issue 25: a response cache on a network filesystem is refused (SQLite's WAL mode, the cache's
default, does not work there) unless MARKET_AGENTS_CACHE_JOURNAL=delete opts in to the
rollback journal. The filesystem type is read from /proc/self/mountinfo; tests point it at a
written mountinfo, or replace ``filesystem_type``."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

import market_agents.llm.filesystem as fs
from market_agents.cli import main
from market_agents.llm.cache import CacheError, ResponseCache
from tests.support import ROOT

BASELINE = ROOT / "config" / "baseline.yaml"


def mountinfo(tmp_path, monkeypatch, mounts: list[tuple[str, str]]) -> None:
    """Point ``filesystem_type`` at a mountinfo listing ``(mount point, type)`` in order."""
    lines = [f"{20 + i} 1 0:{i} / {point} rw,relatime shared:{i} - {kind} src{i} rw"
             for i, (point, kind) in enumerate(mounts)]
    path = tmp_path / "mountinfo"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(fs, "MOUNTINFO", str(path))


def on(monkeypatch, kind: str | None) -> None:
    monkeypatch.setattr(fs, "filesystem_type", lambda path: kind)


def test_the_longest_mount_point_that_holds_the_path_names_its_type(tmp_path, monkeypatch):
    base = str(tmp_path)
    (tmp_path / "scratch" / "my cache").mkdir(parents=True)
    (tmp_path / "scratchy").mkdir()
    mountinfo(tmp_path, monkeypatch, [("/", "ext4"), (f"{base}/scratch", "tmpfs"),
                                      (f"{base}/scratch", "nfs4"),  # mounted over the tmpfs
                                      (f"{base}/scratch/my\\040cache", "lustre")])
    assert fs.filesystem_type(tmp_path) == "ext4"
    assert fs.filesystem_type(tmp_path / "scratch") == "nfs4"
    assert fs.filesystem_type(tmp_path / "scratch" / "not" / "yet") == "nfs4"  # where it will be
    assert fs.filesystem_type(tmp_path / "scratch" / "my cache" / "c") == "lustre"
    assert fs.filesystem_type(tmp_path / "scratchy") == "ext4"  # a prefix, not a parent


def test_no_mountinfo_means_unknown_and_allowed(tmp_path, monkeypatch):
    monkeypatch.setattr(fs, "MOUNTINFO", str(tmp_path / "absent"))
    assert fs.filesystem_type(tmp_path) is None
    assert fs.store_settings(tmp_path) == {}


def test_this_machine_reads_its_own_mounts(tmp_path):
    assert fs.filesystem_type(tmp_path) not in (None, "")


@given(st.sampled_from(sorted(fs.NETWORK_FILESYSTEMS)) | st.sampled_from(["nfs3", "nfsd"]))
def test_network_filesystems_are_network(kind):
    assert fs.is_network(kind)


@pytest.mark.parametrize("kind", ["ext4", "xfs", "btrfs", "tmpfs", "zfs", "overlay", None])
def test_local_filesystems_are_not(kind):
    assert not fs.is_network(kind)


def test_a_cache_on_nfs_is_refused_and_nothing_is_created(tmp_path, monkeypatch):
    on(monkeypatch, "nfs4")
    path = tmp_path / "c"
    with pytest.raises(CacheError, match=rf"^--cache {path}: is on a network filesystem \(nfs4\), "
                       r"where SQLite's WAL journal .* set MARKET_AGENTS_CACHE_JOURNAL=delete "
                       r"in every process") as info:
        ResponseCache(path)
    assert "\n" not in str(info.value)
    assert not path.exists()


def test_an_existing_cache_on_lustre_is_refused_for_reading_too(tmp_path, monkeypatch):
    ResponseCache(tmp_path / "c").close()
    on(monkeypatch, "lustre")
    with pytest.raises(CacheError, match=r"network filesystem \(lustre\)"):
        ResponseCache(tmp_path / "c", readonly=True)


def test_the_opt_in_opens_it_in_the_rollback_journal(tmp_path, monkeypatch):
    on(monkeypatch, "nfs")
    monkeypatch.setenv(fs.JOURNAL_ENV, "delete")
    cache = ResponseCache(tmp_path / "c")
    cache.put("k", {"status": "answered", "text": "a"})
    cache.close()
    con = sqlite3.connect(tmp_path / "c" / "cache.db")
    try:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    finally:
        con.close()
    assert ResponseCache(tmp_path / "c", readonly=True).get("k")["text"] == "a"
    # The mode is stored in the cache: copied to a local disk and opened there without the
    # variable, it stays in the rollback journal.
    monkeypatch.delenv(fs.JOURNAL_ENV)
    on(monkeypatch, "ext4")
    ResponseCache(tmp_path / "c").close()
    con = sqlite3.connect(tmp_path / "c" / "cache.db")
    try:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    finally:
        con.close()


def test_a_local_cache_keeps_the_wal_journal(tmp_path, monkeypatch):
    on(monkeypatch, "ext4")
    ResponseCache(tmp_path / "c").close()
    con = sqlite3.connect(tmp_path / "c" / "cache.db")
    try:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        con.close()


def test_another_journal_value_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(fs.JOURNAL_ENV, "truncate")
    with pytest.raises(CacheError, match=r"^MARKET_AGENTS_CACHE_JOURNAL='truncate': expected "
                       r"'delete'"):
        ResponseCache(tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_ma_run_refuses_a_cache_on_nfs_in_one_line(tmp_path, monkeypatch, capsys):
    on(monkeypatch, "nfs4")
    cache, out = tmp_path / "cache", tmp_path / "run"
    code = main(["run", str(BASELINE), "--seed", "1", "--out", str(out), "--quiet", "--cache",
                 str(cache), "--set", "population.llm_share=0.1"])
    err = capsys.readouterr().err
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.startswith(f"ma run: error: --cache {cache}: is on a network filesystem (nfs4)")
    assert not cache.exists() and not out.exists()


def test_ma_cache_refuses_a_cache_on_nfs_in_one_line(tmp_path, monkeypatch, capsys):
    ResponseCache(tmp_path / "c").close()
    on(monkeypatch, "cifs")
    assert main(["cache", "summary", str(tmp_path / "c")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"ma cache: error: --cache {tmp_path / 'c'}: is on a network "
                           "filesystem (cifs)")

"""plugins.py's scan of installed entry points finds what importlib.metadata finds."""

import sys
from importlib import metadata

import pytest

from market_agents import plugins

GROUPS = ("market_agents.traders", "market_agents.mechanisms")


def dist(folder, stem, entry_points=None, name=None):
    """A distribution's metadata folder ``stem`` (e.g. ``pkg-1.0.dist-info``) in ``folder``."""
    info = folder / stem
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name or stem.split('-')[0]}\n"
                                   "Version: 1.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def stdlib(group):
    return tuple(metadata.entry_points(group=group))


@pytest.fixture
def fresh(monkeypatch):
    """The scan made afresh (the process's own is cached), on the sys.path a test sets."""
    plugins._installed.cache_clear()
    yield
    plugins._installed.cache_clear()


def test_the_scan_finds_what_importlib_finds(tmp_path, monkeypatch, fresh):
    first, second = tmp_path / "first", tmp_path / "second"
    ours = "[market_agents.traders]\nbold = bold_pkg.trader\n\n[console_scripts]\nb = x:y\n"
    dist(first, "Bold_Pkg-1.0.dist-info", ours)
    # the same name later on the path is shadowed, however it is spelt
    dist(second, "bold.pkg-2.0.dist-info", "[market_agents.traders]\nshadowed = nope\n")
    dist(second, "meek-1.0.egg-info", "[market_agents.mechanisms]\nfee = meek.fee\n")
    dist(second, "plain-1.0.dist-info")  # no entry points
    dist(second, "other-1.0.dist-info", "[console_scripts]\nother = other:main\n")
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second),
                                      *sys.path])
    monkeypatch.setattr(plugins, "_stdlib", lambda: pytest.fail("read by importlib instead"))
    for group in GROUPS:
        assert plugins.entry_points(group) == stdlib(group)
    assert [ep.name for ep in plugins.entry_points("market_agents.traders")] == ["bold"]
    assert [ep.name for ep in plugins.entry_points("market_agents.mechanisms")] == ["fee"]


def test_a_path_the_scan_does_not_read_is_left_to_importlib(tmp_path, monkeypatch, fresh):
    archive = tmp_path / "plugins.zip"  # a zip on sys.path: importlib reads it
    archive.write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    asked = []
    monkeypatch.setattr(plugins, "_stdlib", lambda: asked.append(1) or ())
    assert plugins.entry_points("market_agents.traders") == () and asked == [1]

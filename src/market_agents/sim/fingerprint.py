"""The code fingerprint of a run (design principle 14, "a result names the code that made it"):
the SHA-256 of the package source that decides what a run's tables hold, recorded in every
manifest.json as ``code_fingerprint`` (:func:`market_agents.sim.runner.run_to_dir`) and
compared with the current code by ``ma status`` (:mod:`market_agents.protocol.status`).

What is hashed is :data:`ENGINE`, paths under the package root. The rule: a file is in when a
change to it can change a run's ticks, trades, orders, agents or LLM decisions for the same
config, seed and cache:

- ``market/`` (the book, the exchange, its rules, fundamentals), ``agents/`` (the traders),
  ``sim/`` (the tick loop, the runner, the table schemas and how they are written),
- ``llm/`` whole: prompting and schema (what a trader is asked and how an answer is read),
  the providers, the client and the cache (what decides, or replays, an LLM trader's answer),
  pricing and the runtime caps (a run's USD cap stops decisions),
- ``config.py`` and ``config_llm.py`` (defaults and derived values: a config that hashes the
  same can build a different market when they change), ``prices.py`` (the cost of a call, which
  a USD cap acts on), ``provider_kinds.py`` (each kind's default settings), ``rng.py`` (the
  random streams), ``core.py`` (``canonical_json``: the cache key).

Out, because they do not decide a run's tables: ``analysis/`` (outcomes are re-scored from saved
ticks; the freeze pins the frozen outcome definitions), ``paper/``, ``pipeline/``, ``commands/``,
``protocol/`` (which cells and seeds run, not what a run holds; a changed cell config changes its
``config_hash``), ``bazaar/``, ``testing/``, and the helpers that read and write files or name
errors (``atomic.py``, ``inputs.py``, ``outputs.py``, ``errors.py``, ``layout.py``,
``cli.py``).

Plug-ins from other packages (trader types and mechanisms registered through entry points,
:mod:`market_agents.plugins`) decide a run's tables as much as the package's own modules: the
source file of each module their entry points name is hashed too, named ``plugin:<module>``.

The hash covers each file's path relative to the package root and its bytes, in sorted path
order, so it is the same wherever the package is installed and changes when a file is added,
removed, renamed or edited. It is computed once per process: this module imports only the
standard library and the registries' module (not what they register), and hashing its
sixty-odd files (about 0.4 MB) takes a few milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

from market_agents.plugins import MECHANISMS, TRADERS

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
"""The ``market_agents`` package folder the fingerprint of this process reads."""

ENGINE: tuple[str, ...] = (
    "market/", "agents/", "sim/", "llm/",
    "config.py", "config_llm.py", "prices.py", "provider_kinds.py", "rng.py", "core.py",
)
"""What the fingerprint hashes, under the package root: a folder (``name/``: every file in it
and below with a suffix of :data:`SUFFIXES`) or one file. Why these: the module docstring."""

SUFFIXES = (".py", ".yaml", ".yml", ".json")
"""The files of a folder that count: source and the data files that may join it (prompt sets),
not bytecode caches or editor backups."""

SHORT = 16
"""Hex digits shown where a fingerprint is displayed (manifests store all 64)."""


def engine_files(root: Path = PACKAGE_ROOT) -> list[str]:
    """The files :func:`fingerprint` hashes, as paths relative to ``root``, sorted.

    Args:
        root: a ``market_agents`` package folder.

    Returns:
        POSIX paths such as ``market/book.py``.

    Raises:
        FileNotFoundError: a file or folder of :data:`ENGINE` is not under ``root``.
    """
    out: list[str] = []
    for entry in ENGINE:
        path = root / entry.rstrip("/")
        if entry.endswith("/"):
            if not path.is_dir():
                raise FileNotFoundError(f"{path}: a folder of the code fingerprint is missing")
            out += [f"{entry.rstrip('/')}/{rel}" for rel in _files_under(path)]
        else:
            if not path.is_file():
                raise FileNotFoundError(f"{path}: a file of the code fingerprint is missing")
            out.append(entry)
    return sorted(out)


def _files_under(folder: Path, prefix: str = "") -> Iterator[str]:
    """The files of :data:`SUFFIXES` under ``folder`` and below, relative to it, as
    ``Path.rglob("*")`` with ``is_file()`` finds them (a linked folder is not entered), but
    without a ``Path`` per entry (5 ms of every process that writes a run); bytecode caches are
    skipped."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    yield from _files_under(Path(entry.path), f"{prefix}{entry.name}/")
            elif os.path.splitext(entry.name)[1] in SUFFIXES and entry.is_file():
                yield prefix + entry.name


@functools.cache
def fingerprint(root: Path = PACKAGE_ROOT) -> str:
    """The code fingerprint: SHA-256 (64 hex digits) of each engine file's relative path and
    bytes, in sorted order; computed once per process and root.

    Args:
        root: the package folder to read (a test passes a copy of it).

    Returns:
        The hex digest, manifest.json's ``code_fingerprint``.

    Raises:
        FileNotFoundError: a file or folder of :data:`ENGINE` is missing.
    """
    h = hashlib.sha256()
    files = {rel: root / rel for rel in engine_files(root)}
    files.update(plugin_files())
    for rel, path in sorted(files.items()):
        data = path.read_bytes()
        # path and length first: moving bytes from one file to the next changes the hash
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def plugin_files() -> dict[str, Path]:
    """``plugin:<module>`` -> the source file of each module an installed plug-in's entry point
    names (trader types and mechanisms from other packages), found without importing it: the
    fingerprint stays cheap and the same in every process, whatever it has loaded."""
    out = {}
    for registry in (TRADERS, MECHANISMS):
        for ep in registry.declared():  # the registry's scan, made once per process
            try:
                spec = importlib.util.find_spec(ep.module)
            except (ImportError, ValueError):
                spec = None  # a broken plug-in is named when the registry loads it
            if spec is not None and spec.origin and Path(spec.origin).is_file():
                out[f"plugin:{ep.module}"] = Path(spec.origin)
    return out


def short(value: str | None) -> str:
    """A fingerprint as displayed: its first :data:`SHORT` hex digits (``-`` for None)."""
    return value[:SHORT] if value else "-"

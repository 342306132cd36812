"""Registries of what a researcher adds: trader types and exchange mechanisms.

A registry is found, never listed (design principle "open to the researcher"): its built-in
members are the modules of one package folder (``market_agents/agents/traders/`` for trader types,
``market_agents/market/mechanisms/`` for mechanisms), each of which registers its class with
:meth:`Registry.register` when imported; members from other packages come from Python entry
points of the registry's group (``market_agents.traders``, ``market_agents.mechanisms``):
``[project.entry-points."market_agents.traders"] my_type = "my_pkg.my_type"`` names a module
that registers on import (or a class, which is registered). Nothing is imported before a name
is asked for, and everything only once per process.

This module imports nothing from the package at import time (its folders are imported by
name when a registry is first read), so the config, the engine and the analysis may all ask it.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Iterable, Iterator
from functools import lru_cache
from importlib import metadata
from importlib.metadata import EntryPoint
from typing import Generic, TypeVar

from market_agents.errors import ConfigError

T = TypeVar("T")


def entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The entry points installed packages declare in ``group``. Every group comes from one
    scan of every installed distribution's metadata per process (:func:`_installed`): a scan
    is 5-15 ms, and each `ma` process reads two groups."""
    return tuple(_installed().select(group=group))


@lru_cache(maxsize=1)
def _installed() -> metadata.EntryPoints:
    # importlib's own scan, not a faster copy of its path finder: a copy saved 6 ms a process
    # and had to follow importlib's rules for names, zips, eggs and finders by hand
    return metadata.entry_points()  # every group (SelectableGroups before Python 3.12)


class Registry(Generic[T]):
    """Named classes of one kind, built in or installed.

    Args:
        group: the entry-point group of installed members, e.g. ``market_agents.traders``.
        package: the package whose modules are the built-in members, e.g.
            ``market_agents.agents``.
        what: what a member is called in messages, e.g. ``trader type``.
    """

    def __init__(self, group: str, package: str, what: str):
        self.group, self.package, self.what = group, package, what
        self._members: dict[str, T] = {}
        self._origin: dict[str, str] = {}
        self._loaded = False
        self._declared: tuple[EntryPoint, ...] | None = None

    def register(self, cls: T) -> T:
        """Register ``cls`` under its ``name`` attribute (a class decorator).

        Raises:
            ValueError: another class is registered under that name (two plug-ins clash).
        """
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{cls!r}: a {self.what} needs a non-empty str `name`")
        held = self._members.get(name)
        if held is not None and held is not cls:
            raise ValueError(f"{self.what} {name!r} is registered twice: by "
                             f"{self._origin[name]} and by {cls.__module__}")
        self._members[name] = cls
        self._origin[name] = cls.__module__
        return cls

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True  # first: a module being imported may ask the registry again
        root = importlib.import_module(self.package)
        for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                importlib.import_module(f"{self.package}.{info.name}")
        self._declared = None  # read afresh with the registry
        for ep in self.declared():
            try:
                loaded = ep.load()
            except Exception as exc:  # a broken plug-in is named, not a traceback
                raise ConfigError(f"entry point {ep.name!r} of {self.group} ({ep.value}) does "
                                  f"not load: {type(exc).__name__}: {exc}") from None
            if isinstance(loaded, type):
                self.register(loaded)  # type: ignore[arg-type]

    def declared(self) -> tuple[EntryPoint, ...]:
        """The entry points installed packages declare in this registry's group, by name,
        without loading them; read once per process, with the registry (reading them scans
        every installed distribution's metadata, so the code fingerprint asks here rather
        than scanning again)."""
        if self._declared is None:
            self._declared = tuple(sorted(entry_points(group=self.group), key=lambda e: e.name))
        return self._declared

    def names(self) -> tuple[str, ...]:
        """Every registered name, sorted."""
        self._load()
        return tuple(sorted(self._members))

    def __iter__(self) -> Iterator[T]:
        """The registered classes, in name order."""
        self._load()
        return iter([self._members[n] for n in sorted(self._members)])

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._members

    def get(self, name: str, where: str) -> T:
        """The class registered as ``name``.

        Args:
            name: its name as a config spells it.
            where: the file, key or argument it came from, for the message.

        Raises:
            ConfigError: no such name; the message lists the known ones (and the nearest).
        """
        self._load()
        if name not in self._members:
            raise ConfigError(self.unknown(name, where))
        return self._members[name]

    def unknown(self, name: str, where: str, among: Iterable[str] | None = None) -> str:
        """The one-line message for an unknown ``name`` at ``where`` ("": no prefix, for a
        validator whose error pydantic prefixes with the key), listing ``among`` (default:
        every registered name) as the known ones."""
        self._load()
        known = sorted(self._members if among is None else among)
        near = difflib.get_close_matches(str(name), known, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        return (f"{where + ': ' if where else ''}unknown {self.what} {name!r}{hint} (known: "
                f"{', '.join(known)}; a plug-in registers more through the "
                f"entry-point group {self.group}, docs/extending.md)")

    def modules(self) -> dict[str, str]:
        """Name -> the module that registered it (the code fingerprint hashes plug-ins')."""
        self._load()
        return dict(self._origin)


TRADERS: Registry = Registry("market_agents.traders", "market_agents.agents.traders",
                           "trader type")
"""Trader types by the name configs use (``population.mix``, ``slot_types``, agents.parquet's
``type``): the modules of ``market_agents/agents/traders/`` and the
``market_agents.traders`` entry points."""

MECHANISMS: Registry = Registry("market_agents.mechanisms", "market_agents.market.mechanisms",
                                "mechanism")
"""Exchange mechanisms by name (outcomes' ``mechanisms`` column): the modules of
``market_agents/market/mechanisms/`` and the ``market_agents.mechanisms`` entry points."""

"""The paper's comparison tables, as a design declares them.

``tables:`` names each table (its title, what it compares, its kind), and a cell joins one with
``table: <name>``, compared with the cell its ``compare_with`` names (default ``share_0``),
paired by seed::

    tables:
      ftt: {title: "Transaction tax against its controls"}
    cells:
      - {name: ftt_0, table: ftt, overrides: {...}}                          # against share_0
      - {name: ftt_25, table: ftt, compare_with: share_25, overrides: {...}}

The paper builds one table per declared name (``paper/estimates.comparison``); nothing else
lists the cells of a comparison. These are the design's secondary comparisons: the
pre-registered Holm families stay every cell against share_0 in its tier's family (and E5:
``analysis.estimands.tier_contrasts``), whatever a cell is compared with here, and the
freeze's fingerprint does not record them. New keys are design metadata, not config overrides:
no cell's config (its ``config_hash``) depends on them.

Pure: the declarations are checked against the design's cells (:func:`declared`), which
:func:`market_agents.protocol.design.load_design` calls; this module reads no file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import Field

from market_agents.analysis.estimands import CONTROL
from market_agents.core import Strict
from market_agents.errors import ConfigError
from market_agents.protocol.tiers import label

NAME = r"^[A-Za-z0-9_]+$"  # a table's files are tables/<name>.{csv,md,tex,html}


class TableSpec(Strict):
    """A comparison table as written under a design's ``tables:``."""

    title: str = Field(min_length=1, description="the table's title in the paper")
    caption: str = Field(default="", description="what it compares, in a sentence; the paper "
                         "adds which cells against which, the Holm family and the estimator")
    kind: Literal["paired", "equal_usd"] = Field(
        default="paired", description="paired: each cell against the cell it is compared "
        "with, paired by seed; equal_usd: the equal-USD comparison (§5.2 T5): per agent the "
        "decisions offered, made and budget-halted, USD and valid rate of each cell (an "
        "equal-USD cell) and the cell it is compared with (equal decisions), then the paired "
        "estimate")


@dataclass(frozen=True)
class Comparison:
    """A declared comparison table: its name, title, caption and kind, its pairs (cell, the
    cell it is compared with) in design order, and the tier label and primary outcomes of its
    first cell (its Holm family's outcomes)."""

    name: str
    title: str
    caption: str
    kind: str
    pairs: tuple[tuple[str, str], ...]
    tier: str
    primary: tuple[str, ...]

    @property
    def cells(self) -> list[str]:
        """The cells of the table, in design order."""
        return [c for c, _ in self.pairs]

    @property
    def references(self) -> list[str]:
        """The cells they are compared with, each once, in the order first named."""
        return list(dict.fromkeys(r for _, r in self.pairs))


class _Cell(Protocol):
    name: str
    tier: str | None
    table: str | None
    compare_with: str | None


def declared(tables: Mapping[str, TableSpec], cells: Iterable[_Cell],
             primary: Callable[[str | None], tuple[str, ...]],
             where: str) -> tuple[Comparison, ...]:
    """The design's comparison tables, in the order ``tables:`` declares them.

    Args:
        tables: the design's ``tables:``.
        cells: its cells, each with ``table`` and ``compare_with`` as the file gives them
            (None: not given; a cell of a table is then compared with :data:`CONTROL`).
        primary: a tier -> its primary outcomes (``Design.primary``).
        where: the design file, the prefix of every message.

    Raises:
        ConfigError: a table name that is not a file name, a cell's table not declared, a
            ``compare_with`` without a table, naming no cell of the design or the cell itself.
            The message names the file, the cell and the key.
    """
    for name in tables:
        if not re.match(NAME, name):
            raise ConfigError(f"{where}: tables.{name}: a table name is letters, digits and "
                              "underscores (its files are tables/<name>.csv, ...)")
    cells = list(cells)
    by_name = {c.name: c for c in cells}
    members: dict[str, list[_Cell]] = {t: [] for t in tables}
    for c in cells:
        at = f"{where}: cell {c.name!r}"
        if c.table is None:
            if c.compare_with is not None:
                raise ConfigError(f"{at}: compare_with {c.compare_with!r} without a table (name "
                                  "the comparison table it is compared in: table: <name>)")
            continue
        if c.table not in tables:
            raise ConfigError(f"{at}: table {c.table!r} is not declared under tables: "
                              f"({', '.join(tables) or 'none declared'})")
        ref = c.compare_with or CONTROL
        default = "" if c.compare_with else " (the default)"
        if ref == c.name:
            raise ConfigError(f"{at}: compare_with names the cell itself")
        if ref not in by_name:
            raise ConfigError(f"{at}: compare_with {ref!r}{default} is not a cell of the design "
                              f"({', '.join(by_name)})")
        members[c.table].append(c)
    out = []
    for name, spec in tables.items():
        # a table no cell joins (a design cut down to fewer cells) is the paper's to skip
        tier = members[name][0].tier if members[name] else None
        out.append(Comparison(name, spec.title, spec.caption, spec.kind,
                              tuple((c.name, c.compare_with or CONTROL) for c in members[name]),
                              label(tier), primary(tier)))
    return tuple(out)


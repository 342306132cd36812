"""The designs of a folder, by name, and what the protocol says about them as a whole: which
runs a target needs once the gate has cut seeds, which tiers are live, which names may run
live, which decision library a cell replays, and the one-line plan of a tier.

The workflow (``pipeline/workflow.py``) asks these questions at DAG time; nothing here
simulates, prices a call or scores. Each design is loaded (and validated in full) once.
"""

from __future__ import annotations

from pathlib import Path

from market_agents.errors import ConfigError
from market_agents.layout import ROOT
from market_agents.protocol.design import Design
from market_agents.protocol.gate import cut_runs, missing_keys
from market_agents.protocol.planning import load_checked, plan_design, run_config
from market_agents.protocol.tiers import label, tier_key


class DesignRegistry:
    """``config/designs/<name>.yaml`` by name, loaded once.

    Args:
        designs_dir: the folder of design files (workflow config ``designs_dir``).
        results: the results root the gate's manifests live under (cuts are read from there).
    """

    def __init__(self, designs_dir: str | Path, results: str | Path = ROOT):
        self.designs_dir = Path(designs_dir)
        self.results = Path(results)
        self._designs: dict[str, Design] = {}

    def path(self, name: str) -> Path:
        """The file of design ``name`` (it need not exist)."""
        return self.designs_dir / f"{name}.yaml"

    def names(self) -> list[str]:
        """Every design in the folder, by file name."""
        return sorted(p.stem for p in self.designs_dir.glob("*.yaml"))

    def get(self, name: str) -> Design:
        """The loaded, fully validated design; ConfigError naming the known designs when there is
        no such file, or when the file's ``name`` differs from its file name."""
        if name not in self._designs:
            path = self.path(name)
            if not path.exists():
                raise ConfigError(
                    f"unknown design {name!r}: no {path}. Designs: "
                    f"{', '.join(self.names()) or 'none'}; add the file or fix designs_dir in "
                    "config/workflow.yaml"
                )
            design = load_checked(path)
            if design.name != name:
                raise ConfigError(f"{path}: name {design.name!r} differs from the file name; "
                                  "make them equal (the workflow finds a design's runs by its "
                                  "file name)")
            self._designs[name] = design
        return self._designs[name]

    def tier_of(self, name: str, cell: str) -> str:
        """The tier label of a cell (``tiers.NO_TIER`` in a design without tiers)."""
        return label(self.get(name).cell(cell).tier)

    def _live(self, name: str, cell: str) -> bool:
        design = self.get(name)
        return not design.cells[cell].unavailable and design.is_live(cell)

    def live_tiers(self, name: str) -> list[str]:
        """The tiers with a live cell, in the protocol's order."""
        design = self.get(name)
        return sorted({label(c.tier) for c in design.cells.values() if self._live(name, c.name)},
                      key=tier_key)

    def runs(self, name: str, tier: str | None = None, mock: bool = False,
             max_seeds: int | None = None) -> list[tuple[str, int]]:
        """(cell, seed) of the runs a target needs: the design's plan (first ``max_seeds`` seeds
        of each cell), only ``tier`` when given, less what the gate cut (live runs only: a
        ``mock`` rehearsal runs every seed)."""
        design = self.get(name)
        cuts: dict[str, set[tuple[str, int]]] = {}
        out = []
        for cell, seed in design.runs(max_seeds=max_seeds):
            tier_label = self.tier_of(name, cell)
            if tier is not None and tier_label != tier:
                continue
            if not mock:
                if tier_label not in cuts:
                    cuts[tier_label] = cut_runs(name, tier_label, self.results)
                if (cell, seed) in cuts[tier_label]:
                    continue
            out.append((cell, seed))
        return out

    def live_names(self, names: list[str]) -> tuple[set[str], set[str]]:
        """The designs among ``names`` (those that exist) with a live cell, and their live cells.

        A run directory is keyed by design and cell name, so a cell name live in one of them must
        be live in every one of them that has it: ConfigError otherwise.
        """
        designs: set[str] = set()
        cells: set[str] = set()
        for name in names:
            if not self.path(name).exists():
                continue
            for cell in self.get(name).cells:
                if self._live(name, cell):
                    designs.add(name)
                    cells.add(cell)
        for name in designs:
            design = self.get(name)
            for cell in cells & set(design.cells):
                if not design.cells[cell].unavailable and not design.is_live(cell):
                    raise ConfigError(
                        f"{design.path}: cell {cell!r} is free here but live in another live "
                        "design; give one of them another name (run directories are keyed by "
                        "cell name)"
                    )
        return designs, cells

    def frozen_library(self, name: str, cell: str, mock: bool = False) -> str | None:
        """The decision library a cell replays (``population.llm.frozen_library``), if any; a
        rehearsal (``mock``) replays the one built from rehearsed runs."""
        design = self.get(name)
        if design.cells[cell].unavailable:
            return None
        return run_config(design, cell, mock=mock).population.llm.frozen_library

    def library_files(self, name: str) -> list[str]:
        """The library files the available cells of a design replay."""
        return sorted({p for c in self.get(name).cells if (p := self.frozen_library(name, c))})

    def library_model(self, library: str, names: list[str]) -> str:
        """The model id a library keeps: the one the first design among ``names`` with a cell
        replaying ``library`` names for the library route; ConfigError when none does."""
        for name in names:
            design = self.get(name)
            for cell in design.cells:
                if self.frozen_library(name, cell) == library:
                    return run_config(design, cell).population.llm.model_ids("library")[0]
        raise ConfigError(f"no cell of {names[0]} replays {library}: nothing to build")

    def plan_line(self, name: str, tier: str, tokens_in: int, tokens_out: int) -> str:
        """One line for the dry run: live runs, decisions and USD planned for a design/tier, the
        tier budget, and a warning naming a provider key that is not set (the gate refuses)."""
        design = self.get(name)
        cells = [c for c in design.cells if self.tier_of(name, c) == tier]
        live = [p for p in plan_design(design, tokens_in, tokens_out, cells=cells)
                if not p.unavailable and p.live]
        budget = design.budget.tiers.get(tier)
        line = (
            f"{sum(len(p.seeds) for p in live)} live runs, "
            f"{sum(p.decisions for p in live):,} planned decisions, "
            f"{sum(p.usd for p in live):.2f} USD planned"
            + (f" (tier budget {budget:.2f} USD)" if budget is not None else "")
        )
        missing = missing_keys(design, [p.cell for p in live])
        if missing:  # warn in the dry run already; the gate itself refuses
            line += f"; WARNING: {missing[0][1]}"
        return line

"""The guards every path to a paid call runs before its first call: one implementation, used
by ``ma run``, ``ma cell``, ``ma design``, ``ma bazaar eval`` and the budget gate (so by every
workflow job that can pay).

- **The freeze** (protocol §5.1, §6): a live call of the confirmatory design (a cell of it, or
  ``ma run`` of one of its cells' configs) needs ``freeze.json``, and everything it froze must
  still hold: the frozen files, the design as a whole, the commit, a clean work tree.
  Otherwise it is refused, unless the user passes ``--deviation "reason"``: the deviation is
  appended to ``deviations.jsonl`` and carried into every run manifest it touches.
- **The spend ledger** (``protocol.ledger``): a run's worst case (what it can pay at most:
  its ``usd_cap``, never its planning estimate) plus the project's recorded spend must stay
  within the project cap and, for the pilot design, the pilot cap; refused before any call,
  naming the worst case (and the plan), the ledger total and the cap. ``ma design`` first
  checks all its runs at their plan, then each run again at its worst case as it starts.

A guard belongs to one command: what does not change while the command runs (the freeze file
and its SHA-256, the git revision, the confirmatory design and its facts, a cell's plan and
worst case) is read once and kept; the spend ledger, which the command's own runs add to, is
read again before each run.
"""

from __future__ import annotations

import json
import math
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from market_agents import layout
from market_agents.config import Config, config_hash
from market_agents.core import sha256_file
from market_agents.protocol import deviations, freeze, ledger
from market_agents.protocol.design import Design
from market_agents.protocol.facts import design_facts
from market_agents.protocol.planning import (
    cell_worst_case_usd,
    load_checked,
    plan_cell,
    plan_config,
    run_config,
    worst_case_usd,
)


@dataclass
class Guard:
    """The guards of one command.

    Args:
        root: the results root whose ledger, freeze and deviations log apply (``results``).
        home: the results root of the project the command's config belongs to: a paid call
            whose ``root`` keeps no ledger while ``home`` does is refused
            (:func:`market_agents.protocol.ledger.check`).
        caps: the project cap and the pilot cap with the pilot design's name (USD).
        confirmatory: the confirmatory design's name (the workflow config's ``confirmatory``).
        confirmatory_file: its design file, to recognize ``ma run`` of one of its cells'
            configs (None: only the freeze's record of its cells is used).
        deviation: the reason given with ``--deviation``, if any.
        freeze_path: the freeze file (default ``<root>/manifests/freeze.json``).
    """

    root: Path
    caps: ledger.Caps
    confirmatory: str
    home: Path | None = None
    confirmatory_file: Path | None = None
    deviation: str | None = None
    freeze_path: Path | None = None
    _facts: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    # what the command reads once: the freeze, its sha256, git, the confirmatory design, plans
    _once: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def freeze_file(self) -> Path:
        """The freeze file the guard checks against."""
        return self.freeze_path or layout.freeze_path(root=self.root)

    def _frozen(self) -> dict[str, Any] | None:
        """The freeze's content, or None when there is none (or it cannot be read: the freeze
        check itself then names the problem). Read once per command."""
        if "frozen" not in self._once:
            try:
                self._once["frozen"] = json.loads(self.freeze_file.read_text())
            except (OSError, ValueError):
                self._once["frozen"] = None
        return self._once["frozen"]

    def _loaded_freeze(self) -> tuple[dict[str, Any], str]:
        """The freeze's content (``freeze.load``: FreezeError when it is missing or malformed)
        and its SHA-256, read once per command."""
        if "loaded" not in self._once:
            self._once["loaded"] = (freeze.load(self.freeze_file),
                                    sha256_file(self.freeze_file))
        return self._once["loaded"]

    def _git(self) -> dict[str, Any]:
        """``freeze.git_revision()`` of the project, asked once per command."""
        if "git" not in self._once:
            self._once["git"] = freeze.git_revision()
        return self._once["git"]

    def is_confirmatory(self, design_name: str) -> bool:
        """The workflow's confirmatory design, or the design a freeze names."""
        frozen = self._frozen()
        return design_name == self.confirmatory or bool(frozen and frozen.get("design")
                                                        == design_name)

    # --- the freeze ---------------------------------------------------------------------

    def _design_facts(self, design: Design) -> dict[str, Any]:
        key = str(design.path)
        if key not in self._facts:
            self._facts[key] = design_facts(design)
        return self._facts[key]

    def check_freeze(self, design: Design | None) -> dict[str, Any]:
        """The freeze check of a confirmatory live call (``design`` None: its design file is
        gone). Returns the record for the run manifests (the freeze, the deviation if any);
        raises :class:`freeze.FreezeError` without a freeze, or when something no longer
        matches and no ``--deviation`` was given."""
        frozen, digest = self._loaded_freeze()
        git = self._git()
        if design is None:
            changed = [f"the confirmatory design file {self.confirmatory_file} is missing"]
        else:
            changed = freeze.mismatches(frozen, self._design_facts(design), git)
        if changed and not self.deviation:
            raise freeze.FreezeError(freeze.refusal(str(self.freeze_file), changed))
        rec: dict[str, Any] = {"freeze": {
            "file": str(self.freeze_file),
            "sha256": digest,
            "commit": (frozen.get("git") or {}).get("commit"), "holds": not changed}}
        if self.deviation:
            rec["deviations"] = [deviations.record(
                self.root, self.deviation, changed, frozen.get("design"), git)]
        return rec

    def _deviation_only(self, design: str | None) -> dict[str, Any]:
        if not self.deviation:
            return {}
        return {"deviations": [deviations.record(self.root, self.deviation, [], design,
                                                 self._git())]}

    # --- before paid work ---------------------------------------------------------------

    def design_runs(self, design: Design, runs: list[tuple[str, int]], where: str,
                    worst: bool = True) -> tuple[dict[str, Any], float, float]:
        """Check live runs (cell, seed) of ``design`` before the first call: the freeze for
        the confirmatory design, then the caps.

        Args:
            design: the loaded design.
            runs: the (cell, seed) runs to check; runs of cells that make no paid call are
                free and pass.
            where: the command, for a refusal's message.
            worst: check the caps against the runs' worst case (each run's ``usd_cap``: a
                run about to start); False: against their plan (``ma design``'s look at all
                its runs before the first, each checked again at its worst case as it starts).

        Returns:
            The record for their manifests, their planned USD (planning rate) and their worst
            case USD.

        Raises:
            FreezeError: a confirmatory design without a matching freeze.
            BudgetExceeded: the caps would be passed (one line: amount, ledger total, cap).
        """
        live = sorted({c for c, _ in runs if design.is_live(c)})
        if not live:
            return {}, 0.0, 0.0
        if self.is_confirmatory(design.name):
            rec = self.check_freeze(design)
        else:
            rec = self._deviation_only(design.name)
        per_run = {c: self._cell_usd(design, c) for c in live}
        planned = sum(per_run[c][0] for c, _ in runs if c in per_run)
        worst_usd = sum(per_run[c][1] for c, _ in runs if c in per_run)
        if math.isinf(worst_usd):  # no usd_cap: say so, not "worst case inf USD"
            # why: the client loads the LLM layer (asyncio, ssl), needed only for this message
            from market_agents.llm.client import LLMClient

            for c in live:
                LLMClient.check_settings(run_config(design, c).population.llm)
        self.check_caps(planned, where, design.name, worst_usd if worst else None)
        return rec, planned, worst_usd

    def _cell_usd(self, design: Design, cell: str) -> tuple[float, float]:
        """A live cell's planned USD per run (planning rate) and its worst case per run, once
        per command."""
        key = ("cell_usd", str(design.path), cell)
        if key not in self._once:
            self._once[key] = (plan_cell(design, cell).run_usd, cell_worst_case_usd(design, cell))
        return self._once[key]

    def config_run(self, config: Config, where: str) -> tuple[dict[str, Any], float, float]:
        """Check a live run of a bare config (``ma run``): the freeze when the config is one
        of the confirmatory design's live cells (now, or as frozen), then the caps against
        its worst case (``planning.worst_case_usd``: its ``usd_cap``).

        Returns:
            The record for its manifest, its planned USD and its worst case USD (both 0.0:
            no paid call).

        Raises:
            FreezeError: a confirmatory cell's config without a matching freeze.
            BudgetExceeded: its worst case plus the ledger would pass a cap.
            ConfigError: a live run without a ``usd_cap`` (``LLMClient.check_settings``).
        """
        planned = plan_config(config)
        if planned <= 0:
            return {}, 0.0, 0.0
        worst_usd = worst_case_usd(config)
        if math.isinf(worst_usd):  # no usd_cap: say so, not "worst case inf USD"
            # why: the client loads the LLM layer (asyncio, ssl), needed only for this message
            from market_agents.llm.client import LLMClient

            LLMClient.check_settings(config.population.llm)
        digest = config_hash(config)
        design = self._confirmatory_design()
        frozen = self._frozen() or {}
        frozen_cells = ((frozen.get("fingerprint") or {}).get("cells") or {}).values()
        now_cells = self._design_facts(design)["fingerprint"]["cells"].values() if design else []
        confirmatory = any(c.get("config_hash") == digest
                           for c in [*frozen_cells, *now_cells])
        rec = self.check_freeze(design) if confirmatory else self._deviation_only(None)
        self.check_caps(planned, where, None, worst_usd)
        return rec, planned, worst_usd

    def _confirmatory_design(self) -> Design | None:
        """The confirmatory design (None: no file), loaded and checked once per command."""
        if "confirmatory" not in self._once:
            path = self.confirmatory_file
            self._once["confirmatory"] = (load_checked(path) if path is not None
                                          and path.exists() else None)
        return self._once["confirmatory"]

    def check_caps(self, planned_usd: float, where: str, design: str | None = None,
                   worst_usd: float | None = None) -> ledger.Spend:
        """The caps against the project's ledger (:func:`market_agents.protocol.ledger.check`
        with this guard's results root and project home)."""
        return ledger.check(self.caps, planned_usd, where, design, self.root, worst_usd,
                            home=self.home)

    def paying(self, out: Path | str, planned_usd: float, kind: str = "run",
               design: str | None = None, worst_usd: float | None = None,
               cache: Path | str | None = None, in_flight: int | None = None
               ) -> AbstractContextManager[dict[str, Any]]:
        """The job's spend record in the ledger (``ledger.paying``): counted at ``worst_usd``
        (else ``planned_usd``) until it settles; ``cache`` and ``in_flight`` are what
        ``ma spend settle`` needs if it never does."""
        return ledger.paying(self.root, out, planned_usd, kind, design, worst_usd, cache,
                             in_flight)

"""What the Snakemake rules ask, as one-line calls: the files a target needs, the input
functions and parameters of each rule, and the command the rules run.

``rules/common.smk`` builds one :class:`Workflow` from the Snakemake ``config``; every rule
names its inputs, outputs and parameters through it, so the rules stay declarations and the
logic here (and in ``protocol/registry.py``) is unit-tested without Snakemake. Input functions
take Snakemake's ``wildcards`` (anything with the wildcard names as attributes).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import MutableMapping
from functools import cached_property
from pathlib import Path
from typing import Any

from market_agents import layout, provider_kinds
from market_agents.bazaar.tiers import TIERS as BAZAAR_TIERS
from market_agents.config import config_hash
from market_agents.errors import ConfigError
from market_agents.pipeline.workflow_config import WorkflowConfig, validate_workflow_config
from market_agents.protocol.batches import Batch, batch_key, broken_batch_record, plan_batches
from market_agents.protocol.planning import run_config
from market_agents.protocol.registry import DesignRegistry
from market_agents.protocol.tiers import TIERS, label, rehearsal_target, target, tier_key
from market_agents.sim.rundir import (
    OUTCOMES_FILE,
    RUN_FILES,
    StaleRun,
    is_complete,
    paid_by_other_code,
    read_manifest,
)

# The protocol's stages as `make dag` draws them (targets of rules/targets.smk): up to the
# freeze, then after it (pipeline/dagrender.merge_stages).
DAG_BEFORE_FREEZE = "exploratory sigma pilot freeze"
DAG_AFTER_FREEZE = "confirmatory sensitivity"
TARGETS = (f"all, exploratory, sigma, pilot, freeze, {target(TIERS[0])} … {target(TIERS[-1])}, "
           "confirmatory, sensitivity, repilot, rehearse_pilot, rehearse_freeze, "
           f"{rehearsal_target(TIERS[0])} … {rehearsal_target(TIERS[-1])}, "
           "rehearse_confirmatory, rehearse_repilot, protocol, dag")


class Workflow:
    """The workflow of one Snakemake invocation.

    Args:
        config: Snakemake's ``config`` dict (``config/workflow.yaml`` plus ``--config``);
            validated here, ConfigError naming every bad key.
    """

    def __init__(self, config: dict[str, Any] | None):
        self.config: WorkflowConfig = validate_workflow_config(config or {})
        self.designs = DesignRegistry(self.config.designs_dir)
        # The rules run `ma` and `snakemake` of the interpreter Snakemake runs in, activated or
        # not, without touching PATH.
        python = shlex.quote(sys.executable)
        self.ma = f"{python} -m market_agents.cli"
        self.snakemake = f"{python} -m snakemake"
        self._batch_plans: dict[tuple[str, bool], dict[str, Batch]] = {}  # one plan a DAG

    dag_before_freeze = DAG_BEFORE_FREEZE
    dag_after_freeze = DAG_AFTER_FREEZE

    def export_serving_switches(self, environ: MutableMapping[str, str] | None = None) -> None:
        """Put this invocation's serving switches (``--config replay=true``,
        ``new_cache=true``) into the environment every ``ma`` job inherits (``environ``,
        default ``os.environ``): not rule parameters, so toggling them re-runs no job."""
        (os.environ if environ is None else environ).update(self.config.serving_env())

    # --- files of a design ------------------------------------------------------------------

    def design_file(self, name: str) -> str:
        """``config/designs/<name>.yaml`` (the workflow config's designs_dir)."""
        return str(self.config.design_path(name))

    def outcome_files(self, design: str, tier: str | None = None, mock: bool = False) -> list[str]:
        """The files that say every run a target of the design (or one tier of it) needs is
        scored: a live run's outcomes.json; for free and rehearsed (``mock``) runs, the record
        runs_<first>-<last>_<key>.json of each batch of up to ``runs_per_job`` runs, cells x
        seeds (made by one process, rule ``simulate``)."""
        return self._scored(design, self.designs.runs(design, tier, mock, self.config.max_seeds),
                            mock)

    def _scored(self, design: str, runs: list[tuple[str, int]], mock: bool) -> list[str]:
        files: dict[str, None] = {}  # ordered, each batch once
        batches: dict[str, Batch] | None = None
        for cell, seed in runs:
            if not mock and self.is_live_run(design, cell):
                files[str(layout.run_dir(design, cell, seed) / OUTCOMES_FILE)] = None
            else:
                batches = self._batches(design, mock) if batches is None else batches
                files[next(p for p, (cells, seeds) in batches.items()
                           if cell in cells and seed in seeds)] = None
        return list(files)

    def _batches(self, design: str, mock: bool = False) -> dict[str, Batch]:
        """The free runs of a design the workflow makes, or every run of its rehearsal
        (``mock``: live cells served by the mock, paid for nothing), by record path: the runs
        (the first ``max_seeds`` seeds of each cell when set) in batches of up to
        ``runs_per_job`` (``batches.plan_batches``), each tier's apart, the cells that replay
        a frozen library apart and the equal-USD cells (which wait for the freeze) apart; the
        record's name carries the cells' config hashes and the code fingerprint
        (``batches.batch_key``), so a changed cell or engine asks for new ones.

        Raises:
            ConfigError: a paid cell in a design without live roles (its runs would be free
                runs, unguarded).
        """
        if (design, mock) in self._batch_plans:  # asked by every simulate job's input, params
            return self._batch_plans[design, mock]
        spec = self.designs.get(design)
        seeds: dict[str, list[int]] = {}
        for cell, seed in self.designs.runs(design, mock=mock, max_seeds=self.config.max_seeds):
            if not mock and self.is_live_run(design, cell):
                continue
            if cell not in seeds and not mock and spec.is_live(cell):
                raise ConfigError(f"{self.design_file(design)}: {cell} is a live cell of "
                                  f"{design}, which the workflow runs free; a paid cell runs "
                                  "one job a run, behind the budget gate, only in a live design")
            seeds.setdefault(cell, []).append(seed)
        hashes = {cell: config_hash(run_config(spec, cell, mock)) for cell in seeds}
        # A batch's cells are of one tier, replay the same frozen library or none, and read the
        # freeze's equal-USD cap or not: a tier's target (and its spend's reconciliation) needs
        # its batches only, so another tier's cell changed re-makes nothing of it, and no run
        # waits for a library or a freeze it does not read.
        parts: dict[tuple[str | None, str | None, bool], dict[str, list[int]]] = {}
        for cell, cell_seeds in seeds.items():
            apart = (spec.cells[cell].tier, self.designs.frozen_library(design, cell, mock),
                     spec.cells[cell].equal_usd_of is not None)
            parts.setdefault(apart, {})[cell] = cell_seeds
        self._batch_plans[design, mock] = {
            str(layout.batch_record_path(design, chunk, batch_key({c: hashes[c] for c in cells}),
                                         mock)): (cells, chunk)
            for part in parts.values()
            for cells, chunk in plan_batches(part, self.config.runs_per_job)}
        return self._batch_plans[design, mock]

    def vet_batch_records(self, root: Path | str = layout.ROOT) -> list[str]:
        """Drop every batch record of free or rehearsed runs whose runs are no longer all there
        (``batches.broken_batch_record``), saying so on stderr, and remove the design's gathered
        parquet files, which report those runs as they were (derived files, gathered again at
        no cost): Snakemake then gathers again, which needs the batch again (``ma cell`` keeps
        the runs that are finished), instead of "Nothing to be done" over a deleted run.
        Snakemake makes a missing file only for a job that must run, and judges a gather's
        age by its own records, not by the file's time, so the gathered file must go. Called
        once as the Snakefile is read, before Snakemake looks at any file (it caches what
        exists while it builds the DAG).

        Args:
            root: the results folder (default ``results``).

        Returns:
            The runs (or unreadable records) that voided a record, one per record dropped.
        """
        gone = []
        records = (record for kind in layout.KINDS  # every design's folder, and rehearsal's
                   for record in sorted(layout.runs_dir(root=root, kind=kind)
                                        .glob(f"*/{layout.RUNS_GLOB}")))
        for record in records:
            run = broken_batch_record(record)
            if run is None:
                continue
            print(f"market_agents: {run} is gone or changed since {record} vouched for it: "
                  "its batch is made again", file=sys.stderr)
            gone.append(run)
            # the gathered files first: if this stops half-way, the record still voids them
            for gathered in record.parent.glob(layout.OUTCOMES_PARQUETS):
                gathered.unlink(missing_ok=True)
            # an outcomes.json other than the one vouched for is scored again from the run's
            # ticks (``ma cell`` keeps a finished run's outcomes.json as it finds it)
            if Path(run).is_dir():
                (Path(run) / OUTCOMES_FILE).unlink(missing_ok=True)
            record.unlink(missing_ok=True)
        return gone

    def gathered(self, design: str, mock: bool = False, tier: str | None = None,
                 kind: str | None = None) -> str:
        """The design's outcomes.parquet (``ma gather``), or one tier's with the control's;
        with ``"{design}"`` (and ``kind="{kind}"``, ``tier="{tier}"``) a rule pattern."""
        return str(layout.outcomes_path(design, mock, tier=tier, kind=kind))

    def control_sd_file(self, design: str) -> str:
        """The design's control SD of every outcome (``ma sigma``; the free σ estimates)."""
        return str(layout.control_sd_path(design))

    def manifest(self, name: str, mock: bool = False) -> str:
        """A protocol manifest (``pilot``, ``repilot``, ``freeze``): ``layout.manifest_path``,
        the rehearsal's own for ``mock``."""
        return str(layout.manifest_path(name, mock))

    def sensitivity_file(self, design: str) -> str:
        """The design's sensitivity.parquet (``ma sensitivity``)."""
        return str(layout.sensitivity_path(design))

    def gate_manifest(self, design: str, tier: str) -> str:
        """The budget manifest of a design/tier; with ``"{design}", "{tier}"`` a rule pattern."""
        return str(layout.budget_manifest(design, tier))

    def spent(self, design: str, tier: str) -> str:
        """The reconciled spend of a design/tier; with wildcards a rule pattern."""
        return str(layout.budget_spent(design, tier))

    def library(self, name: str, mock: bool = False) -> str:
        """A frozen decision library (``ma library --out``); with ``"{library}"`` a rule
        pattern; the rehearsal's own for ``mock``."""
        return str(layout.library_path(name, mock))

    @staticmethod
    def log(*parts: str) -> str:
        """A job's log, ``layout.log_path(*parts)`` (with wildcards a rule pattern)."""
        return str(layout.log_path(*parts))

    @staticmethod
    def dag_file(name: str) -> str:
        """A file of the protocol's DAG figure (``protocol.svg``, ...)."""
        return str(layout.dag_dir() / name)

    def tier_target(self, design: str, tier: str) -> list[str]:
        """A tier is done when its runs are scored and gathered with the control's and, if it
        is live, its spend reconciled."""
        files = [*self.outcome_files(design, tier), self.gathered(design, tier=tier)]
        if tier in self.designs.live_tiers(design):
            files.append(self.spent(design, tier))
        return files

    def rehearsal_tier_target(self, design: str, tier: str) -> list[str]:
        """The rehearsal of a tier: its runs on the mock, gathered with the control's."""
        return [*self.outcome_files(design, tier, mock=True),
                self.gathered(design, mock=True, tier=tier)]

    def all_spent(self, design: str) -> list[str]:
        """The reconciled spend of every live tier of a design."""
        return [self.spent(design, t) for t in self.designs.live_tiers(design)]

    def run_outputs(self, kind: str) -> dict[str, str]:
        """The files ``ma cell --score`` writes into a run directory of ``kind`` (runs,
        rehearsal, or the wildcard ``{kind}``), keyed by name without extension (``manifest``,
        ``ticks``, ``outcomes``): the run's files and its outcomes.json."""
        prefix = layout.run_pattern(kind)
        return {f.split(".")[0]: f"{prefix}/{f}" for f in (*RUN_FILES, OUTCOMES_FILE)}

    @property
    def batch_record(self) -> str:
        """The output pattern of a batch of free or rehearsed runs (rule ``simulate``), with the
        wildcards ``kind`` (runs or rehearsal), ``design``, ``first`` and ``last`` (its first
        and last seed) and ``chash`` (its ``batches.batch_key``, 12 hex digits)."""
        return layout.batch_record_pattern()

    # --- live designs and cells -----------------------------------------------------------

    def extra_live_designs(self) -> list[str]:
        """Designs of the folder beyond the protocol's four (the test designs' live ones)."""
        c = self.config
        named = (c.exploratory, c.sigma, c.pilot, c.confirmatory, c.repilot)
        return [n for n in self.designs.names() if n not in named]

    @cached_property
    def _live(self) -> tuple[set[str], set[str]]:
        c = self.config
        return self.designs.live_names([c.pilot, c.confirmatory, c.repilot,
                                        *self.extra_live_designs()])

    def is_live_run(self, design: str, cell: str) -> bool:
        """Whether the runs of ``design``/``cell`` are made by rule ``simulate_live`` (one job
        per run, behind the budget gate): the same sets as its wildcard constraints."""
        designs, cells = self._live
        return design in designs and cell in cells

    @property
    def live_designs(self) -> str:
        """Wildcard constraint: the designs with live runs (the only ones simulate_live makes)."""
        return _alternatives(self._live[0])

    @property
    def live_cells(self) -> str:
        """Wildcard constraint: the cells that run live in some live design."""
        return _alternatives(self._live[1])

    # --- input functions (wildcards) ------------------------------------------------------

    def design_yaml(self, wildcards: Any) -> str:
        """The design file; an unknown design fails here, at DAG time, naming the known ones."""
        self.designs.get(wildcards.design)
        return self.design_file(wildcards.design)

    def live_gate(self, wildcards: Any) -> str:
        """The budget manifest a live run waits for: its design and its cell's tier.

        Raises:
            StaleRun: the run exists, paid, and was made by other code than today's
                (``rundir.paid_by_other_code``): the target stops while Snakemake builds its
                DAG, before any job runs, so nothing is paid and the paid run is never made
                again silently."""
        path = layout.run_dir(wildcards.design, wildcards.cell, int(wildcards.seed))
        if is_complete(path):
            stop = paid_by_other_code(path, read_manifest(path))
            if stop is not None:
                raise StaleRun(stop)
        return self.gate_manifest(wildcards.design,
                                  self.designs.tier_of(wildcards.design, wildcards.cell))

    def earlier_spent(self, wildcards: Any) -> list[str]:
        """Tiers run in order: the gate of a tier waits for the reconciled spend of the earlier
        live tiers of the design and, after T1, for the decision library built from T1."""
        mine = tier_key(wildcards.tier)
        files = [self.spent(wildcards.design, t) for t in self.designs.live_tiers(wildcards.design)
                 if tier_key(t) < mine]
        if wildcards.design == self.config.confirmatory and mine > tier_key("T1"):
            files += self.designs.library_files(wildcards.design)
        if wildcards.design == self.config.repilot:  # §4: the mock re-run comes first
            files.append(self.manifest("repilot", mock=True))
        return files

    def library_input(self, wildcards: Any) -> list[str]:
        """The frozen libraries the cells of a batch replay, needed first: the live one, built
        from live T1 runs, for free runs; the rehearsed one for a rehearsal, which must never
        start live work."""
        mock = wildcards.kind == layout.REHEARSAL
        paths = (self.designs.frozen_library(wildcards.design, cell, mock)
                 for cell in self._batch(wildcards)[0])
        return sorted({p for p in paths if p})

    def freeze_input(self, wildcards: Any) -> list[str]:
        """A rehearsed equal-USD cell reads its usd_cap from the rehearsal's freeze (made from
        the rehearsed pilot), so its batch waits for it. Live equal-USD cells read the live
        freeze, which the gate requires and no live run ever builds."""
        if wildcards.kind == layout.REHEARSAL and any(
                self.designs.get(wildcards.design).cell(c).equal_usd_of
                for c in self._batch(wildcards)[0]):
            return [self.manifest("freeze", mock=True)]
        return []

    def tier_outcomes(self, wildcards: Any) -> list[str]:
        """outcomes.json of the runs of ``wildcards.tier`` and of the control cell (runs or
        rehearsal, by ``wildcards.kind``): what a tier's gathered file holds."""
        mock = wildcards.kind == layout.REHEARSAL
        control = self.config.control
        tier = self.outcome_files(wildcards.design, wildcards.tier, mock)
        design = self.designs.get(wildcards.design)
        if control in design.cells and label(design.cells[control].tier) != wildcards.tier:
            runs = self.designs.runs(wildcards.design, label(design.cells[control].tier), mock,
                                     self.config.max_seeds)
            tier += self._scored(wildcards.design, [(c, s) for c, s in runs if c == control],
                                 mock)
        return tier

    def library_model(self, wildcards: Any) -> str:
        """The model id a library keeps: the one its replaying cells name for the library."""
        target = self.library(wildcards.library)
        return self.designs.library_model(
            target, [self.config.confirmatory, *self.extra_live_designs()])

    def gate_plan(self, wildcards: Any) -> str:
        """The dry run's line for a gate: live runs, decisions and USD planned, and for the
        confirmatory design whether its freeze exists yet (the gate refuses every live run
        without one, so a dry run that only counted USD hid the first thing the real run
        hits)."""
        line = self.designs.plan_line(wildcards.design, wildcards.tier, self.config.tokens_in,
                                      self.config.tokens_out)
        frozen = layout.freeze_path()
        if wildcards.design == self.config.confirmatory and not frozen.exists():
            line += (f"; {frozen} does not exist yet: the gate refuses these runs until "
                     "the pilot is reviewed and the freeze made (.venv/bin/snakemake freeze)")
        return line

    def gather_sources(self, wildcards: Any) -> list[str]:
        """The files a free design's configs are built from (design, base config, price table),
        as inputs of its gather: an edited design is noticed by modification time too, without
        .snakemake's records of the old params, and re-asks for its free runs' records (whose
        names carry each cell's config_hash). A design with live runs gets none: its gather must
        not re-run, and its runs are checked against the design when gathered."""
        if wildcards.kind != layout.RUNS or wildcards.design in self._live[0]:
            return []
        return [str(p) for p in self.designs.get(wildcards.design).sources]

    def tier_runs_outcomes(self, wildcards: Any) -> list[str]:
        """The files saying the runs of one design/tier are scored (the reconciliation's
        input)."""
        return self.outcome_files(wildcards.design, wildcards.tier)

    def design_outcomes(self, wildcards: Any) -> list[str]:
        """outcomes.json of every run of a design, live (kind runs) or rehearsed."""
        return self.outcome_files(wildcards.design, mock=wildcards.kind == layout.REHEARSAL)

    def cache(self, design: str, mock: bool = False) -> str:
        """The design's LLM response cache; rehearsals (``mock``) keep their own, so mock
        answers never reach a live run."""
        return str(layout.cache_path(design, mock))

    def cache_file(self, wildcards: Any) -> str:
        """The design's LLM response cache."""
        return self.cache(wildcards.design)

    def batch_serving(self, wildcards: Any) -> str:
        """How a batch's runs are served: a rehearsal by the mock, with the rehearsal's own
        cache (the rehearsed library is built from it); free runs use no cache, as in
        ``ma design``, so no outcome depends on the order in which jobs ran."""
        if wildcards.kind != layout.REHEARSAL:
            return ""
        return f"--mock --cache {shlex.quote(self.cache(wildcards.design, mock=True))}"

    def _batch(self, wildcards: Any) -> Batch:
        """The batch a ``simulate`` job makes, by its record's wildcards."""
        design, kind = wildcards.design, wildcards.kind
        asked = self.batch_record.format(kind=kind, design=design, first=wildcards.first,
                                         last=wildcards.last, chash=wildcards.chash)
        batches = self._batches(design, kind == layout.REHEARSAL)
        if asked not in batches:
            what = "rehearsed" if kind == layout.REHEARSAL else "free"
            raise ConfigError(f"{asked}: not a batch of {what} runs of {design} now "
                              f"(runs_per_job {self.config.runs_per_job}): "
                              f"{', '.join(Path(p).name for p in batches) or 'none'}")
        return batches[asked]

    def batch_cells(self, wildcards: Any) -> str:
        """The cells of one batch of free or rehearsed runs (rule ``simulate``), named by its
        record."""
        return " ".join(self._batch(wildcards)[0])

    def batch_seeds(self, wildcards: Any) -> str:
        """The seeds each cell of one batch of free or rehearsed runs runs (``--seed`` of rule
        ``simulate``)."""
        return " ".join(map(str, self._batch(wildcards)[1]))

    def gather_flags(self, wildcards: Any) -> str:
        """--mock for rehearsals; --allow-missing when max_seeds runs only part of each cell."""
        flags = ["--mock"] if wildcards.kind == layout.REHEARSAL else []
        return " ".join(flags + (["--allow-missing"] if self.config.max_seeds else []))

    def partial_flag(self, wildcards: Any) -> str:
        """--allow-missing when max_seeds runs only part of each cell."""
        return "--allow-missing" if self.config.max_seeds else ""

    def freeze_flag(self, wildcards: Any) -> str:
        """Confirmatory live runs need a valid freeze; the gate and every live job check it."""
        if wildcards.design == self.config.confirmatory:
            return f"--freeze {layout.freeze_path()}"
        return ""

    def pilot_cap_flag(self, wildcards: Any) -> str:
        """The pilot cap, for the pilot design's gate only; the re-pilot's own cap (§4) for the
        re-pilot, which also runs only after a failed pilot."""
        if wildcards.design == self.config.pilot:
            return f"--pilot-cap {self.config.pilot_cap_usd}"
        if wildcards.design == self.config.repilot:
            return (f"--pilot-cap {self.config.repilot_cap_usd} "
                    f"--after-failed-pilot {self.manifest('pilot')}")
        return ""

    def unknown_target(self, wildcards: Any) -> list[str]:
        """The input of the catch-all rule: a ConfigError naming the targets."""
        raise ConfigError(
            f"unknown target {wildcards.name!r}. Targets: {TARGETS}; or a file such as "
            f"{layout.outcomes_path('<design>')} (docs/workflow.md)"
        )

    # --- the paper -------------------------------------------------------------------------

    @property
    def paper_target(self) -> str:
        """The design `.venv/bin/snakemake paper` writes (workflow config ``paper``; default the
        confirmatory design), or ``rehearse_<design>``."""
        return self.config.paper or self.config.confirmatory

    def paper_inputs(self, wildcards: Any) -> list[str]:
        """What the paper needs built first, free work only: the design's outcomes when no cell
        of it is paid (or for its rehearsal), the sigma design, and for a rehearsal the
        rehearsed pilot. A live design's results are read as they are (the paper never starts
        a paid run; `ma paper` names what is missing)."""
        # why: the paper's modules (polars, matplotlib, Markdown) load only when the paper is
        # asked for, not in every Snakemake invocation
        from market_agents.paper.inputs import parse_target

        name, rehearsal = parse_target(self.paper_target)
        files = [self.design_file(name), self.gathered(self.config.sigma, mock=rehearsal)]
        if rehearsal or not self.designs.live_tiers(name):
            files.append(self.gathered(name, mock=rehearsal))
        if rehearsal and self.config.pilot in self.designs.names():
            files.append(self.gathered(self.config.pilot, mock=True))
        return files

    def paper_flags(self, wildcards: Any) -> str:
        """`ma paper` options from the workflow config: the designs folder and the roles."""
        c = self.config
        return (f"--designs-dir {shlex.quote(c.designs_dir)} --confirmatory {c.confirmatory} "
                f"--sigma {c.sigma} --pilot {c.pilot}")

    def paper_captions(self, wildcards: Any) -> dict[str, str]:
        """The Snakemake report's caption of every table and figure (``table/<name>``,
        ``figure/<name>``; price figures share one), as reStructuredText-safe plain text: the
        paper's own caption, with its mock-based mark."""
        # why: the paper's modules (polars, matplotlib, Markdown) load only when the paper is
        # asked for, not in every Snakemake invocation
        from market_agents.paper.catalog import artifacts
        from market_agents.paper.files import Paper
        from market_agents.paper.inputs import mock_note, parse_target

        name, rehearsal = parse_target(self.paper_target)
        design = self.designs.get(name)
        paper = Paper(design=name, heading="", mock_note=mock_note(design, rehearsal))
        return {f"{a.kind}/{a.name}": _rst_text(f"{paper.title(a)}. "
                                                f"{paper.caption(a, alone=True)}")
                for a in artifacts(design.comparisons, str(design.path))}

    # --- Bazaar ---------------------------------------------------------------------------

    @property
    def bazaar_tiers(self) -> list[str]:
        """Every Bazaar tier, sorted."""
        return sorted(BAZAAR_TIERS)

    @property
    def bazaar_providers(self) -> str:
        """The ``bazaar_eval`` rule's ``provider`` wildcard: every kind a provider class serves
        (``provider_kinds.served``), as a regular expression."""
        return "|".join(provider_kinds.served())

    @staticmethod
    def bazaar_file(*parts: str) -> str:
        """A file (or folder) under Bazaar's results, ``layout.bazaar_dir() / parts``; with
        wildcards a rule pattern."""
        return str(layout.bazaar_dir().joinpath(*parts))

    def bazaar_eval_dir(self, wildcards: Any) -> str:
        """The output folder of one Bazaar evaluation."""
        return str(layout.bazaar_eval_dir(wildcards.provider, wildcards.model,
                                          wildcards.bz_tier))

    def bazaar_cache(self, wildcards: Any) -> str:
        """One response cache per Bazaar provider."""
        return str(layout.bazaar_cache(wildcards.provider))

    def bazaar_usd_cap(self, wildcards: Any) -> str:
        """Live evaluations need a USD cap: the workflow config's bazaar_usd_cap."""
        free = provider_kinds.get(wildcards.provider).free
        return "" if free else f"--usd-cap {self.config.bazaar_usd_cap}"

    def bazaar_api(self, wildcards: Any) -> int:
        """A live evaluation takes the api resource (live calls are serialized)."""
        return 0 if provider_kinds.get(wildcards.provider).free else 1


def _rst_text(text: str) -> str:
    """Plain text that reStructuredText shows as written (no markup characters)."""
    for ch in ("\\", "*", "`", "|", "_", "["):
        text = text.replace(ch, "\\" + ch)
    return text


def _alternatives(names: set[str]) -> str:
    """A regex matching exactly ``names``; one that matches nothing when empty."""
    return "|".join(sorted(names)) or "(?!)"


def plain_params() -> None:
    """Let Snakemake store a job's params without pandas; called once from
    ``rules/common.smk``.

    Snakemake records each job's params (to re-run a job whose params changed) and serializes
    them through pandas whenever pandas is installed, which verifiers (the ``bazaar`` extra)
    brings: every invocation that checks or records a job imports pandas, 0.35-0.5 CPU s
    (bench/README.md, "Fewer CPU seconds per process"). No param of this workflow is a pandas
    object, and for any other value the pandas serializer returns the plain one's ``repr``; so
    the params Snakemake stores, and what they re-run, are the same. A Snakemake whose
    persistence has another shape is left as it is.
    """
    from snakemake import persistence  # why: only a Snakefile calls this, in Snakemake

    base = getattr(persistence, "PersistenceBase", None)  # Snakemake 9
    if (base is not None and isinstance(base.__dict__.get("_serialize_param"), property)
            and callable(getattr(base, "_serialize_param_builtin", None))):
        base._serialize_param = property(lambda self: self._serialize_param_builtin)

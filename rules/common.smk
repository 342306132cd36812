# Input functions and the design registry: the only Python in the rules. Everything here reads
# design files and manifests; nothing simulates, prices or scores.

import json
import os
import sys
from pathlib import Path

from market_agents.protocol.planning import plan_design
from market_agents.protocol.design import load_design, run_dir, cache_path, design_dir
from market_agents.errors import ConfigError
from market_agents.protocol.gate import check_keys

# Rules call `ma` from the environment snakemake runs in, activated or not.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

TIERS = ("T1", "T2", "T3", "T4", "T5", "T6")
NO_TIER = "all"  # gate label of the cells of a design without tiers (pilot, tests)
_DESIGNS = {}


def design(name):
    """The loaded (and fully validated) design ``config/designs/<name>.yaml``."""
    if name not in _DESIGNS:
        path = WF.design_path(name)
        if not path.exists():
            known = sorted(p.stem for p in Path(WF.designs_dir).glob("*.yaml"))
            raise ConfigError(
                f"unknown design {name!r}: no {path}. Designs: {', '.join(known) or 'none'}; "
                f"add the file or fix designs_dir in config/workflow.yaml"
            )
        d = load_design(path)
        if d.name != name:
            raise ConfigError(f"{path}: name {d.name!r} differs from the file name; make them "
                              "equal (the workflow finds a design's runs by its file name)")
        _DESIGNS[name] = d
    return _DESIGNS[name]


def design_file(name):
    return str(WF.design_path(name))


def tier_label(d, cell):
    return d.cell(cell).tier or NO_TIER


def gate_path(design_name, tier):
    return f"results/manifests/budget/{design_name}_{tier}.json"


def spent_path(design_name, tier):
    return f"results/manifests/budget/{design_name}_{tier}_spent.json"


def _cut(design_name, tier):
    """Seeds the budget gate cut (order of sacrifice), once it has run for this tier."""
    path = Path(gate_path(design_name, tier))
    if not path.exists():
        return set()
    return {(c["cell"], c["seed"]) for c in json.loads(path.read_text()).get("cut", [])}


def runs(design_name, tier=None, mock=False):
    """(cell, seed) of the runs a target needs: the design's plan, less the gate's cuts."""
    d = design(design_name)
    out = []
    for cell, seed in d.runs(max_seeds=WF.max_seeds):
        label = tier_label(d, cell)
        if tier is not None and label != tier:
            continue
        if not mock and (cell, seed) in _cut(design_name, label):
            continue
        out.append((cell, seed))
    return out


def outcome_files(design_name, tier=None, mock=False):
    return [
        str(run_dir(design_name, cell, seed, mock) / "outcomes.json")
        for cell, seed in runs(design_name, tier, mock)
    ]


def gathered(design_name, mock=False):
    return str(design_dir(design_name, mock) / "outcomes.parquet")


def sensitivity_file(design_name):
    return str(design_dir(design_name) / "sensitivity.parquet")


def live_tiers(design_name):
    d = design(design_name)
    return sorted({tier_label(d, c) for c in d.cells if not d.cells[c].unavailable
                   and d.is_live(c)}, key=_tier_key)


def _tier_key(tier):
    return TIERS.index(tier) if tier in TIERS else len(TIERS)


def tier_target(design_name, tier):
    """A tier is done when its runs are scored and its spend is reconciled."""
    files = outcome_files(design_name, tier)
    if tier in live_tiers(design_name):
        files.append(spent_path(design_name, tier))
    return files


# --- input functions of the rules -------------------------------------------------------------

RUN_FILES = ("config.yaml", "manifest.json", "ticks.parquet", "trades.parquet",
             "orders.parquet", "agents.parquet", "llm_decisions.parquet")


def run_outputs(prefix):
    """The files `ma cell` writes into a run directory, named for `output:`."""
    return {f.split(".")[0]: f"{prefix}/{{design}}/{{cell}}/seed{{seed}}/{f}" for f in RUN_FILES}


def live_regex():
    """Designs and cells that have live runs: the only paths `simulate_live` may produce."""
    names = [WF.pilot, WF.confirmatory, *extra_live_designs()]
    designs, cells = set(), set()
    for name in names:
        if not WF.design_path(name).exists():
            continue
        d = design(name)
        for c in d.cells:
            if not d.cells[c].unavailable and d.is_live(c):
                designs.add(name)
                cells.add(c)
    for name in designs:  # a name live in one live design must be live in every live design
        d = design(name)
        for c in cells & set(d.cells):
            if not d.cells[c].unavailable and not d.is_live(c):
                raise ConfigError(
                    f"{d.path}: cell {c!r} is free here but live in another live design; "
                    "give one of them another name (run directories are keyed by cell name)"
                )
    alt = lambda xs: "|".join(sorted(xs)) or "(?!)"
    return alt(designs), alt(cells)


def extra_live_designs():
    return [p.stem for p in Path(WF.designs_dir).glob("*.yaml")
            if p.stem not in (WF.exploratory, WF.sigma, WF.pilot, WF.confirmatory)]


def live_gate(wildcards):
    d = design(wildcards.design)
    return gate_path(wildcards.design, tier_label(d, wildcards.cell))


def earlier_spent(wildcards):
    """Tiers run in order: the gate of a tier waits for the reconciled spend of the earlier
    live tiers of the design and, after T1, for the decision library built from T1."""
    tiers = live_tiers(wildcards.design)
    mine = _tier_key(wildcards.tier)
    files = [spent_path(wildcards.design, t) for t in tiers if _tier_key(t) < mine]
    if wildcards.design == WF.confirmatory and mine > _tier_key("T1"):
        files += library_files(wildcards.design)
    return files


def _frozen_library(design_name, cell, mock=False):
    d = design(design_name)
    if d.cells[cell].unavailable:
        return None
    return d.cell_config(cell, mock=mock).population.llm.frozen_library


def library_files(design_name):
    """The library files the available cells of a design replay."""
    d = design(design_name)
    return sorted({p for c in d.cells if (p := _frozen_library(design_name, c))})


def library_input(wildcards):
    """A cell that replays a frozen library needs the file first (live results only: the
    library is built from live T1 runs, and a rehearsal must never start live work)."""
    path = _frozen_library(wildcards.design, wildcards.cell)
    return [path] if path else []


def rehearsal_library_input(wildcards):
    """A rehearsed cell that replays a library needs the one built from rehearsed T1 runs."""
    path = _frozen_library(wildcards.design, wildcards.cell, mock=True)
    return [path] if path else []


def library_model(wildcards):
    """The model id a library keeps: the one its replaying cells name for the library route."""
    target = f"results/library/{wildcards.library}.npz"
    for name in (WF.confirmatory, *extra_live_designs()):
        d = design(name)
        for c in d.cells:
            if _frozen_library(name, c) == target:
                llm = d.cell_config(c).population.llm
                return llm.model_ids("library")[0]
    raise ConfigError(f"no cell of {WF.confirmatory} replays {target}: nothing to build")


def gate_plan(wildcards):
    """One line for the dry run: live runs, decisions and USD planned for a design/tier."""
    d = design(wildcards.design)
    cells = [c for c in d.cells if tier_label(d, c) == wildcards.tier]
    plans = [p for p in plan_design(d, WF.tokens_in, WF.tokens_out, cells=cells)
             if not p.unavailable]
    live = [p for p in plans if p.live]
    budget = d.budget.tiers.get(wildcards.tier)
    line = (
        f"{sum(len(p.seeds) for p in live)} live runs, "
        f"{sum(p.decisions for p in live):,} planned decisions, "
        f"{sum(p.usd for p in live):.2f} USD planned"
        + (f" (tier budget {budget:.2f} USD)" if budget is not None else "")
    )
    try:  # warn in the dry run already; the gate itself refuses
        check_keys(d, [p.cell for p in live], f"{wildcards.design}/{wildcards.tier}")
    except ConfigError as exc:
        line += "; WARNING: " + str(exc).split(": ", 2)[-1].split(". Or rehearse")[0]
    return line


def tier_runs_outcomes(wildcards):
    return outcome_files(wildcards.design, wildcards.tier)


def design_outcomes(wildcards):
    return outcome_files(wildcards.design, mock=wildcards.kind == "rehearsal")


def run_path(wildcards):
    """Run directory of the outcomes rule (its `kind` wildcard: runs or rehearsal)."""
    return str(run_dir(wildcards.design, wildcards.cell, int(wildcards.seed),
                       wildcards.kind == "rehearsal"))


def cache_file(wildcards):
    return str(cache_path(wildcards.design))


def rehearsal_cache(wildcards):
    """Rehearsals keep their own cache: mock answers must never reach a live run."""
    return str(cache_path(wildcards.design, mock=True))


def design_yaml(wildcards):
    design(wildcards.design)  # unknown design: a clear error at DAG time
    return design_file(wildcards.design)


def cell_hash(wildcards):
    """The cell's config hash as a param: a changed cell config re-runs its free/mock runs."""
    from market_agents.config import config_hash

    return config_hash(design(wildcards.design).cell_config(wildcards.cell))


def rehearsal_cell_hash(wildcards):
    from market_agents.config import config_hash

    return config_hash(design(wildcards.design).cell_config(wildcards.cell, mock=True))


def gather_flags(wildcards):
    """--mock for rehearsals; --allow-missing when max_seeds runs only part of each cell."""
    flags = ["--mock"] if wildcards.kind == "rehearsal" else []
    return " ".join(flags + (["--allow-missing"] if WF.max_seeds else []))


def partial_flag(wildcards):
    return "--allow-missing" if WF.max_seeds else ""


def freeze_flag(wildcards):
    """Confirmatory live runs need a valid freeze; the gate and every live job check it."""
    if wildcards.design == WF.confirmatory:
        return "--freeze results/manifests/freeze.json"
    return ""


def pilot_cap_flag(wildcards):
    return f"--pilot-cap {WF.pilot_cap_usd}" if wildcards.design == WF.pilot else ""


def unknown_target(wildcards):
    raise ConfigError(
        f"unknown target {wildcards.name!r}. Targets: all, exploratory, sigma, pilot, freeze, "
        "tier_T1 … tier_T6, confirmatory, sensitivity, rehearse_pilot, rehearse_T1 … "
        "rehearse_T6, rehearse_confirmatory, protocol, dag; or a file such as "
        "results/runs/<design>/outcomes.parquet (README 'Workflow')"
    )


# --- Bazaar -----------------------------------------------------------------------------------

from market_agents.bazaar.tiers import TIERS as _BAZAAR_TIERS

BAZAAR_TIERS = sorted(_BAZAAR_TIERS)


def bazaar_eval_dir(wildcards):
    return f"results/bazaar/eval/{wildcards.provider}/{wildcards.model}/{wildcards.bz_tier}"


def bazaar_cache(wildcards):
    return f"results/cache/bazaar_{wildcards.provider}.sqlite"


def bazaar_usd_cap(wildcards):
    """Live evaluations need a USD cap: bazaar_usd_cap of config/workflow.yaml, per evaluation."""
    return "" if wildcards.provider == "mock" else f"--usd-cap {WF.bazaar_usd_cap}"


def bazaar_api(wildcards):
    return 0 if wildcards.provider == "mock" else 1


LIVE_DESIGNS, LIVE_CELLS = live_regex()

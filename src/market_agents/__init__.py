"""market_agents: an artificial stock market with LLM traders, run as pre-registered,
reproducible, budgeted experiments (and Bazaar, a dealer environment for single LLM agents).

The package, bottom to top (a folder imports only from the rows below it; tests/test_imports.py
checks it)::

    commands/ cli.py   `ma <command>`: argument parsing only, one module per command
    pipeline/          the Snakemake workflow's side: workflow config (the protocol's
                       defaults), what the rules ask (workflow.py), DAG rendering, run contract,
                       one live invocation per directory (holder.py)
    paper/             the paper of a design: its inputs, estimates, tables, figures, model
                       cards, files and page (`ma paper`)
    protocol/          the experiment protocol: designs (data), planning (what is computed
                       from a design), tiers, budget gate, freeze, pilot, the steps of a
                       design, the design registry
    analysis/          outcomes of a saved run (outcomes.py, FROZEN), scoring, statistics,
                       estimands, stylized facts, figures
    sim/               one run: the tick loop, the runner, the run-directory format
    market/ agents/    the exchange and fundamentals; the trader types (agents/traders/, one
                       module each, found through plugins.py) and the LLM traders' pool
    llm/               the LLM layer: providers, cache, pricing, runtime caps (no market)
    config.py          the simulation config (pydantic), hashed for provenance
    config_llm.py      its population.llm block (routes, models, prompt revision, caps) and the
                       facts it checks (provider kinds, structured-output modes)
    prices.py          the price table and the cost of a call; with config_llm.py below both
                       config.py and llm/ (which names them), so a classical run loads no
                       module of llm/
    provider_kinds.py  the provider registry: one registration per provider kind (its class's
                       import path, structured-output modes, default settings, price-table key);
                       the config, the price table, llm/ and Bazaar ask it; imports nothing
                       from the package
    plugins.py         the registries of trader types and mechanisms: the modules of a
                       folder and the entry points of installed packages, by name
    inputs.py          reading what users give: UTF-8 text files, strict YAML (no duplicate
                       keys, size and alias limits), the environment switches of `ma`; imports
                       only errors.py
    layout.py          every path under results/ (runs, rehearsal, caches, manifests, freeze,
                       pilot, deviations, ledger, budget, library, Bazaar, logs, sanity) and
                       the project a path belongs to; imports nothing from the package
    outputs.py         where a command may write: the one rule every command that writes a
                       folder applies first (never the working directory, the project, a
                       results root or a cache; replace only what it wrote)
    core.py errors.py rng.py atomic.py   the bottom layer: imports nothing from the package
    bazaar/            the Bazaar environment (its engine stands alone; llm_eval bridges to llm/)
    testing/           the fake provider HTTP server for tests and benchmarks (never imported
                       by the product)

Data flow: design (data) -> protocol.planning.run_config (a cell's config, its equal-USD cap
from the freeze) -> sim.simulate -> run directory (sim.rundir) -> analysis.scoring
(outcomes.json) -> protocol.steps.gather (outcomes.parquet) -> pipeline (Snakemake targets,
gate, freeze, pilot) -> paper (paper.make).

The names in ``__all__`` are the main entry points; each is imported on first use, so
``import market_agents`` stays cheap.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

# A process of the package runs one simulation, one thread: parallel work is across processes
# (Snakemake jobs, `ma design`'s workers). OpenBLAS's thread pool (numpy's and scipy's) then only
# costs: its threads start with every process (about 0.1 CPU s of the 0.4 s a process needs to
# start; bench/README.md, "Fewer CPU seconds per process") and every job at once oversubscribes
# the cores. Set here, before the package imports numpy; the processes it starts (Snakemake's
# jobs) inherit it. Snakemake's own process has loaded numpy before it reads the Snakefile (its
# YAML templating, yte, imports it), so only the environment it starts in sets that one's
# threads. A value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# entry point -> module that defines it
_ENTRY_POINTS = {
    "Config": "market_agents.config",
    "load_config": "market_agents.config",
    "simulate": "market_agents.sim.simulation",
    "run_to_dir": "market_agents.sim.runner",
    "load_design": "market_agents.protocol.design",
    "score_run": "market_agents.analysis.scoring",
    "LLMClient": "market_agents.llm.client",
    "MarketAgentsError": "market_agents.errors",
    "ConfigError": "market_agents.errors",
}

__all__ = ["Config", "ConfigError", "LLMClient", "MarketAgentsError", "load_config",
           "load_design", "run_to_dir", "score_run", "simulate"]


def __getattr__(name: str) -> Any:
    if name in _ENTRY_POINTS:
        return getattr(importlib.import_module(_ENTRY_POINTS[name]), name)
    raise AttributeError(f"module 'market_agents' has no attribute {name!r}")

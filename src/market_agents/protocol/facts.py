"""What the freeze records of a design: the confirmatory base and its hash, the design as a
whole as data (:func:`fingerprint`: what a changed design changes) and :func:`design_facts`
(per cell its tier, overrides, seeds, models, live decisions and planned USD; each tier's
Holm family; the smallest effects of interest), and the outcome thresholds it records.

Computed from a loaded design through the planning step (an equal-USD cell's config is
``planning.run_config``'s); ``protocol/freeze.py`` compares the file with them.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from market_agents.config import Config, apply_overrides, config_hash, validate
from market_agents.prices import load_prices
from market_agents.protocol.design import Design
from market_agents.protocol.estimability import families
from market_agents.protocol.planning import plan_design, run_config


def base_config(design: Design) -> Config:
    """The confirmatory base: the design's base config with its design-level overrides (cells'
    own overrides excluded), validated."""
    data = apply_overrides(design.base, design.overrides, str(design.path))
    return validate(data, f"{design.path}: base")


def base_config_hash(design: Design) -> str:
    """config_hash of the confirmatory base (:func:`base_config`)."""
    return config_hash(base_config(design))


def market_fundamentals(config: Config) -> dict[str, Any]:
    """The fundamentals block and shocks of a config: what SD(V^pub/V − 1) depends on."""
    return {"fundamentals": config.fundamentals.model_dump(mode="json"),
            "shocks": [s.model_dump(mode="json") for s in config.shocks]}


def fingerprint(design: Design) -> dict[str, Any]:
    """The confirmatory design as a whole, as data: what a changed design changes.

    ``base_config_hash``, per cell its tier, seeds, treatment, unavailable reason, the
    SHA-256 of the prompt and answer schema its LLM traders get (``prompt_identity``) and the
    config_hash of its resolved config (overrides, caps such as ``usd_cap``, the base; an
    equal-USD cell's cap is the freeze's ``equal_usd`` record, so its rule is hashed), the
    budget block (cap, reserves, tier budgets), the planning rates, the price-table rows of
    every live model (the prices used), and the analysis declared: each tier's primary outcomes
    (its Holm family) and the smallest effects of interest.
    """
    # why: the LLM trader loads the LLM layer, which a classical `ma run` (whose guard imports
    # this module) must not load
    from market_agents.agents.llm_trader import prompt_identity

    cells: dict[str, Any] = {}
    models: set[str] = set()
    for name, c in design.cells.items():
        entry = {"tier": c.tier, "seeds": list(c.seeds), "treatment": c.treatment,
                 "unavailable": c.unavailable}
        if not c.unavailable:
            config = run_config(design, name)
            if c.equal_usd_of:
                # Its usd_cap is the freeze's own equal_usd record (planned spend before the
                # freeze, the pilot's measured spend after): the rule is frozen, not the number,
                # so freezing does not change the design it froze.
                config = config.model_copy(deep=True)
                config.population.llm.usd_cap = 0.0
                entry["equal_usd_of"] = c.equal_usd_of
            entry["config_hash"] = config_hash(config)
            if config.population.n_llm and not config.population.llm.frozen_library:
                # the prompt and schema as sent, not their labels: an edit that keeps
                # prompt_version changes these
                entry.update(prompt_identity(config))
            if design.is_live(name):
                llm = config.population.llm
                models |= {m for r in llm.paid_routes() for m in llm.model_ids(r)}
        cells[name] = entry
    table = load_prices(design.prices_path)
    return {"base_config_hash": base_config_hash(design), "cells": cells,
            "budget": design.budget.model_dump(mode="json"),
            "planning": design.planning.model_dump(mode="json"),
            "prices": {m: table.price(m).model_dump(mode="json") for m in sorted(models)},
            "analysis": {"primary_outcomes": {t: list(v)
                                              for t, v in design.primary_by_tier.items()},
                         "smallest_effect": dict(design.smallest_effect),
                         "contrasts": {c: a for c, a in design.against.items()},
                         "interactions": interactions(design),
                         "power": design.power.model_dump(mode="json")}}


def interactions(design: Design) -> list[dict[str, Any]]:
    """The design's interaction contrasts as data: label, treated and control."""
    return [{"label": i.label, "treated": dict(i.treated), "control": dict(i.control)}
            for i in design.interaction_contrasts]


def design_facts(design: Design) -> dict[str, Any]:
    """What the freeze records of a design: its base config hash, fingerprint, budgets, per
    cell the tier, overrides, seeds, models, live decisions, planned USD and the cell its
    contrast subtracts (``against``; None: a control) (Run protocol §5.1), the interactions,
    each tier's Holm family (``estimability.families``), the power settings (``power``: the
    σ_d bound's level, the exchangeable cells) and the smallest effects of interest.
    """
    cells = {}
    for p in plan_design(design):
        if p.unavailable:
            continue
        c = design.cell(p.cell)
        cells[p.cell] = {"tier": p.tier, "overrides": c.overrides, "seeds": p.seeds,
                         "models": sorted(p.by_model), "live_decisions": p.decisions,
                         "planned_usd": round(p.usd, 6), "against": design.against[p.cell]}
    inter = interactions(design)
    return {"name": design.name, "path": str(design.path), "config_hash": base_config_hash(design),
            "fingerprint": fingerprint(design), "cells": cells,
            "budgets": dict(design.budget.tiers),
            "families": families(cells, design.primary_by_tier, inter),
            "interactions": inter, "power": design.power.model_dump(mode="json"),
            "smallest_effect": dict(design.smallest_effect)}


def default_thresholds() -> dict[str, Any]:
    """The outcome thresholds the freeze records by default (bubble, crash, VAR order, horizon)."""
    # why: the outcome definitions load polars; the guard of every paying job imports this module
    from market_agents.analysis.outcomes import Thresholds

    return asdict(Thresholds())

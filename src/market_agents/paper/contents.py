"""What the paper of a design contains, from its data
(:class:`~market_agents.paper.data.PaperData`): every table and figure of the catalogue the
design supports, and a reason for each one it does not. Pure: nothing here reads or writes a
file (``paper/inputs.py`` reads, ``paper/files.py`` writes, ``paper/make.py`` runs both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from market_agents.analysis.estimands import fired
from market_agents.analysis.figures import price_figure
from market_agents.paper import estimates, figures, tables
from market_agents.paper.catalog import Artifact, artifact, comparison_artifact
from market_agents.paper.data import PaperData, Skip
from market_agents.paper.files import Paper


def _acted(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs of a cell in which every mechanism it switches on acted (all of them when the
    cell switches none on, or when its mechanisms never acted together)."""
    if "mechanisms" not in runs.columns or "mechanisms_idle" not in runs.columns:
        return runs
    on = runs["mechanisms"].fill_null("").str.len_chars() > 0
    acted = runs.filter(on & (runs["mechanisms_idle"].fill_null("").str.len_chars() == 0))
    return acted if acted.height else runs


def representative_seeds(outcomes: pl.DataFrame, exclude: tuple[int, ...] = ()) -> dict[str, int]:
    """Per cell, the seed whose volatility is the cell's median (the lower of the two middle
    seeds on an even count; the first seed when volatility is undefined everywhere), among the
    seeds where the cell's mechanism acted when it has one that did (a breaker cell is drawn
    where the breaker halted; the price figure's title says when it never did)."""
    out = {}
    for cell in outcomes["cell"].unique(maintain_order=True).to_list():
        runs = outcomes.filter(pl.col("cell") == cell)
        kept = runs.filter(~pl.col("seed").is_in(list(exclude)))
        runs = _acted(kept if kept.height else runs)
        ranked = runs.filter(pl.col("volatility").is_not_null()).sort("volatility", "seed") if (
            "volatility" in runs.columns) else runs.clear()
        if ranked.height:
            out[cell] = int(ranked["seed"][(ranked.height - 1) // 2])
        else:
            out[cell] = int(runs["seed"].min())
    return out


def build(data: PaperData, texts: dict[str, str], inputs: list[str] | None = None,
          progress: Callable[[str], Any] | None = None) -> Paper:
    """Every table and figure of the catalogue for ``data``; ``texts`` are the model cards and
    the deviations appendix (file name -> Markdown). ``progress(label)`` is called per item."""
    kind = "rehearsal of " if data.rehearsal else ""
    paper = Paper(design=data.design, heading=f"market_agents: the paper of the {kind}"
                  f"{data.design} design", mock_note=data.mock_note, texts=dict(texts),
                  inputs=list(inputs or []), code=data.code_fingerprint)

    def table(name: str, frame: pl.DataFrame | Skip,
              entry: Artifact | None = None) -> pl.DataFrame | Skip:
        if progress:
            progress(f"table {name}")
        if isinstance(frame, Skip):
            paper.skipped[f"tables/{name}"] = frame.reason
        else:
            paper.tables[name] = (entry or artifact("table", name), frame)
        return frame

    def figure(name: str, make: Callable[[], Any], title: str | None = None) -> None:
        if progress:
            progress(f"figure {name}")
        fig = make()
        if isinstance(fig, Skip):
            paper.skipped[f"figures/{name}"] = fig.reason
        else:
            a = artifact("figure", name)
            paper.figures[name] = (a, fig, title or a.title)

    overview = table("design_overview", tables.design_overview(data))
    primary = table("primary_estimates", estimates.primary_estimates(data))
    dose = table("dose_response", estimates.dose_response(primary, data))
    for c in data.comparisons:  # the design's, in the order it declares them
        table(c.name, estimates.comparison(data, c), comparison_artifact(c))
    table("mechanism_activity", tables.mechanism_activity(data))
    table("model_mix", tables.model_mix(data))
    table("spillover", estimates.spillover(data))
    table("library", tables.library(data))
    table("control_sd", tables.control_sd(data))
    table("sensitivity", tables.sensitivity(data))
    table("llm_behaviour", tables.llm_behaviour(data))

    note = data.mock_note
    never = {c: [m for m, (acted, _) in ms.items() if not acted]
             for c, ms in fired(data.outcomes).items()}
    figure("dose_response", lambda: figures.dose_response(
        dose, note, artifact("figure", "dose_response").title))
    for cell in data.cells:
        if cell not in data.ticks:
            paper.skipped[f"figures/price_{cell}"] = "no saved ticks for its representative seed"
            continue
        ticks, manifest = data.ticks[cell]
        idle = never.get(cell)
        title = (f"{cell}, seed {manifest.get('seed')}: price against V and V^pub "
                 f"({manifest.get('n_llm_agents', 0)} LLM traders"
                 + (f"; its {', '.join(idle)} never acted on any seed" if idle else "") + ")")
        shown = f"[{note}] {title}" if note else title
        figure(f"price_{cell}", lambda t=ticks, m=manifest, s=shown: price_figure(t, m, s), title)
    figure("library_support", lambda: figures.library_support(
        data, note, artifact("figure", "library_support").title))
    figure("outcome_distributions", lambda: figures.outcome_distributions(
        data.outcomes, note, artifact("figure", "outcome_distributions").title))
    figure("pilot_diagnostics", lambda: figures.pilot_diagnostics(
        data, artifact("figure", "pilot_diagnostics").title))
    compared = [(artifact("table", "primary_estimates").title, primary)]
    compared += [(c.title, paper.tables[c.name][1]) for c in data.comparisons
                 if c.name in paper.tables and c.kind == "paired"]
    figure("forest", lambda: figures.forest(compared, note, artifact("figure", "forest").title))
    # the protocol's tiers: a design without tiers has no tier budget to spend or DAG to draw
    no_tiers = Skip("the design has no tiers") if not data.has_tiers else None
    figure("spend", lambda: no_tiers or figures.spend(overview, note,
                                                      artifact("figure", "spend").title))
    figure("protocol_dag", lambda: no_tiers or figures.protocol_dag(
        data.plan, data.tiers, note, artifact("figure", "protocol_dag").title))
    return paper

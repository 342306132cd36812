"""What the paper holds: every table and figure by name, with its title and a caption that says
what it shows and how it was computed. The one list that ``ma paper --help``, the writer, the
index page and the Snakemake report's captions read; with it, each comparison table a design
declares (``tables:``, :mod:`market_agents.protocol.comparisons`), whose caption
:func:`comparison_artifact` writes from the declaration (:func:`artifacts`: both).

Files: ``paper/tables/<name>.{csv,md,tex,html}`` and ``paper/figures/<name>.{png,pdf}``
(``price_<cell>`` is one figure per cell), ``paper/model_cards.md``, ``paper/deviations.md``,
``paper/index.html`` and ``paper/paper.json`` (what was written, what was skipped and why).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from market_agents import layout
from market_agents.errors import ConfigError
from market_agents.protocol.comparisons import Comparison
from market_agents.protocol.tiers import NO_TIER

EST = ("Estimator (pre-registered): the mean over seeds of the paired difference y(cell, s) - "
       "y(control, s), the control run having the same seed (common random numbers); SE = SD of "
       "the differences / sqrt(n); 95 % Student t interval; 95 % percentile bootstrap over seeds "
       "(9,999 resamples, fixed seed 20261027); two-sided t-test p; Holm adjustment within the "
       "family over its cells x the design's primary outcomes ('role' primary; every other "
       "outcome is 'secondary': unadjusted, no p_holm, exploratory); treated and control means "
       "over the paired seeds. A row without an interval says why in 'not_estimable' (no "
       "paired seeds, one pair, or no variation: every paired difference equal). A seed "
       "without its control run "
       "(or with the outcome undefined in either) is dropped and listed in 'dropped'. In a "
       "confirmatory design the pilot seeds 1-3 never enter an estimate. Statistics: scipy.stats.")


@dataclass(frozen=True)
class Artifact:
    """One table or figure of the paper: its file name, kind (``table`` or ``figure``), title
    and caption.
    """

    name: str
    kind: str  # "table" or "figure"
    title: str
    caption: str


ARTIFACTS: tuple[Artifact, ...] = (
    Artifact("design_overview", "table", "Design and spend overview",
             "Per tier: cells, seeds planned and run, seeds cut by the order of sacrifice "
             "(budget gate manifests, protocol §5.3), live decisions and USD planned (planning "
             "rate of the design, as `ma budget`) against decisions made (llm_decisions) and USD "
             "spent (run manifests, llm_usage.usd_spent) and priced (sum of llm_usd: the recorded "
             "answers at config/prices.yaml), the tier budget, and the cumulative spend against "
             "the project cap."),
    Artifact("primary_estimates", "table", "Primary estimates per tier",
             "Every cell against the cell its design names (default share_0; a mechanism "
             "cell against the cell it differs from by the mechanism alone), and the design's "
             "interactions (E5: (leverage_25 - share_25) - (leverage_0 - share_0), estimated "
             "seed by seed), for every paper outcome; one Holm family per tier (its contrasts x "
             "its primary outcomes); 'mde': the minimum detectable effect of the freeze "
             "(freeze.json: the paired t test on n - 1 df at power 0.8, at the family's Holm "
             "level for a primary outcome, at the upper confidence bound of sigma_d), or, where "
             "named in the mde source note, one computed the same way from the rehearsed "
             "pilot. " + EST),
    Artifact("dose_response", "table", "Dose-response over the LLM share",
             "The share cells (phi in {0, 0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 1.0}) from the "
             "primary estimates: treated mean and paired difference against share_0 with its "
             "95 % t interval; phi = 0 is the control itself. " + EST),
    Artifact("mechanism_activity", "table", "Mechanism activity",
             "Per cell, the mean per run of the mechanism-activity outcomes as the runs "
             "recorded them (the exchange's halts and rejects by reason, each installed "
             "mechanism's counts, the LLM traders' channel, memory and cap counts), the "
             "mechanisms the cell "
             "switches on with the seeds in which each acted, and a flag for a mechanism that "
             "never acted in any seed (outcomes.parquet: mechanisms, mechanisms_idle)."),
    Artifact("model_mix", "table", "Model mix per cell",
             "Per cell and model (llm_decisions.parquet): decisions, share of the cell's "
             "decisions, valid rate, tokens in and out per decision and USD per decision."),
    Artifact("spillover", "table", "Spillover and correlation (T6 k2_25)",
             "The two-asset cell: per seed the correlation of the two assets' log returns "
             "(ret_corr) and the Diebold-Yilmaz total spillover index (spillover_dy, percent), "
             "then their mean over seeds with a 95 % t interval and the t-test p of mean 0."),
    Artifact("library", "table", "Frozen-library arm at N = 1,000 (§5.4)",
             "The distribution of the standardized nearest-neighbour distance (run manifests: "
             "library.nn_distances, one per replayed decision) as its 10th, 25th, 50th, 75th "
             "and 90th percentiles: first the library's own recorded states at N = 100 (each "
             "one's distance to the others, leave-one-out), then library_1000 at N = 1,000 "
             "seed by seed, then every replayed decision of the arm. The arm is out of support "
             "(reported, not evidence) when its median at N = 1,000 exceeds the 90th "
             "percentile at N = 100. Runs made before per-decision distances were saved give "
             "per seed the median and 90th percentile and the arm as the median of seed "
             "medians."),
    Artifact("control_sd", "table", "Control SD of every outcome (sigma design)",
             "The classical control share_0 of the sigma design (seeds 1-30, no LLM, free): "
             "number of runs, mean, SD (ddof 1), minimum and maximum of every numeric outcome."),
    Artifact("sensitivity", "table", "Sensitivity grid of the episode outcomes",
             "Bubble and crash episodes re-scored from the saved ticks (ticks.parquet; the "
             "frozen outcome functions, nothing re-simulated) at bubble gaps 3/5/8 % (10 ticks) "
             "and crash drops 7/10/15 % (20 ticks): one row per cell, the mean per run over "
             "its seeds of each episode outcome at each threshold (a bubble depends on the "
             "bubble gap only, a crash on the crash drop only)."),
    Artifact("llm_behaviour", "table", "LLM behaviour per cell",
             "Per cell with LLM traders: valid rate and failure rate (decisions-weighted), LLM "
             "share of orders and of volume, decisions per agent (outcomes.parquet); tokens in, "
             "out and reasoning, USD per decision, median and 95th-percentile latency "
             "(llm_decisions.parquet)."),
    Artifact("dose_response", "figure", "Dose-response with paired intervals",
             "For every paper outcome: the mean paired difference against share_0 of each share "
             "cell, plotted at its LLM share phi, with its 95 % t interval (bars) and bootstrap "
             "interval (band); phi = 0 is zero by construction."),
    Artifact("price", "figure", "Price against V and V^pub, one representative seed per cell",
             "The seed whose volatility is the cell's median (the lower one on a tie): mid "
             "price, the hidden value V and the public value V^pub (ticks.parquet), shocks "
             "dashed (placebo in orange), halts shaded, margin calls as triangles (run "
             "manifest), volume below."),
    Artifact("outcome_distributions", "figure", "Outcome distributions by cell",
             "Every seed of every cell as a dot and the cell mean as a bar, one panel per paper "
             "outcome (outcomes.parquet)."),
    Artifact("pilot_diagnostics", "figure", "Pilot diagnostics",
             "The pilot design (protocol §4): validity and failure rates per cell against the "
             "pass criteria (>= 80 %, <= 10 %), USD per decision against the planned rate and "
             "its ±30 % band, and the SD of paired differences against share_0 (σ̂_d) per "
             "primary outcome, each relative to the control SD of that outcome."),
    Artifact("library_support", "figure", "Decision-library support at N = 1,000 and N = 100",
             "Protocol §5.4: the empirical CDF of every replayed decision's standardized "
             "nearest-neighbour distance to the library at N = 1,000 (run manifests' "
             "library.nn_distances; faint: each seed) against the library's own recorded "
             "states at N = 100 (each one's distance to the others), with the N = 100 90th "
             "percentile and the N = 1,000 median: the arm is out of support, reported and not "
             "evidence, when the median lies beyond it."),
    Artifact("forest", "figure", "Paired differences by contrast and outcome",
             "Every contrast the design declares (the primary estimates, then each paired "
             "comparison table) with its mean paired difference and 95 % t interval, one panel "
             "per outcome in its units, zero marked; a difference without an interval is drawn "
             "hollow (too few seeds); outcomes that never moved are named, not drawn."),
    Artifact("spend", "figure", "Spend by tier against plan and cap",
             "Planned USD per tier (planning rate) beside USD spent and priced (recorded "
             "answers at config/prices.yaml), the tier budget as a tick, and the cumulative "
             "spend over the tiers against the project cap."),
    Artifact("protocol_dag", "figure", "The protocol as a DAG, by tier",
             "The protocol's steps in the order they run, one row per stage: the pilot, the "
             "freeze, then for each tier T1 to T6 its budget gate, its live runs, their outcomes "
             "and the reconciliation of spend, then gather, sensitivity and this paper. Every "
             "edge points down or along its row (no step waits for a later one)."),
)

BY_KEY = {(a.kind, a.name): a for a in ARTIFACTS}

EQUAL_USD = ("{refs} (every LLM agent gets the same decision opportunities) and {cells} "
             "(decisions stop at the per-run usd_cap): per agent the decisions offered "
             "(offered_per_agent: equal by design), made (made_per_agent: answered, the offered "
             "less budget halts and decision-cap holds) and budget-halted (halted_per_agent), "
             "USD per run and valid rate (means over seeds), then {pairs} seed by seed. ")


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _pairs(c: Comparison) -> str:
    """``a, b and c against share_25; d against share_0``: the cells by the cell they are
    compared with, in the order first named."""
    return "; ".join(_and([x for x, r in c.pairs if r == ref]) + f" against {ref}"
                     for ref in c.references)


def comparison_artifact(c: Comparison) -> Artifact:
    """The table of a declared comparison: its title, and a caption that says which cells it
    compares with which, its Holm family and the estimator (the design's caption first)."""
    lead = f"{c.caption.strip()} " if c.caption.strip() else ""
    if not c.pairs:
        text = "No cell of the design joins this table. "
    elif c.kind == "equal_usd":
        text = EQUAL_USD.format(refs=_and(c.references), cells=_and(c.cells), pairs=_pairs(c))
    else:
        tier = "design's" if c.tier == NO_TIER else c.tier
        text = (f"{_pairs(c)}, seed by seed; one Holm family over the {tier} primary "
                f"outcomes ({', '.join(c.primary)}). ")
    return Artifact(c.name, "table", c.title, lead + text + EST)


def artifacts(comparisons: Iterable[Comparison], where: str = "") -> tuple[Artifact, ...]:
    """Every table and figure of a design's paper: :data:`ARTIFACTS`, then its comparison
    tables (:func:`comparison_artifact`).

    Raises:
        ConfigError: a comparison is named as a table of the catalogue (``where``, the design
            file, leads the message).
    """
    taken = [a.name for a in ARTIFACTS if a.kind == "table"]
    out = []
    for c in comparisons:
        if c.name in taken:
            raise ConfigError(f"{where + ': ' if where else ''}tables.{c.name}: the paper has a "
                              f"table of that name ({', '.join(taken)}): name the comparison "
                              "otherwise")
        out.append(comparison_artifact(c))
    return (*ARTIFACTS, *out)

OTHER_FILES = {
    "model_cards.md": "every model used: provider, model id, dates used, prices with source and "
                      "date, effort, max output tokens, temperature, prompt version and hash, "
                      "schema hash (config/prices.yaml, run manifests, the design)",
    "deviations.md": "the deviations appendix: the dated deviations log "
                     f"({layout.deviations_log()}) and the known deviations",
    "index.html": "one page with every table and figure",
    "paper.json": "what was written, what was skipped and why, and from which inputs",
}


def artifact(kind: str, name: str) -> Artifact:
    """The catalogue entry of a table or figure (``price_<cell>`` figures share ``price``)."""
    if kind == "figure" and name.startswith("price_"):
        name = "price"
    return BY_KEY[(kind, name)]


def help_text() -> str:
    """What ``ma paper`` writes, for ``--help``."""
    lines = ["writes, under OUT:"]
    for a in ARTIFACTS:
        stem = "price_<cell>" if a.name == "price" else a.name
        ext = "csv,md,tex,html" if a.kind == "table" else "png,pdf"
        lines.append(f"  {a.kind}s/{stem}.{{{ext}}}  {a.title}")
        if a.name == "dose_response" and a.kind == "table":
            lines.append("  tables/<table>.{csv,md,tex,html}  each comparison table the design "
                         "declares (its tables: and its cells' table and compare_with)")
    lines += [f"  {name}  {what}" for name, what in OTHER_FILES.items()]
    return "\n".join(lines)

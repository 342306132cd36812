"""The paper's tables on hand-made frames: what a referee reads in each row."""

from __future__ import annotations

import polars as pl
import pytest

from market_agents.paper import estimates, tables
from market_agents.paper.data import PaperData
from market_agents.protocol.comparisons import Comparison


def _data(rows: list[dict]) -> PaperData:
    outcomes = pl.DataFrame(rows)
    plan = pl.DataFrame({"cell": ["mini_25", "mini_25_equalusd"], "tier": ["T2", "T5"]})
    return PaperData(design="confirmatory", rehearsal=False, mock_note=None, confirmatory=True,
                     outcomes=outcomes, plan=plan)


def test_fairness_shows_decisions_made_and_budget_halted_per_agent():
    """Equal-USD stops answers at the cap: the table must show it, not the equal opportunities
    (both cells read 27 decisions per agent; equal-USD had 510 budget halts per run)."""
    rows = []
    for seed in (101, 102, 103):
        rows.append({"cell": "mini_25", "seed": seed, "n_llm_agents": 25,
                     "n_llm_decisions": 675, "llm_budget_halts": 0, "llm_decision_cap_holds": 0,
                     "llm_decisions_per_agent": 27.0, "llm_usd": 1.0 + seed % 2,
                     "llm_valid_rate": 0.9, "volatility": 0.003 + 1e-4 * seed % 7})
        rows.append({"cell": "mini_25_equalusd", "seed": seed, "n_llm_agents": 25,
                     "n_llm_decisions": 675, "llm_budget_halts": 510,
                     "llm_decision_cap_holds": 0, "llm_decisions_per_agent": 27.0,
                     "llm_usd": 0.34, "llm_valid_rate": 0.9, "volatility": 0.0031})
    fairness = Comparison("fairness", "Fairness", "", "equal_usd",
                          (("mini_25_equalusd", "mini_25"),), "T5", ("volatility",))
    table = estimates.comparison(_data(rows), fairness)
    levels = table.filter(pl.col("part") == "levels")
    by = {r["cell"]: r for r in levels.iter_rows(named=True)}
    assert by["mini_25"]["offered_per_agent"] == by["mini_25_equalusd"][
        "offered_per_agent"] == 27.0
    assert by["mini_25"]["made_per_agent"] == 27.0
    assert by["mini_25_equalusd"]["made_per_agent"] == pytest.approx(165 / 25)
    assert by["mini_25_equalusd"]["halted_per_agent"] == pytest.approx(510 / 25)


def test_sensitivity_is_one_row_per_cell_and_one_column_per_threshold():
    rows = []
    for cell in ("share_0", "share_25"):
        for seed in (101, 102):
            for gap in (0.03, 0.05, 0.08):
                for drop in (0.07, 0.10, 0.15):
                    rows.append({"cell": cell, "seed": seed, "bubble_gap": gap,
                                 "bubble_ticks": 10, "crash_drop": drop, "crash_ticks": 20,
                                 "n_bubbles": int(gap < 0.05) * (seed - 100), "bubble_share": 0.0,
                                 "n_crashes": int(drop < 0.1), "crash_share": 0.0})
    data = _data([{"cell": "share_0", "seed": 1}])
    data.sensitivity = pl.DataFrame(rows)
    table = tables.sensitivity(data)
    assert table["cell"].to_list() == ["share_0", "share_25"] and table["runs"].to_list() == [2, 2]
    assert table.columns[:5] == ["cell", "runs", "n_bubbles @ 3 %", "n_bubbles @ 5 %",
                                 "n_bubbles @ 8 %"]
    assert table["n_bubbles @ 3 %"].to_list() == [1.5, 1.5]
    assert table["n_crashes @ 7 %"].to_list() == [1.0, 1.0]
    assert table["n_crashes @ 10 %"].to_list() == [0.0, 0.0]
    assert table.width == 2 + 4 * 3


def test_a_mechanism_cell_is_drawn_on_a_seed_where_its_mechanism_acted():
    """breaker_25's median-volatility seed halted nowhere; the figure takes the median of the
    seeds where the breaker halted (a cell whose mechanism never acted keeps every seed)."""
    from market_agents.paper.contents import representative_seeds

    outcomes = pl.DataFrame({
        "cell": ["breaker_25"] * 3 + ["memory_25"] * 3,
        "seed": [1, 2, 3, 1, 2, 3],
        "volatility": [0.1, 0.2, 0.3, 0.1, 0.2, 0.3],
        "mechanisms": ["breaker"] * 3 + ["memory"] * 3,
        "mechanisms_idle": ["breaker", "breaker", "", "memory", "memory", "memory"]})
    assert representative_seeds(outcomes) == {"breaker_25": 3, "memory_25": 2}


def test_the_spend_figure_of_a_mock_design_draws_no_cap():
    from market_agents.paper.figures import spend

    overview = pl.DataFrame({"tier": ["all"], "usd_planned": [0.0], "usd_spent": [0.0],
                             "usd_priced": [27.0], "tier_budget": [None],
                             "cumulative_spent": [0.0], "project_cap": [0.0]})
    mock = spend(overview, "Mock-based", "Spend")
    assert len(mock.axes) == 1  # no cumulative axis, so no 0 USD cap line
    assert "nothing was paid" in mock.axes[0].get_xlabel()
    live = spend(overview.with_columns(pl.lit(40.0).alias("project_cap")), None, "Spend")
    labels = live.axes[1].get_legend_handles_labels()[1]
    assert "project cap 40 USD" in labels


def _library_data(shift: float) -> PaperData:
    """library_1000 on two seeds: 200 replayed decisions each, distances uniform on
    [shift, shift + 1]; the library's own distances uniform on [0, 1] (percentiles 0..1)."""
    import numpy as np

    rng = np.random.default_rng(5)
    nn = pl.DataFrame([{"cell": "library_1000", "seed": s, "distance": float(d)}
                       for s in (101, 102) for d in shift + rng.uniform(0, 1, 200)])
    runs = pl.DataFrame([{"cell": "library_1000", "seed": s, "nn_median": shift + 0.5,
                          "nn_p90": shift + 0.9, "loo_nn_p90": 0.9, "out_of_support": False}
                         for s in (101, 102)])
    outcomes = pl.DataFrame({"cell": ["library_1000"] * 2, "seed": [101, 102]})
    return PaperData(design="confirmatory", rehearsal=False, mock_note=None, confirmatory=True,
                     outcomes=outcomes, plan=pl.DataFrame({"cell": ["library_1000"]}),
                     runs=runs, library_nn=nn,
                     library_reference=[q / 100 for q in range(101)])


@pytest.mark.parametrize("shift, out", [(0.0, False), (0.5, True)])
def test_library_support_is_the_distribution_of_every_replayed_decision(shift, out):
    """§5.4 on per-decision distances: N = 100's quantiles (the library's own states), each
    seed's and the arm's at N = 1,000; out of support when the arm's median (shift + 0.5)
    exceeds N = 100's 90th percentile (0.9)."""
    import matplotlib

    from market_agents.paper import figures

    data = _library_data(shift)
    table = tables.library(data)
    assert table["sample"].to_list() == [
        "N = 100: the library's recorded states (leave-one-out)", "N = 1,000: seed 101",
        "N = 1,000: seed 102", "N = 1,000: the arm (every replayed decision)"]
    arm = table.row(3, named=True)
    assert arm["decisions"] == 400 and arm["p50"] == pytest.approx(shift + 0.5, abs=0.06)
    assert table.row(0, named=True)["p90"] == pytest.approx(0.9)
    assert arm["out_of_support"] is out
    assert arm["verdict"] == ("OUT-OF-SUPPORT: reported, not evidence" if out else "in support")
    fig = figures.library_support(data, None, "Decision-library support")
    text = " ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))
    assert ("OUT OF SUPPORT" in text) is out and "N = 100 p90 0.9" in text
    assert len(fig.axes[0].lines) >= 5  # two seeds, the arm, the reference, two markers


def test_model_cards_of_a_replay_say_no_prompt_was_sent():
    from market_agents.paper.cards import model_cards_md

    uses = pl.DataFrame([{"cell": "library_1000", "seed": 101, "route": "library",
                          "kind": "library", "model": "gpt-5.4-nano", "decisions": 10,
                          "prompt_version": "v1", "prompt_sha256": None, "schema_sha256": None,
                          "first_date": None, "date": None, "effort": "low",
                          "max_output_tokens": 1024, "temperature": None}])
    md = model_cards_md(uses, {"models": {}}, None)
    assert "runs made before hashes" not in md
    assert "- prompt SHA-256: none sent: decisions replayed from the frozen library" in md

"""The figures the environment must show: the public Bazaar anchors within 0.01 on the 20-seed
evaluation split, the per-seed orderings on both seed blocks, and the exploit pass."""

import numpy as np
import pytest

from market_agents.bazaar.anchors import HONEST_ANCHOR, PUBLIC, TOLERANCE, anchors, run_policy
from market_agents.bazaar.exploits import FARMS, exploit_pass
from market_agents.bazaar.policies import make_policy
from market_agents.bazaar.tiers import EVAL_SEED_BASE, TIERS, eval_seeds, get_tier, train_seeds
from market_agents.errors import ConfigError

SEEDS = eval_seeds(20)


@pytest.fixture(scope="module")
def checked():
    return anchors(n_seeds=20)


def test_eval_split_is_frozen_apart_from_train():
    assert SEEDS[0] == EVAL_SEED_BASE == 1_000_000
    assert train_seeds(3) == [0, 1, 2]


def test_the_seven_public_tiers():
    assert list(TIERS) == ["micro", "trivial", "easy", "hard", "maker_micro", "maker_easy",
                           "credit_micro"]
    for t in TIERS.values():
        assert (t.horizon, t.start_index, t.bait_depth, t.interest, t.loan_ratio,
                t.margin_call) == (10, 100.0, 0.25, 0.005, 1.0, 0.30)
    assert (get_tier("hard").vol, get_tier("hard").spread, get_tier("hard").edge,
            get_tier("hard").edge_prob, get_tier("hard").start_inventory) == (3.0, 4.0, 1.0, 0.2, 0)
    c = get_tier("credit_micro")
    assert (c.kind, c.cash, c.start_inventory, c.edge, c.edge_prob, c.max_size) == (
        "credit", 300.0, 5, 8.0, 0.35, 8)


def test_every_public_figure_is_matched_within_tolerance(checked):
    rows, claims = checked
    levels = [c for c in claims if c["kind"] == "level"]
    assert len(levels) == sum(len(f) for p in PUBLIC.values() for f in p.values()) + 1
    assert all(c["ok"] for c in levels), [c for c in levels if not c["ok"]]
    eval_rows = {(r["tier"], r["policy"]): r for r in rows if r["block"] == "eval"}
    assert abs(eval_rows["credit_micro", "margin_taker"]["score"] - 1.0669) <= TOLERANCE
    assert abs(eval_rows["hard", "gambler"]["score"] - 0.9633) <= TOLERANCE
    assert abs(eval_rows["micro", "honest"]["score"] - 1.0410) <= TOLERANCE
    assert {r["tier"] for r in rows} == set(TIERS)


def test_per_seed_orderings_hold_on_both_blocks(checked):
    _, claims = checked
    orderings = [c for c in claims if c["kind"] == "ordering"]
    assert {c["block"] for c in orderings} == {"eval", "train"} and len(orderings) == 10
    assert all(c["ok"] for c in orderings), [c for c in orderings if not c["ok"]]


def test_a_level_check_fails_when_a_figure_is_off(monkeypatch):
    from market_agents.bazaar import anchors as mod

    monkeypatch.setitem(mod.PUBLIC, "hard", {"honest": {"score": "0.9800"}})
    _, claims = mod.anchors(["hard"], n_seeds=20)
    assert [c["ok"] for c in claims if c["kind"] == "level"] == [False]


def test_micro_honest_beats_passive_on_every_seed():
    honest, passive = (np.array([e["score"] for e in run_policy("micro", p, SEEDS)])
                       for p in ("honest", "passive"))
    assert np.all(honest > passive)


@pytest.mark.parametrize("tier", list(TIERS))
def test_no_farm_beats_the_anchor_on_either_block(tier):
    for block in ("eval", "train"):
        anchor, rows = exploit_pass(tier, 20, block)
        assert anchor["policy"] == HONEST_ANCHOR[tier]
        assert [r["policy"] for r in rows] == list(FARMS)
        assert not [r["policy"] for r in rows if r["beats"]], (block, rows)
        by = {r["policy"]: r for r in rows}
        assert by["loop_spamming"]["spam_ends"] == 20
        # prose never earns the format bonus, however many command words it holds
        assert by["prose_rambling"]["format_bonus"] == 0
        assert by["prose_rambling"]["illegal"] == 20 * (TIERS[tier].horizon + 1)


def test_prose_rambling_earned_the_format_bonus_under_the_old_rule():
    """The farm is a real probe: each of its replies holds a 'pass' or 'buy 2' that a
    match-anywhere rule would have played."""
    import re

    from market_agents.bazaar.exploits import prose_rambling

    act = prose_rambling(get_tier("micro"))
    old_rule = re.compile(r"\b(?:(buy|sell)\s+(\d+)|(pass))\b", re.IGNORECASE)
    for turn in range(10):
        assert old_rule.search(act({"turn": turn, "ask": 101.5}))


@pytest.mark.parametrize("tier", ["maker_micro", "maker_easy"])
def test_avellaneda_stoikov_quotes_legally_and_trades(tier):
    eps = run_policy(tier, "avellaneda_stoikov", SEEDS)
    assert sum(e["illegal"] for e in eps) == 0 and sum(e["maker_fills"] for e in eps) > 0


def test_unknown_or_misplaced_policy_is_config_error():
    with pytest.raises(ConfigError, match="unknown bazaar policy 'yolo'"):
        make_policy("yolo", get_tier("micro"), 0)
    with pytest.raises(ConfigError, match="policy 'tight' quotes, but tier 'micro'"):
        make_policy("tight", get_tier("micro"), 0)

"""The figures the environment must show, over the 20-seed frozen evaluation split, and the
exploit pass."""

import numpy as np
import pytest

from market_agents.bazaar.anchors import HONEST_ANCHOR, anchors, run_policy
from market_agents.bazaar.exploits import FARMS, exploit_pass
from market_agents.bazaar.policies import make_policy
from market_agents.bazaar.tiers import EVAL_SEED_BASE, TIERS, eval_seeds, get_tier, train_seeds
from market_agents.errors import ConfigError

SEEDS = eval_seeds(20)


def _scores(tier, policy):
    return np.array([e["score"] for e in run_policy(tier, policy, SEEDS)])


def test_eval_split_is_frozen_apart_from_train():
    assert SEEDS[0] == EVAL_SEED_BASE == 1_000_000
    assert train_seeds(3) == [0, 1, 2]


def test_micro_honest_beats_passive_on_every_seed_gambler_between():
    honest, passive, gambler = (_scores("micro", p) for p in ("honest", "passive", "gambler"))
    assert np.all(honest > passive)
    assert passive.mean() < gambler.mean() < honest.mean()
    assert honest.mean() == pytest.approx(1.053, abs=0.02)


def test_hard_honest_near_one_above_gambler():
    honest, gambler = _scores("hard", "honest"), _scores("hard", "gambler")
    assert abs(honest.mean() - 1.0) < 0.02 and honest.mean() > gambler.mean()


def test_maker_micro_vol_aware_earns_spread_tight_is_picked_off_wide_idles():
    eps = {p: run_policy("maker_micro", p, SEEDS) for p in ("vol_aware", "tight", "wide")}

    def mean(p, k):
        return float(np.mean([e[k] for e in eps[p]]))

    assert mean("vol_aware", "score") > 1.0 and mean("vol_aware", "pickoff_loss") < 1.0
    assert mean("tight", "maker_fills") > mean("vol_aware", "maker_fills")
    assert mean("tight", "pickoff_loss") > mean("tight", "realized_spread")
    assert mean("tight", "score") < 1.0 < mean("vol_aware", "score")
    assert mean("wide", "maker_fills") == 0
    assert mean("wide", "score") == pytest.approx(_scores("maker_micro", "passive").mean())


def test_credit_margin_taker_over_passive_over_margin_gambler():
    m = {p: _scores("credit_micro", p).mean()
         for p in ("margin_taker", "passive", "margin_gambler", "honest")}
    assert m["margin_taker"] > m["passive"] > m["margin_gambler"]
    assert m["margin_taker"] > m["honest"]  # leverage on real edges pays


def test_every_anchor_claim_holds():
    rows, claims = anchors(n_seeds=20)
    assert claims and all(c["ok"] for c in claims), [c for c in claims if not c["ok"]]
    assert {r["tier"] for r in rows} == set(TIERS)


@pytest.mark.parametrize("tier", list(TIERS))
def test_no_farm_beats_the_honest_anchor(tier):
    anchor, rows = exploit_pass(tier, 20)
    assert anchor["policy"] == HONEST_ANCHOR[tier]
    assert [r["policy"] for r in rows] == list(FARMS)
    assert not [r["policy"] for r in rows if r["beats"]]
    spam = next(r for r in rows if r["policy"] == "loop_spamming")
    assert spam["spam_ends"] == 20


def test_unknown_or_misplaced_policy_is_config_error():
    with pytest.raises(ConfigError, match="unknown bazaar policy 'yolo'"):
        make_policy("yolo", get_tier("micro"), 0)
    with pytest.raises(ConfigError, match="policy 'tight' quotes, but tier 'micro'"):
        make_policy("tight", get_tier("micro"), 0)

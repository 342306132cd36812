"""The engine: determinism, exogenous index, illegal moves, spammer guard, maker flow, credit."""

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.bazaar.engine import SPAM_LIMIT, BazaarEnv
from market_agents.bazaar.play import play, play_policy, replay
from market_agents.bazaar.scenario import draw
from market_agents.bazaar.tiers import TIERS, get_tier
from market_agents.errors import ConfigError

MESSAGES = ["buy 1", "hmm", "sell 2", "quote 99 1 101 1", "pass", "buy 99", "sell 1", "buy 2"]


def _run(tier, seed, messages):
    env = BazaarEnv(tier)
    first = env.reset(seed)
    steps = [env.step(m) for m in messages if not env.done]
    return first, steps, env.transcript, env.summary()


@pytest.mark.parametrize("tier", list(TIERS))
def test_same_seed_and_actions_give_same_transcript_and_score(tier):
    a, b = _run(tier, 7, MESSAGES), _run(tier, 7, MESSAGES)
    assert a == b
    assert _run(tier, 8, MESSAGES)[0] != a[0] or _run(tier, 8, MESSAGES)[3] != a[3]


def test_index_is_exogenous_to_the_agent():
    t = get_tier("micro")
    honest = play_policy(t, 1_000_003, "honest")["transcript"]
    passive = play_policy(t, 1_000_003, "passive")["transcript"]
    index = [json.loads(r["observation"])["index"] for r in honest]
    assert index == [json.loads(r["observation"])["index"] for r in passive]
    assert index == [float(x) for x in draw(t, 1_000_003).index[1:]]


def test_score_marks_net_worth_at_the_final_index():
    t = get_tier("micro")
    result = play_policy(t, 1_000_000, "passive")
    final = float(draw(t, 1_000_000).index[-1])
    assert result["score"] == pytest.approx((t.cash + t.start_inventory * final)
                                            / t.start_net_worth())
    assert result["reward"] == pytest.approx(result["score"] + t.format_bonus)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(MESSAGES + ["quote 95 5 105 5", "x", "sell 9"]), max_size=25),
       st.sampled_from(list(TIERS)), st.integers(0, 2**32 - 1))
def test_determinism_for_any_message_sequence(messages, tier, seed):
    assert _run(tier, seed, messages) == _run(tier, seed, messages)


@pytest.mark.parametrize("tier, message, reason", [
    ("maker_micro", "quote 99 6 101 1", "quote size 6 exceeds max size 5"),
    ("maker_micro", "quote 99 1 101 6", "quote size 6 exceeds max size 5"),
    ("maker_micro", "quote 300 4 301 1", "bid 300 x 4 needs 1200.00, cash is 1000.00"),
    ("maker_micro", "quote 99 1 101 5", None),
    ("credit_micro", "sell 3", "sell 3 exceeds inventory 2"),
    ("credit_micro", "buy 9", "buy 9 exceeds max size 8"),
])
def test_tier_limits(tier, message, reason):
    env = BazaarEnv(tier)
    env.reset(1)
    obs, _, _, info = env.step(message)
    if reason is None:
        assert info["legal"]
    else:
        assert obs.startswith(f"illegal: {reason}")


@pytest.mark.parametrize("message, reason", [
    ("quote 99 1 101 1", "quote is only allowed on maker tiers"),
    ("buy 3", "buy 3 exceeds max size 2"),
    ("sell 2", "sell 2 exceeds inventory 0"),
    ("gibberish", "no command found"),
])
def test_bad_moves_return_illegal_reason(message, reason):
    env = BazaarEnv(replace(get_tier("micro"), start_inventory=0))
    env.reset(0)
    obs, reward, done, info = env.step(message)
    assert obs.startswith(f"illegal: {reason}")
    assert info["illegal"].startswith(reason) and not info["legal"] and not done
    assert json.loads(obs.split("\n", 1)[1])["turn"] == 0  # the first illegal try is free


def test_buy_beyond_cash_is_illegal():
    env = BazaarEnv(replace(get_tier("micro"), cash=50.0))
    env.reset(0)
    obs, *_ = env.step("buy 1")
    assert obs.startswith("illegal: buy 1 costs")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=25), st.sampled_from(list(TIERS)))
def test_any_input_never_raises_and_ends(messages, tier):
    env = BazaarEnv(tier)
    env.reset(3)
    for m in messages + ["pass"] * 30:
        obs, reward, done, info = env.step(m)
        assert isinstance(obs, str)
        if done:
            break
    assert env.done


def test_second_illegal_try_plays_as_pass_and_costs_format():
    t = get_tier("micro")
    env = BazaarEnv(t)
    env.reset(0)
    env.step("buy 9")
    _, _, _, info = env.step("buy 8")
    assert env.t == 1
    for _ in range(t.horizon - 1):
        env.step("pass")
    s = env.summary()
    # two illegal messages: the first is free, the second costs turn 0 its format credit
    assert s["illegal"] == 2 and s["format_bonus"] == pytest.approx(t.format_bonus * 0.9)


def test_spammer_guard_ends_after_identical_illegal_messages():
    env = BazaarEnv("micro")
    env.reset(0)
    for i in range(SPAM_LIMIT):
        obs, reward, done, info = env.step("  I am thinking.  ")
        assert done == (i == SPAM_LIMIT - 1)
    s = env.summary()
    assert s["termination"] == "spam" and s["format_bonus"] == 0 and s["trade_bonus"] == 0
    assert reward == s["reward"] == s["score"]


def test_varied_illegal_messages_do_not_trip_the_guard_but_the_clock_runs():
    env = BazaarEnv("micro")
    env.reset(0)
    n = 0
    while not env.done:
        n += 1
        env.step(f"buy {1000 + n}")
    assert env.termination == "horizon" and n == 2 * env.tier.horizon


def test_legal_move_resets_the_spam_run():
    env = BazaarEnv("micro")
    env.reset(0)
    for m in ["x", "x", "x", "pass", "x", "x", "x"]:
        env.step(m)
    assert not env.done


def test_maker_quote_stands_on_pass_and_reports_spread_and_pickoff():
    t = get_tier("maker_micro")
    result = play_policy(t, 1_000_000, "tight")
    assert result["maker_fills"] > 0 and result["pickoffs"] > 0
    assert result["pickoff_loss"] > 0
    env = BazaarEnv(t)
    env.reset(1_000_000)
    env.step("quote 90 1 110 1")
    _, _, _, info = env.step("pass")
    assert env.state()["quote"][0] == 90 and env.state()["quote"][2] == 110


def test_pickoff_takes_only_stale_quotes():
    t = replace(get_tier("maker_micro"), noise_prob=0.0)
    for seed in range(40):
        sc = draw(t, seed)
        env = BazaarEnv(t)
        env.reset(seed)
        i0, i1 = float(sc.index[0]), float(sc.index[1])
        env.step(f"quote {i0 - 0.05:.2f} 3 {i0 + 0.05:.2f} 3")
        for f in env.fills:
            assert f["by"] == "pickoff"
            if f["side"] == "sell":
                assert f["price"] < i1
            else:
                assert f["price"] > i1


def test_bait_depth_executes_one_unit():
    t = replace(get_tier("maker_micro"), bait=1.0, edge_prob=1.0)
    env = BazaarEnv(t)
    obs = json.loads(env.reset(5))
    side = "buy" if obs["ask"] < obs["index"] else "sell"
    env.step(f"{side} 3")
    assert "only 1 of 3 executable" in env.state()["last"]
    assert env.summary()["bait_hits"] == 1


def _default_episode():
    t = replace(get_tier("credit_micro"), vol=40.0)

    def all_in(obs):
        q = min(t.max_size, int(obs["buying_power"] // obs["ask"]))
        return f"buy {q}" if q > 0 else "pass"

    for seed in range(200):
        r = play(t, seed, all_in)
        if r["termination"] == "default":
            return t, seed, r
    raise AssertionError("no default in 200 seeds")


def test_default_scores_zero():
    t, seed, r = _default_episode()
    assert r["score"] == 0 and r["reward"] == 0 and r["margin_calls"] >= 1
    assert r["turns_played"] < t.horizon


def test_margin_call_gives_one_turn_to_cure():
    t, seed, r = _default_episode()
    calls = [i for i, x in enumerate(r["transcript"])
             if json.loads(x["observation"]).get("margin_call")]
    assert calls, "a default is preceded by a margin call"
    env = BazaarEnv(t)
    env.reset(seed)
    for x in r["transcript"][: calls[0] + 1]:
        env.step(x["message"])
    assert env.state()["margin_call"] and not env.done
    env.step("pass")
    assert env.done and env.termination == "default"


def test_credit_loan_is_automatic_and_capped_at_equity():
    t = get_tier("credit_micro")
    env = BazaarEnv(t)
    obs = json.loads(env.reset(0))
    assert obs["buying_power"] == pytest.approx(t.cash + t.start_net_worth())
    obs, *_ = env.step("buy 8")  # 8 x 101 = 808 > 300 cash + 500 loan
    assert obs.startswith("illegal: buy 8 costs 808.00, buying power is 800.00")
    env.step("buy 7")
    s = env.state()
    assert s["debt"] == pytest.approx((7 * 101 - 300) * (1 + t.interest), abs=0.01)
    assert s["cash"] == 0


def test_replay_pads_a_truncated_transcript_with_pass():
    r = replay("micro", 1_000_000, ["buy 1"])
    assert r["truncated"] and r["turns_played"] == 10


def test_unknown_tier_is_config_error():
    with pytest.raises(ConfigError, match="unknown bazaar tier 'nano'"):
        BazaarEnv("nano")


def test_trigger_hunting_posts_just_inside_a_revealed_threshold_before_an_adverse_step():
    t = replace(get_tier("maker_micro"), vol=5.0, trigger=1.0, edge_prob=0.5, bait=0.0)
    hits = 0
    for seed in range(30):
        sc = draw(t, seed)
        r = play_policy(t, seed, "honest")
        hits += r["trigger_hits"]
        env = BazaarEnv(t)
        env.reset(seed)
        for row in r["transcript"]:
            q = env.scripted
            if q["trigger"] == "buy":
                edge = env.revealed["buy"]
                assert q["ask"] == pytest.approx(env.index - edge, abs=0.011)
                assert sc.index[env.t + 1] < q["ask"]  # the step more than wipes the edge out
            env.step(row["message"])
    assert hits > 0


def test_maker_info_reports_running_spread_and_pickoff():
    t = get_tier("maker_micro")
    env = BazaarEnv(t)
    env.reset(1_000_000)
    for _ in range(t.horizon):
        i = env.state()["index"]
        _, _, done, total = env.step(f"quote {i - 0.05:.2f} 2 {i + 0.05:.2f} 2")
    assert total["pickoff_loss"] == env.summary()["pickoff_loss"] > 0
    assert total["realized_spread"] == env.summary()["realized_spread"]

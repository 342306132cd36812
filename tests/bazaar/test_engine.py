"""The engine: determinism, exogenous index, illegal moves, spammer guard, maker flow, credit."""

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.bazaar.engine import SPAM_LIMIT, BazaarEnv
from market_agents.bazaar.play import play, play_policy, replay
from market_agents.bazaar.policies import make_policy
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
    assert t.start_net_worth() == 1500.0
    assert result["reward"] == pytest.approx(result["score"] + t.format_bonus)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(MESSAGES + ["quote 95 5 105 5", "x", "sell 9"]), max_size=25),
       st.sampled_from(list(TIERS)), st.integers(0, 2**32 - 1))
def test_determinism_for_any_message_sequence(messages, tier, seed):
    assert _run(tier, seed, messages) == _run(tier, seed, messages)


def _env(tier, seed=0, **changes):
    env = BazaarEnv(replace(get_tier(tier), **changes) if changes else tier)
    return env, json.loads(env.reset(seed))


def test_world_is_the_public_seeded_draw():
    """The index is in cents and starts at the tier's start index, displayed sizes are
    1..max_size, and tiers with the same index parameters share the index path of a seed."""
    for tier in TIERS.values():
        for seed in (0, 1_000_000):
            sc = draw(tier, seed)
            assert len(sc.index) == tier.horizon + 1 and sc.index[0] == tier.start_index
            assert all(round(x, 2) == x for x in sc.index)
            for q in sc.quotes:
                assert 1 <= q.bid_size <= tier.max_size and 1 <= q.ask_size <= tier.max_size
    assert draw(get_tier("micro"), 7).index == draw(get_tier("maker_micro"), 7).index


@pytest.mark.parametrize("tier, message, reason", [
    ("maker_micro", "quote 99 6 101 1", "quote size 6 exceeds max size 5"),
    ("maker_micro", "quote 99 1 101 6", "quote size 6 exceeds max size 5"),
    ("maker_micro", "quote 300 5 301 5", None),  # fills are limited by cash and inventory
    ("micro", "quote 99 1 101 1", "quote is only allowed on maker tiers"),
    ("credit_micro", "quote 99 1 101 1", "quote is only allowed on maker tiers"),
    ("hard", "sell 1", "sell 1 exceeds inventory 0 (no short selling)"),
])
def test_tier_limits(tier, message, reason):
    env, _ = _env(tier, 1)
    obs, _, _, info = env.step(message)
    if reason is None:
        assert info["legal"]
    else:
        assert obs.startswith(f"illegal: {reason}")


def test_orders_are_capped_by_the_displayed_size():
    env, obs = _env("micro", 0)
    size = obs["ask_size"]
    o, *_ = env.step(f"buy {size + 1}")
    assert o.startswith(f"illegal: buy {size + 1} exceeds the ask size {size}")
    assert env.step(f"buy {size}")[3]["legal"]


@pytest.mark.parametrize("message, reason", [
    ("quote 99 1 101 1", "quote is only allowed on maker tiers"),
    ("sell 2", "sell 2 exceeds inventory 0"),
    ("gibberish", "no command found"),
    ("buy 1,000", "buy quantity must be a whole number"),
])
def test_bad_moves_return_illegal_reason(message, reason):
    env, _ = _env("micro", 0, start_inventory=0)
    obs, reward, done, info = env.step(message)
    assert obs.startswith(f"illegal: {reason}")
    assert info["illegal"].startswith(reason) and not info["legal"] and not done
    assert json.loads(obs.split("\n", 1)[1])["turn"] == 0  # the first illegal try is free


def test_buy_beyond_cash_is_illegal():
    env, _ = _env("micro", 0, cash=50.0)
    obs, *_ = env.step("buy 1")
    assert obs.startswith("illegal: buy 1 costs") and ", cash is 50.00" in obs


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=25), st.sampled_from(list(TIERS)))
def test_any_input_never_raises_and_ends(messages, tier):
    env = BazaarEnv(tier)
    env.reset(3)
    for m in messages + ["pass"] * 30:
        obs, reward, done, info = env.step(m)
        assert isinstance(obs, str)
        json.loads(obs.rsplit("\n", 1)[-1])  # the state is strict JSON
        if done:
            break
    assert env.done


def test_only_the_first_mistake_is_free_later_ones_lose_the_turn_and_format():
    t = get_tier("micro")
    env, _ = _env("micro", 0)
    env.step("buy 99")
    assert env.t == 0  # free
    env.step("buy 98")
    assert env.t == 1  # lost turn 0
    env.step("pass")
    env.step("hmm")
    assert env.t == 3  # lost turn 2
    while not env.done:
        env.step("pass")
    s = env.summary()
    assert s["illegal"] == 3 and s["format_bonus"] == pytest.approx(t.format_bonus * 0.8)


def test_spammer_guard_ends_after_identical_illegal_messages():
    env, _ = _env("micro", 0)
    for i in range(SPAM_LIMIT):
        obs, reward, done, info = env.step("  I am thinking.  ")
        assert done == (i == SPAM_LIMIT - 1)
    s = env.summary()
    assert s["termination"] == "spam" and s["format_bonus"] == 0 and s["trade_bonus"] == 0
    assert reward == s["reward"] == s["score"]
    assert s["turns_played"] == SPAM_LIMIT - 1  # the first was free, the others lost turns


def test_varied_illegal_messages_do_not_trip_the_guard_but_the_clock_runs():
    env, _ = _env("micro", 0)
    n = 0
    while not env.done:
        n += 1
        env.step(f"buy {1000 + n}")
    assert env.termination == "horizon" and n == env.tier.horizon + 1


def test_legal_move_resets_the_spam_run():
    env, _ = _env("micro", 0)
    for m in ["x", "x", "x", "pass", "x", "x"]:
        env.step(m)
    assert not env.done


def test_maker_quote_stands_on_pass_and_reports_spread_and_pickoff():
    t = get_tier("maker_micro")
    result = play_policy(t, 1_000_000, "tight")
    assert result["maker_fills"] > 0 and result["pickoffs"] > 0
    assert result["pickoff_loss"] > 0
    env, _ = _env("maker_micro", 1_000_000)
    env.step("quote 90 1 110 1")
    env.step("pass")
    assert env.state()["quote"] == [90.0, 1, 110.0, 1]


def test_quote_sizes_cap_what_trades_per_turn():
    for seed in range(30):
        env, obs = _env("maker_micro", seed)
        env.step(f"quote {obs['index'] - 0.05:.2f} 2 {obs['index'] + 0.05:.2f} 2")
        for side in ("buy", "sell"):
            assert sum(f["qty"] for f in env.fills if f["side"] == side) <= 2


def test_pickoff_takes_only_stale_quotes():
    hits = 0
    for seed in range(40):
        env, obs = _env("maker_micro", seed, flow=0)
        i1 = env.sc.index[1]
        env.step(f"quote {obs['index'] - 0.05:.2f} 3 {obs['index'] + 0.05:.2f} 3")
        for f in env.fills:
            hits += 1
            assert f["by"] == "pickoff"
            assert f["price"] < i1 if f["side"] == "sell" else f["price"] > i1
    assert hits > 0


def test_bait_depth_executes_a_quarter_of_the_displayed_size():
    for seed in range(50):
        env, obs = _env("maker_micro", seed, bait=1.0, edge_prob=1.0, max_size=8)
        side = "buy" if obs["ask"] < obs["index"] else "sell"
        shown = obs["ask_size"] if side == "buy" else obs["bid_size"]
        if shown < 4 or (side == "sell" and obs["inventory"] < shown):
            continue
        o, *_ = env.step(f"{side} {shown}")
        exe = max(1, shown // 4)
        assert f"only {exe} executable" in o and env.summary()["bait_hits"] == 1
        assert env.step(f"{side} {exe}")[3]["legal"]
        return
    raise AssertionError("no bait turn found")


def test_trigger_hunting_posts_just_inside_the_smallest_edge_taken():
    hunted = 0
    for seed in range(30):
        env, _ = _env("maker_micro", seed, trigger=1.0, edge_prob=0.8, bait=0.0)
        policy = make_policy("honest", env.tier, seed)
        while not env.done:
            q, trig = env.scripted, env.trigger
            if env.hunting:
                hunted += 1
                edge = max(0.01, trig.edge - 0.05)
                if trig.side == "buy":
                    assert q.ask == pytest.approx(env.index - edge, abs=0.006)
                else:
                    assert q.bid == pytest.approx(env.index + edge, abs=0.006)
            env.step(policy(env.state()))
    assert hunted > 0


def _default_episode():
    t = replace(get_tier("credit_micro"), vol=40.0)

    def all_in(obs):
        q = min(obs["ask_size"], int(obs["buying_power"] // obs["ask"]))
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


def test_credit_loan_is_automatic_repaid_by_cash_and_charged_interest():
    t = get_tier("credit_micro")
    seed = next(s for s in range(100)
                if draw(t, s).quotes[0].ask_size * draw(t, s).quotes[0].ask > t.cash)
    env, obs = _env("credit_micro", seed)
    # buying power: cash plus debt up to 1x equity (300 cash + 5 units at 100)
    assert obs["buying_power"] == pytest.approx(t.cash + t.start_net_worth())
    qty = obs["ask_size"]
    cost = round(qty * obs["ask"], 2)
    env.step(f"buy {qty}")
    s = env.state()
    assert s["cash"] == 0
    assert s["debt"] == pytest.approx(round((cost - t.cash) * (1 + t.interest), 2), abs=0.011)


def test_credit_buy_beyond_buying_power_is_illegal():
    env, obs = _env("credit_micro", 0, cash=10.0)
    assert obs["buying_power"] == pytest.approx(2 * 10.0 + 5 * 100.0)
    env2, _ = _env("credit_micro", 0, cash=0.0, start_inventory=0)
    o, *_ = env2.step("buy 1")
    assert o.startswith("illegal: buy 1 costs") and "buying power is 0.00" in o


def test_replay_pads_a_truncated_transcript_with_pass():
    r = replay("micro", 1_000_000, ["buy 1"])
    assert r["truncated"] and r["turns_played"] == 10


def test_unknown_tier_is_config_error():
    with pytest.raises(ConfigError, match="unknown bazaar tier 'nano'"):
        BazaarEnv("nano")


def test_maker_info_reports_running_spread_and_pickoff():
    env, _ = _env("maker_micro", 1_000_000)
    for _ in range(env.tier.horizon):
        i = env.state()["index"]
        _, _, done, total = env.step(f"quote {i - 0.05:.2f} 2 {i + 0.05:.2f} 2")
    assert total["pickoff_loss"] == env.summary()["pickoff_loss"] > 0
    assert total["realized_spread"] == env.summary()["realized_spread"]

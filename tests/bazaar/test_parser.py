"""The text protocol parser: a command stands on a line of its own, the last command wins, prose
is never a command, numbers are whole tokens, and bad input is Illegal with a reason."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_agents.bazaar.engine import BazaarEnv
from market_agents.bazaar.parser import Action, Illegal, parse
from market_agents.bazaar.tiers import TIERS

NO_COMMAND = "no command found"


def test_last_command_line_wins_with_reasoning_around_it():
    text = "First I thought buy 2, but the bid is rich.\nFinal answer: **sell 1**"
    assert parse(text) == Action("sell", qty=1)
    assert parse("buy 2\nOn reflection:\nsell 1\nThat is my move.") == Action("sell", qty=1)


@pytest.mark.parametrize("line, action", [
    ("buy 3", Action("buy", qty=3)),
    ("Buy 3", Action("buy", qty=3)),
    ("  `sell 2`  ", Action("sell", qty=2)),
    ("- pass", Action("pass")),
    ("1. pass.", Action("pass")),
    ("> **Action:** buy 0005", Action("buy", qty=5)),
    ("pass!", Action("pass")),
    ("QUOTE 99.5 2 100.5 3", Action("quote", bid=99.5, bid_size=2, ask=100.5, ask_size=3)),
])
def test_decorated_command_lines(line, action):
    assert parse(f"Some reasoning first.\n{line}") == action


@pytest.mark.parametrize("prose", [
    # the reported case: a tiny model rambled and the word 'pass' counted as a command
    "…the only way to pass the bid is to wait for the index to move.",
    "I would buy if the ask were lower, so I pass.",
    "Buy low, sell high.",
    "Pass on this one, the spread is too wide.",
    "I will buy 3 units now.",
    "buy two units",
    "Let me sell nothing; I'll buy later? pass for now",
])
def test_prose_is_not_a_command(prose):
    result = parse(prose)
    assert isinstance(result, Illegal) and result.reason.startswith(NO_COMMAND)


# Issue 11: Bazaar read a different number than the agent wrote (1 / 1 / 1 / 5 / 10).
@pytest.mark.parametrize("message, token", [
    ("buy 1,000", "1,000"),
    ("buy 1e9", "1e9"),
    ("buy 1_000", "1_000"),
    ("buy 5k", "5k"),
    ("buy 10% of cash", "10%"),
    ("buy 2.5", "2.5"),
    ("sell -1", "-1"),
    ("sell +2", "+2"),
])
def test_a_number_glued_to_anything_is_illegal_with_the_reason(message, token):
    verb = message.split()[0]
    assert parse(message) == Illegal(
        f"{verb} quantity must be a whole number of units in digits (like 3), got {token!r}")


def test_malformed_command_lines_are_illegal():
    assert parse("buy 0") == Illegal("buy quantity must be at least 1, got 0")
    assert parse("buy 1 2") == Illegal(
        "buy Q takes 1 number and nothing else on its line, got '1 2'")
    assert parse("buy 3 units") == Illegal(
        "buy Q takes 1 number and nothing else on its line, got '3 units'")
    assert parse("pass 3") == Illegal("pass takes no number, got '3'")


def test_bad_quotes_are_illegal():
    assert parse("quote 99 2 101") == Illegal("quote BP BQ AP AQ needs 4 numbers, got 3")
    assert parse("quote 101 2 99 2") == Illegal("quote bid 101 must be below ask 99")
    assert parse("quote 100 2 100 2") == Illegal("quote bid 100 must be below ask 100")
    assert parse("quote 99 0 101 2") == Illegal("quote sizes must be at least 1, got 0 and 2")
    assert parse("quote 99 1.5 101 2") == Illegal(
        "quote size must be a whole number of units in digits (like 3), got '1.5'")
    assert parse("quote 1,000 1 1,001 2") == Illegal(
        "quote price must be a number in digits with at most one decimal point (like 99.5), "
        "got '1,000'")
    assert parse("quote 99.5.1 1 101 2").reason.endswith("got '99.5.1'")
    assert parse("quote 0 1 101 2").reason.startswith("quote prices must be above 0")
    assert parse(f"quote 1 1 {'9' * 400} 2").reason.startswith("quote prices must be above 0")


def test_a_malformed_last_command_is_not_rescued_by_an_earlier_one():
    assert parse("buy 1\n... actually:\nbuy 2.5") == Illegal(
        "buy quantity must be a whole number of units in digits (like 3), got '2.5'")


@given(st.text(max_size=200))
def test_parse_never_raises(text):
    assert isinstance(parse(text), Action | Illegal)


@given(st.text(alphabet=st.characters(categories=["L", "Zs", "P"]), max_size=80),
       st.integers(1, 10_000), st.sampled_from(["buy", "sell"]))
def test_trailing_command_line_after_any_prose(prose, qty, side):
    assert parse(f"{prose}\n{side} {qty}") == Action(side, qty=qty)


_WORDS = st.one_of(
    st.sampled_from(["buy", "sell", "pass", "quote", "3", "2", "99.5", "the", "bid", "ask", "I",
                     "would", "only", "way", "to", ",", ".", ";", ":", "**", "-", "`"]),
    st.text(alphabet=st.characters(categories=["L", "P"]), min_size=1, max_size=8),
)


@given(st.lists(_WORDS, max_size=12).map(lambda ws: " ".join(["Well,", *ws])))
def test_a_line_of_prose_never_earns_a_command(prose):
    """A line that starts as prose is prose, whatever command words and numbers follow."""
    result = parse(prose)
    assert isinstance(result, Illegal) and result.reason.startswith(NO_COMMAND)


# A number glued to something, or a number-like token that is not whole digits.
_GLUED = st.one_of(
    st.tuples(st.integers(0, 10**6), st.sampled_from([",", "_", "e", "E", "k", "%", "x", "$"]),
              st.integers(0, 999)).map(lambda t: f"{t[0]}{t[1]}{t[2]:03d}"),
    st.integers(1, 10**6).map(lambda n: f"{n}k"),
    st.integers(1, 99).map(lambda n: f"{n}%"),
    st.integers(1, 10**4).map(lambda n: f"-{n}"),
    st.tuples(st.integers(0, 99), st.integers(1, 99)).map(lambda t: f"{t[0]}.{t[1]}"),
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(TIERS)), st.sampled_from(["buy", "sell"]), _GLUED,
       st.sampled_from(["", "buy 1\n", "sell 1\nthen\n", "pass\n"]), st.integers(0, 2**32 - 1))
def test_a_last_command_with_a_malformed_number_is_illegal_and_changes_nothing(
        tier, verb, number, before, seed):
    env = BazaarEnv(tier)
    start = json.loads(env.reset(seed))
    obs, _, done, info = env.step(f"{before}{verb} {number}")
    assert not info["legal"] and repr(number) in info["illegal"]
    state = json.loads(obs.split("\n", 1)[1])
    assert not done and state["turn"] == 0  # the episode's first mistake uses no turn
    for key in ("cash", "inventory", "net_worth", "debt", "quote"):
        assert state.get(key) == start.get(key)
    # a second one loses its turn, but trades nothing either
    obs, _, _, info = env.step(f"{verb} {number}")
    assert not info["legal"] and env.book.cash == start["cash"]
    assert env.book.inventory == start["inventory"] and env.book.debt == 0


# Replies of reasoning models (verifiers PR #522): a command inside <think>…</think> is thought,
# not played; the last command outside every reasoning block is the answer.
@pytest.mark.parametrize("reply, action", [
    # closed reasoning and nothing after it: no answer yet
    ("<think>\nThe ask is cheap.\nbuy 3\n</think>", None),
    # cut off by max_tokens mid-reasoning: the open block runs to the end
    ("<think>\nThe ask is cheap.\nbuy 3", None),
    # a chat template that opened the block in the prompt: only the closing tag comes back
    ("The ask is cheap.\nbuy 3\n</think>", None),
    # the answer, then more reasoning
    ("pass\n<think>\nor rather\nsell 2\n</think>", Action("pass")),
    ("<think>\nbuy 3\n</think>\nsell 1", Action("sell", qty=1)),
    ("<THINKING>\nbuy 3\n</Thinking >\n**buy 2**", Action("buy", qty=2)),
    ("The ask is cheap.\nbuy 9\n</think>\n\nbuy 1", Action("buy", qty=1)),
    ("<think>a</think>\n<think>\nsell 4\n</think>\nquote 99 1 101 1",
     Action("quote", bid=99.0, bid_size=1, ask=101.0, ask_size=1)),
])
def test_commands_inside_think_blocks_are_not_played(reply, action):
    got = parse(reply)
    if action is None:
        assert isinstance(got, Illegal) and "outside your <think> reasoning" in got.reason
    else:
        assert got == action


def test_the_engine_plays_the_answer_after_the_reasoning():
    env = BazaarEnv(TIERS["micro"])
    env.reset(1_000_000)
    _, _, _, info = env.step("<think>\nbuy 1\n</think>")  # no answer: the free mistake
    assert not info["legal"]
    _, _, _, info = env.step("<think>\nsell 1\n</think>\npass")
    assert info["legal"] and env.transcript[-1]["action"] == "pass"

"""The text protocol parser: last command wins, prose is not a command, bad input is Illegal."""

from hypothesis import given
from hypothesis import strategies as st

from market_agents.bazaar.parser import Action, Illegal, parse


def test_last_command_wins_with_reasoning_around_it():
    text = "First I thought buy 2, but the bid is rich.\nFinal answer: **sell 1** — done."
    assert parse(text) == Action("sell", qty=1)


def test_prose_words_are_not_commands():
    assert parse("I would buy if the ask were lower, so I pass.") == Action("pass")
    assert parse("Let me sell nothing; I'll buy later? pass") == Action("pass")


def test_case_insensitive_and_quote_fields():
    assert parse("QUOTE 99.5 2 100.5 3") == Action("quote", bid=99.5, bid_size=2, ask=100.5,
                                                   ask_size=3)
    assert parse("Buy 3") == Action("buy", qty=3)


def test_no_command_is_illegal_with_reason():
    r = parse("I am not sure what to do.")
    assert isinstance(r, Illegal) and r.reason.startswith("no command found")
    assert isinstance(parse("buy two units"), Illegal)


def test_malformed_numbers_are_illegal():
    assert parse("buy 2.5") == Illegal("buy quantity must be a positive integer, got 2.5")
    assert parse("sell -1") == Illegal("sell quantity must be a positive integer, got -1")
    assert parse("buy 0") == Illegal("buy quantity must be a positive integer, got 0")
    assert parse("buy 1 2") == Illegal("buy takes one quantity, got 2 numbers")


def test_bad_quotes_are_illegal():
    assert parse("quote 99 2 101") == Illegal("quote takes 4 numbers (BP BQ AP AQ), got 3")
    assert parse("quote 101 2 99 2") == Illegal("quote bid 101 must be below ask 99")
    assert parse("quote 100 2 100 2") == Illegal("quote bid 100 must be below ask 100")
    assert isinstance(parse("quote 99 0 101 2"), Illegal)
    assert isinstance(parse("quote 99 1.5 101 2"), Illegal)
    assert isinstance(parse("quote -1 1 101 2"), Illegal)


def test_a_malformed_last_command_is_not_rescued_by_an_earlier_one():
    assert parse("buy 1 ... actually buy 2.5") == Illegal(
        "buy quantity must be a positive integer, got 2.5")


@given(st.text(max_size=200))
def test_parse_never_raises(text):
    assert isinstance(parse(text), Action | Illegal)


@given(st.text(alphabet=st.characters(categories=["L", "Zs", "P"]), max_size=80),
       st.integers(1, 10_000), st.sampled_from(["buy", "sell"]))
def test_trailing_command_after_any_prose(prose, qty, side):
    assert parse(f"{prose}\n{side} {qty}") == Action(side, qty=qty)

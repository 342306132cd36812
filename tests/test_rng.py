import numpy as np
import pytest

from market_agents.rng import Streams


def test_same_seed_same_draws():
    a = Streams(7).generator("agent", 3).random(5)
    b = Streams(7).generator("agent", 3).random(5)
    assert np.array_equal(a, b)


def test_names_and_seeds_give_different_streams():
    s = Streams(7)
    draws = {
        "a3": s.generator("agent", 3).random(4).tobytes(),
        "a4": s.generator("agent", 4).random(4).tobytes(),
        "fund": s.generator("fundamentals").random(4).tobytes(),
        "seed8": Streams(8).generator("agent", 3).random(4).tobytes(),
    }
    assert len(set(draws.values())) == 4


def test_a_stream_does_not_depend_on_others_being_used():
    s1 = Streams(1)
    s1.generator("agent", 1).random(1000)
    after = s1.generator("agent", 2).random(3)
    assert np.array_equal(after, Streams(1).generator("agent", 2).random(3))


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seed_range(seed):
    with pytest.raises(ValueError, match="out of range"):
        Streams(seed)


NAMES = [("agent", s) for s in (0, 1, 2, 7, 99, 9999, 123456)] + [
    ("fundamentals",), ("activation",), ("slots", "types"), ("mock_llm", 3, "x")]


@pytest.mark.parametrize("seed", [0, 1, 7, 2**31, 2**32 - 1])
def test_batched_generators_are_the_named_streams(seed):
    # Streams.generators computes numpy's SeedSequence for many names at once: the same
    # PCG64 state, so the same draws, as one generator(*name) at a time.
    s = Streams(seed)
    for name, batched in zip(NAMES, s.generators(NAMES), strict=True):
        one = s.generator(*name)
        assert batched.bit_generator.state == one.bit_generator.state, name
        assert np.array_equal(batched.random(3), one.random(3))
        assert batched.integers(0, 10**9) == one.integers(0, 10**9)
    slots = [5, 3, 40]
    assert [g.bit_generator.state for g in s.agents(slots)] == [
        s.agent(i).bit_generator.state for i in slots]
    assert s.generators([]) == []

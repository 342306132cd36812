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

"""The one paired-difference function behind the pilot's σ̂_d and the contract's effects."""

import math

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from market_agents.analysis.stats import paired_differences


def test_pairs_only_shared_seeds_and_drops_undefined_values():
    frame = pl.DataFrame({
        "cell": ["share_0"] * 3 + ["share_25"] * 3,
        "seed": [1, 2, 3, 1, 2, 4],
        "volatility": [1.0, 2.0, 3.0, 1.5, float("nan"), 9.0],
        "rad": [0.1, 0.2, 0.3, None, 0.5, 0.6],
    })
    out = paired_differences(frame, "share_0", ["volatility", "rad", "not_a_column"])
    assert list(out) == ["share_25"]
    row = out["share_25"]
    assert row["n_pairs"] == 2  # seeds 1 and 2; seed 4 has no control
    assert row["volatility"].to_list() == [0.5]  # NaN dropped
    assert row["rad"].to_list() == [0.3]  # null dropped
    assert "not_a_column" not in row


@given(st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), min_size=1,
                max_size=20))
def test_differences_are_treated_minus_control_seed_by_seed(pairs):
    n = len(pairs)
    frame = pl.DataFrame({"cell": ["c"] * n + ["t"] * n, "seed": list(range(n)) * 2,
                          "y": [c for c, _ in pairs] + [t for _, t in pairs]})
    d = paired_differences(frame, "c", ["y"])["t"]["y"].to_list()
    assert len(d) == n
    assert all(math.isclose(x, t - c, abs_tol=1e-9) for x, (c, t) in zip(d, pairs, strict=True))

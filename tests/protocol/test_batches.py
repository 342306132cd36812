"""How the workflow groups a design's free runs into batches, one process each
(protocol.batches.plan_batches; the records themselves: test_steps.py, pipeline/)."""

from hypothesis import example, given
from hypothesis import strategies as st

from market_agents.protocol.batches import plan_batches

cells = st.dictionaries(
    st.sampled_from([f"c{i}" for i in range(12)]),
    st.lists(st.integers(1, 40), min_size=1, max_size=30, unique=True).map(sorted),
    min_size=1, max_size=12)


@given(cells, st.integers(1, 40))
@example({f"c{i}": [1, 2, 3] for i in range(12)}, 12)  # the exploratory design's shape
def test_every_free_run_is_in_one_batch_of_at_most_runs_per_job(seeds, runs_per_job):
    batches = plan_batches(seeds, runs_per_job)
    runs = [(cell, seed) for batch_cells, chunk in batches for cell in batch_cells
            for seed in chunk]
    assert sorted(runs) == sorted((c, s) for c, ss in seeds.items() for s in ss)
    assert len(set(runs)) == len(runs)
    assert all(len(c) * len(chunk) <= runs_per_job for c, chunk in batches)
    order = list(seeds)  # a batch runs its cells in design order
    assert all(list(c) == sorted(c, key=order.index) for c, _ in batches)
    for cell, cell_seeds in seeds.items():  # as few chunks as fit, of even sizes
        sizes = [len(chunk) for c, chunk in batches if cell in c]
        assert len(sizes) == -(-len(cell_seeds) // runs_per_job)
        assert max(sizes) - min(sizes) <= 1


def test_cells_with_the_same_seeds_share_a_batch():
    exploratory = {f"c{i}": [1, 2, 3] for i in range(14)}
    assert [len(c) for c, _ in plan_batches(exploratory, 12)] == [4, 4, 3, 3]
    assert plan_batches(exploratory, 2)[0] == (("c0",), (1, 2))  # a cell split, never mixed
    # the confirmatory control's 30 seeds beside a cell of 3: three chunks of 10, the chunk of
    # another seed set in a batch of its own
    mixed = plan_batches({"share_0": list(range(101, 131)), "x": [101, 102, 103]}, 12)
    assert [(c, (s[0], s[-1])) for c, s in mixed] == [
        (("share_0",), (101, 110)), (("share_0",), (111, 120)), (("share_0",), (121, 130)),
        (("x",), (101, 103))]

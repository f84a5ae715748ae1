"""Hubs-first vertex numbering for ParMETIS (pure parts)."""
from __future__ import annotations

import numpy as np
import pytest

from distpart.ordering import NUM_BUCKETS, degree_group, hubs_first_ids
from distpart.readers import block_bounds


def test_degree_groups_put_hubs_first():
    g = degree_group(np.array([0, 1, 2, 3, 1000, 10**9]))
    assert g[5] < g[4] < g[3] < g[2] < g[1] < g[0] == NUM_BUCKETS - 1
    assert degree_group(np.array([1000, 1001]))[0] == degree_group(np.array([1001]))[0]  # one bucket


@pytest.mark.parametrize("nranks", [1, 2, 3, 7])
def test_numbering_is_a_permutation_that_does_not_depend_on_the_ranks(nranks):
    rng = np.random.default_rng(nranks)
    degree = (rng.pareto(1.2, 5000) * 3).astype(np.int64)
    groups = degree_group(degree)
    bounds = block_bounds(len(degree), nranks)
    counts = np.stack([np.bincount(groups[bounds[r]:bounds[r + 1]], minlength=NUM_BUCKETS)
                       for r in range(nranks)])
    new = np.concatenate([hubs_first_ids(groups[bounds[r]:bounds[r + 1]], counts, r) for r in range(nranks)])
    assert np.array_equal(np.sort(new), np.arange(len(degree)))
    # Hubs first; within a group, original order.
    expected = np.empty(len(degree), np.int64)
    expected[np.lexsort((np.arange(len(degree)), groups))] = np.arange(len(degree))
    assert np.array_equal(new, expected)

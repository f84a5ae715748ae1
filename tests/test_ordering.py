"""Hubs-first vertex numbering for ParMETIS (pure parts)."""
from __future__ import annotations

import numpy as np
import pytest

from distpart.assign.ordering import NUM_BUCKETS, degree_group, hubs_first_ids
from distpart.chunked.readers import block_bounds


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


@pytest.mark.parametrize("nranks", [1, 2, 3, 5])
def test_row_blocks_balance_the_load_and_agree_with_a_serial_computation(nranks):
    from distpart.assign.ordering import boundary_candidates, load_before
    rng = np.random.default_rng(10 + nranks)
    degree = (rng.pareto(1.0, 3000) * 2).astype(np.int64)
    degree[17] = 40_000                      # one hub heavier than a rank's share
    load = degree + 1
    groups = degree_group(degree)
    bounds = block_bounds(len(degree), nranks)
    counts = np.stack([np.bincount(groups[bounds[r]:bounds[r + 1]], minlength=NUM_BUCKETS) for r in range(nranks)])
    loads = np.stack([np.bincount(groups[bounds[r]:bounds[r + 1]], weights=load[bounds[r]:bounds[r + 1]],
                                  minlength=NUM_BUCKETS).astype(np.int64) for r in range(nranks)])
    new = [hubs_first_ids(groups[bounds[r]:bounds[r + 1]], counts, r) for r in range(nranks)]
    before = [load_before(groups[bounds[r]:bounds[r + 1]], load[bounds[r]:bounds[r + 1]], loads, r)
              for r in range(nranks)]
    # Serial: the loads in hubs-first order and their exclusive prefix sums.
    all_new = np.concatenate(new)
    in_order = np.empty(len(degree), np.int64)
    in_order[all_new] = load
    prefix = np.concatenate([[0], np.cumsum(in_order)[:-1]])
    assert np.array_equal(np.concatenate(before), prefix[all_new])
    cands = np.stack([boundary_candidates(new[r], before[r], int(load.sum()), nranks, len(degree))
                      for r in range(nranks)])
    starts = np.concatenate([[0], cands.min(axis=0), [len(degree)]])
    assert (np.diff(starts) >= 0).all()
    for k in range(1, nranks):   # block k starts at the first vertex whose load-before reaches k/R
        target = k * int(load.sum()) // nranks
        assert starts[k] == np.searchsorted(prefix, target, side="left")

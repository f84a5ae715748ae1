"""Vertex blocks cut by load (`adjacency.cut_by_load`, `load_histogram`): pure parts."""
from __future__ import annotations

import numpy as np
import pytest

from distpart.assign.adjacency import LOAD_BUCKETS, cut_by_load, load_histogram


def _skewed_degrees(n: int, seed: int) -> np.ndarray:
    """Power-law degrees, highest first (hubs have the lowest IDs, as RMAT's do)."""
    rng = np.random.default_rng(seed)
    return np.sort((rng.pareto(1.1, n) * 4).astype(np.int64))[::-1].copy()


@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 7])
def test_blocks_hold_equal_load_where_equal_sizes_do_not(nranks):
    degree = _skewed_degrees(5000, nranks)
    ids = np.repeat(np.arange(len(degree)), degree)     # one adjacency entry per unit of degree
    bounds = cut_by_load(load_histogram(ids, len(degree)), len(degree), nranks)
    assert bounds[0] == 0 and bounds[-1] == len(degree) and np.all(np.diff(bounds) >= 0)
    load = degree + 1
    per_rank = np.add.reduceat(load, bounds[:-1]) if nranks > 1 else np.array([load.sum()])
    per_rank[np.diff(bounds) == 0] = 0
    assert per_rank.sum() == load.sum()
    # Below 1/R of the total by at most one vertex's load (each vertex is its own range here).
    assert per_rank.max() <= load.sum() / nranks + load.max(), (bounds, per_rank)
    # Exactly where the serial definition puts them: the first vertex whose load before it
    # reaches k/R of the total.
    before = np.cumsum(load) - load
    for k in range(1, nranks):
        assert bounds[k] == np.argmax(before >= k * load.sum() // nranks), k
    if nranks > 1:   # the graph is skewed: equal-size blocks are far from equal load
        equal = np.linspace(0, len(degree), nranks + 1).astype(np.int64)
        assert np.add.reduceat(load, equal[:-1]).max() > 1.5 * per_rank.max()


def test_large_graphs_cut_on_histogram_ranges():
    n = 10 * LOAD_BUCKETS + 123                      # width 11: a range of 11 IDs per bucket
    width = -(-n // LOAD_BUCKETS)
    rng = np.random.default_rng(3)
    ids = np.minimum((rng.pareto(1.5, 400_000) * 50).astype(np.int64), n - 1)
    hist = load_histogram(ids, n)
    assert len(hist) == -(-n // width) and hist.sum() == len(ids)
    bounds = cut_by_load(hist, n, 4)
    assert np.all(bounds[1:-1] % width == 0) and bounds[-1] == n
    load = np.bincount(ids, minlength=n) + 1
    per_rank = np.add.reduceat(load, bounds[:-1])
    biggest_range = int(np.add.reduceat(load, np.arange(0, n, width)).max())
    assert per_rank.max() <= load.sum() / 4 + biggest_range, per_rank


def test_an_empty_graph_has_empty_blocks():
    assert cut_by_load(load_histogram(np.empty(0, np.int64), 0), 0, 3).tolist() == [0, 0, 0, 0]

"""The Chung-Lu graph with planted communities (synthetic.graph_models.chung_lu), the
benchmarks' power-law community graph: intra-community share, power-law degrees, equal
communities with hubs in each, determinism, written through the chunk writer."""
from __future__ import annotations

import numpy as np
import pytest

from distpart.synthetic import community_graph, read_whole_graph
from distpart.synthetic.graph_models import chung_lu, chung_lu_communities


def _edges(n: int, m: int, communities: int, mixing: float, seed: int = 1):
    return chung_lu(communities, mixing)(np.random.default_rng(seed), "_N:_E:_N", n, n, 0, m, seed)


def test_edges_stay_in_their_community_but_for_the_mixing_share():
    n, m, k = 20_000, 200_000, 20
    src, dst = _edges(n, m, k, 0.15)
    community = chung_lu_communities(n, k, "_N", 1)
    inside = (community[src] == community[dst]).mean()
    # 85% placed inside, plus the mixed edges that land inside by chance (1/k of them).
    assert abs(inside - (0.85 + 0.15 / k)) < 0.01
    assert np.bincount(community).tolist() == [n // k] * k
    degree = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    assert degree.max() > 50 * degree.mean()          # power law: hubs far above the mean
    hubs = np.argsort(degree)[-k * 5:]
    assert len(np.unique(community[hubs])) > k // 2   # hubs spread over the communities


def test_deterministic_and_ids_carry_no_community():
    a, b = _edges(5000, 20_000, 10, 0.1, seed=3), _edges(5000, 20_000, 10, 0.1, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    community = chung_lu_communities(5000, 10, "_N", 3)
    # Relabelled: consecutive IDs are not in one community.
    assert (community[:-1] == community[1:]).mean() < 0.2


def test_refusals():
    with pytest.raises(ValueError, match="one node type"):
        chung_lu(4)(np.random.default_rng(0), "a:r:b", 10, 10, 0, 5, 0)
    with pytest.raises(ValueError, match="mixing"):
        chung_lu(4, mixing=1.5)


def test_community_graph_writes_the_model(tmp_path):
    meta = community_graph(tmp_path / "g", 3000, 20_000, communities=10, num_chunks=3, seed=2)
    src, dst = read_whole_graph(meta)["edges"]["_N:_E:_N"]
    assert len(src) == 20_000 and src.max() < 3000 and dst.max() < 3000
    community = chung_lu_communities(3000, 10, "_N", 2)
    assert (community[src] == community[dst]).mean() > 0.8

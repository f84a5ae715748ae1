"""Edge models of synthetic benchmark graphs (no MPI)."""
from __future__ import annotations

import json

import numpy as np

from distpart.synthetic.graph_models import relabel, rmat, rmat_pairs, torus
from distpart.synthetic import mesh_graph, read_whole_graph, rmat_graph


def test_rmat_is_skewed_and_in_range():
    rng = np.random.default_rng(0)
    src, dst = rmat_pairs(rng, 5000, 3000, 200_000)
    assert src.min() >= 0 and src.max() < 5000 and dst.min() >= 0 and dst.max() < 3000
    deg = np.bincount(src, minlength=5000)
    # Graph500's parameters: the busiest node has hundreds of times the mean degree, and
    # many nodes have none.
    assert deg.max() > 100 * deg.mean() and (deg == 0).sum() > 500
    # Before relabelling the hubs have the smallest IDs; after it they are anywhere.
    assert deg[:50].sum() > deg[-50:].sum() * 20
    model = rmat()
    s2, _ = model(np.random.default_rng(0), "a:r:b", 5000, 3000, 0, 200_000, 7)
    assert np.array_equal(np.sort(np.bincount(s2, minlength=5000)), np.sort(deg))


def test_relabel_is_a_fixed_bijection_per_node_type():
    ids = np.arange(1000)
    a = relabel(ids, 1000, "user", 1)
    assert np.array_equal(np.sort(a), ids)
    assert np.array_equal(a, relabel(ids, 1000, "user", 1))
    assert not np.array_equal(a, relabel(ids, 1000, "item", 1))


def test_torus_has_degree_four_and_chunks_are_independent():
    n = 1000
    whole = torus(None, "v:e:v", n, n, 0, 2 * n, 3)
    deg = np.bincount(np.concatenate(whole), minlength=n)
    assert (deg == 4).all()
    parts = [torus(None, "v:e:v", n, n, a, b - a, 3) for a, b in ((0, 700), (700, 1500), (1500, 2000))]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), whole[0])
    assert np.array_equal(np.concatenate([p[1] for p in parts]), whole[1])


def test_rmat_and_mesh_graphs_are_chunked_and_deterministic(tmp_path):
    meta = rmat_graph(tmp_path / "r", 3000, 20_000, num_chunks=3, seed=4)
    again = rmat_graph(tmp_path / "r2", 3000, 20_000, num_chunks=3, seed=4)
    doc = json.loads(meta.read_text())
    assert doc["node_type"] == ["user", "item"] and len(doc["edge_type"]) == 3
    assert sum(sum(c) for c in doc["num_edges_per_chunk"]) == 20_000
    g, h = read_whole_graph(meta), read_whole_graph(again)
    for etype, (src, dst) in g["edges"].items():
        assert np.array_equal(src, h["edges"][etype][0]) and np.array_equal(dst, h["edges"][etype][1])
    mesh = read_whole_graph(mesh_graph(tmp_path / "m", 500, num_chunks=4))
    (src, dst), = mesh["edges"].values()
    assert len(src) == 1000 and (np.bincount(np.concatenate([src, dst]), minlength=500) == 4).all()

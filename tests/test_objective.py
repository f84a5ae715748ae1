"""`--objective fetch`'s edge weights (assign.objective) on one process (COMM_SELF), against
the model of its docstring computed edge by edge in plain Python; and the refusals."""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from mpi4py import MPI

from distpart.assign.adjacency import build_csr
from distpart.assign.objective import FETCH_SCALE, FIXED_BITS, Objective, check_objective, fetch_edge_weights
from distpart.chunked.metadata import load_metadata
from distpart.errors import InputError
from distpart.synthetic import EdgeTypeSpec, FeatureSpec, NodeTypeSpec, read_whole_graph, write_chunked_graph

COMM = MPI.COMM_SELF


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """Two node types, three edge types (one into each type and one back), a train mask on 'a'."""
    root = tmp_path_factory.mktemp("objective")
    path = write_chunked_graph(root / "g", [NodeTypeSpec("a", 60), NodeTypeSpec("b", 40)],
                               [EdgeTypeSpec("a:r:b", 300), EdgeTypeSpec("b:s:a", 200), EdgeTypeSpec("a:t:a", 150)],
                               [FeatureSpec("a", "train_mask", "bool")], num_chunks=2, seed=3)
    return load_metadata(path)


def model_weights(meta, fanouts, batch_size):
    """The docstring's model, edge by edge: {(u, v): weight} of the symmetric graph."""
    whole = read_whole_graph(meta.path)
    offsets = {"a": 0, "b": 60}
    edges = []   # (u, v, etype) in homogeneous IDs
    for name, (s, d) in whole["edges"].items():
        st, _, dt = name.split(":")
        edges += [(int(x) + offsets[st], int(y) + offsets[dt], name) for x, y in zip(s, d)]
    train = np.asarray(whole["node_feats"][("a", "train_mask")]).reshape(-1)
    one = 1 << FIXED_BITS
    batches = float(max(1, -(-int(train.sum()) // batch_size)) * one)
    indeg = defaultdict(int)
    for u, v, e in edges:
        indeg[(v, e)] += 1
    seeds = defaultdict(int, {i: one for i in range(60) if train[i]})
    sampled = [0] * len(edges)
    for f in reversed(fanouts):
        layer = [math.floor(seeds[v] * min(1.0, f / indeg[(v, e)])) for u, v, e in edges]
        incoming = defaultdict(int)
        for (u, _, _), w in zip(edges, layer):
            incoming[u] += w
        sampled = [a + b for a, b in zip(sampled, layer)]
        seeds = defaultdict(int, {x: math.floor(batches * -math.expm1(-(seeds[x] + incoming[x]) / batches))
                                  for x in range(100)})
    expected = defaultdict(int)
    for (u, _, _), w in zip(edges, sampled):
        expected[u] += w
    weights = defaultdict(int)
    for (u, v, _), w in zip(edges, sampled):
        if u == v:
            continue
        lam = expected[u]
        share = math.floor(batches * -math.expm1(-lam / batches)) / lam if lam > 0 else 0.0
        directed = 1 + math.floor(FETCH_SCALE * w * share / one)
        weights[(u, v)] += directed
        weights[(v, u)] += directed
    return weights


@pytest.mark.parametrize("fanouts, batch_size", [((2, 3), 5), ((10, 25), 1000), ((4,), 2)])
def test_weights_follow_the_sampling_model(graph, fanouts, batch_size):
    csr = build_csr(COMM, graph)
    weights = fetch_edge_weights(COMM, graph, csr, Objective("fetch", ("a/train_mask",), fanouts, batch_size))
    want = model_weights(graph, fanouts, batch_size)
    rows = np.repeat(np.arange(100), np.diff(csr.xadj))
    got = {(int(r), int(c)): int(w) for r, c, w in zip(rows, csr.adjncy, weights)}
    assert got == dict(want)
    assert weights.min() >= 1 and weights.max() > 1


def test_an_edge_into_a_training_node_outweighs_one_far_from_them(graph):
    """Edges at training nodes are sampled every epoch, the others only in the second layer
    (or never): lighter on average, and the never-sampled ones weigh 1."""
    csr = build_csr(COMM, graph)
    weights = fetch_edge_weights(COMM, graph, csr, Objective("fetch", ("a/train_mask",), (10, 25), 5))
    train = np.asarray(read_whole_graph(graph.path)["node_feats"][("a", "train_mask")]).reshape(-1).astype(bool)
    rows = np.repeat(np.arange(100), np.diff(csr.xadj))
    near = np.isin(rows, np.flatnonzero(train))
    assert weights[near].mean() > 1.3 * weights[~near].mean() and (weights[~near] == 1).any()


@pytest.mark.parametrize("objective, message", [
    (Objective("fetch"), "--objective fetch needs the training nodes"),
    (Objective("fetch", ("a/nope",)), "--train-mask a/nope: no node feature 'nope' of node type 'a'"),
    (Objective("fetch", ("c/train_mask",)), "no node feature 'train_mask' of node type 'c'"),
    (Objective("fetch", ("a/train_mask",), batch_size=0), "--batch-size must be at least 1"),
])
def test_refusals(graph, objective, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        check_objective(graph, objective)

"""Coarsening of the multilevel method (assign/multilevel/coarsen): the pure helpers against
brute force, and cluster/contract/coarsen on one rank (COMM_SELF) against a serial
recomputation. The same on 1, 2 and 4 ranks: mpi_tests/test_mpi_ml_coarsen.py."""
from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from distpart.arrays import pair_bits, sum_keys, sum_pairs, sum_sorted_runs
from distpart.assign.multilevel.coarsening import cluster, cluster_cap, coarsen, contract
from distpart.assign.multilevel.coarsening.clustering import admit, batch_of, best_moves, pack_groups, round_key
from distpart.assign.multilevel.graph import Halo, LevelGraph

COMM = MPI.COMM_SELF


def rows_of(g) -> np.ndarray:
    """Local row index of every adjacency entry of a LevelGraph."""
    return np.repeat(np.arange(g.nlocal, dtype=np.int64), np.diff(g.xadj))


def level_graph(n: int, u: np.ndarray, v: np.ndarray, w: np.ndarray, vwgt: np.ndarray) -> LevelGraph:
    """One rank's LevelGraph of the undirected graph (u, v, w), duplicates summed."""
    keep = u != v
    a, b = np.concatenate([u[keep], v[keep]]), np.concatenate([v[keep], u[keep]])
    ww = np.concatenate([w[keep], w[keep]])
    key, inv = np.unique(a * n + b, return_inverse=True)
    wsum = np.bincount(inv, weights=ww).astype(np.int64)
    xadj = np.concatenate([[0], np.cumsum(np.bincount(key // n, minlength=n))])
    return LevelGraph(np.array([0, n]), xadj, key % n, wsum, vwgt).with_totals(COMM)


def community_graph(n: int = 3000, m: int = 12000, seed: int = 0, isolated: int = 100) -> LevelGraph:
    rng = np.random.default_rng(seed)
    span = n // 30
    u = rng.integers(0, n - isolated, m)
    near = np.minimum((u // span) * span + rng.integers(0, span, m), n - isolated - 1)
    v = np.where(rng.random(m) < 0.85, near, rng.integers(0, n - isolated, m))
    w = rng.integers(1, 4, m)
    vwgt = np.column_stack([np.ones(n, np.int64), rng.integers(0, 2, n), rng.integers(1, 5, n)])
    return level_graph(n, u, v, w, vwgt)


# ---------------------------------------------------------------- pure helpers

@pytest.mark.parametrize("w_high, a_max", [(10, 1000), (1 << 40, 1000), (5, 1 << 40)])
def test_sum_pairs_matches_unique_on_every_path(w_high, a_max):
    # Small weights take the packed sort, huge weights the argsort, huge IDs the lexsort.
    rng = np.random.default_rng(1)
    a = rng.integers(0, 50, 5000) * (a_max // 50)
    b = rng.integers(0, 40, 5000)
    w = rng.integers(0, w_high, 5000)
    ua, ub, uw = sum_pairs(a, b.astype(np.int32), w, a_max, 40)   # 32-bit rows are allowed
    key, inv = np.unique(np.stack([a, b], 1), axis=0, return_inverse=True)
    want = np.zeros(len(key), dtype=np.int64)
    np.add.at(want, inv.ravel(), w)
    assert np.array_equal(ua, key[:, 0]) and np.array_equal(ub, key[:, 1]) and np.array_equal(uw, want)



@pytest.mark.parametrize("w_high", [10, 1 << 40])
def test_sum_keys_matches_unique_on_both_paths(w_high):
    # Small weights take the packed sort, huge weights the argsort.
    rng = np.random.default_rng(2)
    key = rng.integers(0, 300, 5000) * 1000
    w = rng.integers(0, w_high, 5000)
    got_key, got_w = sum_keys(key, w, 300 * 1000)
    want_key, inv = np.unique(key, return_inverse=True)
    want = np.zeros(len(want_key), dtype=np.int64)
    np.add.at(want, inv, w)
    assert np.array_equal(got_key, want_key) and np.array_equal(got_w, want)
    assert pair_bits(1000, 40) == 6 and pair_bits(1 << 40, 1 << 30) is None


def test_sum_sorted_runs_equals_sum_keys_of_their_concatenation():
    rng = np.random.default_rng(3)
    runs = [np.sort(rng.integers(0, 500, size)) for size in (0, 1, 37, 400, 999)]
    ws = [rng.integers(0, 9, len(r)) for r in runs]
    want = sum_keys(np.concatenate(runs), np.concatenate(ws), 499)
    for piece in (1, 7, 50, 10_000):   # slices of a few keys up to one slice for all
        got = sum_sorted_runs(runs, ws, 499, piece)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert all(len(a) == 0 for a in sum_sorted_runs([runs[0]], [ws[0]], 499, 4))

def test_best_moves_prefers_heaviest_fitting_then_staying_then_smaller_label():
    # Row 0: own cluster 7 (weight 3); 5 and 9 weigh 4; 9 does not fit -> moves to 5, gain 1.
    # Row 1: own cluster 2 (weight 4) ties with 3 (weight 4) -> stays.
    # Row 2: no own connection; 8 and 6 weigh 2 -> the smaller label, 6, gain 2.
    # Row 3: only a cluster that does not fit -> stays.
    row = np.array([0, 0, 0, 1, 1, 2, 2, 3])
    lab = np.array([5, 7, 9, 2, 3, 6, 8, 4])
    w = np.array([4, 3, 5, 4, 4, 2, 2, 9])
    fits = np.array([True, True, False, True, True, True, True, False])
    rows, target, gain = best_moves(row, lab, w, np.array([7, 2, 11, 12]), fits)
    assert rows.tolist() == [0, 2] and target.tolist() == [5, 6] and gain.tolist() == [1, 2]


def test_admit_is_a_prefix_by_gain_then_id():
    # Cluster 0 (weight 6, cap 10): by gain then ID the order is ids 3 (w 2), 1 (w 2), 2 (w 1),
    # 4 (w 3): 6+2+2 = 10 fits, +1 exceeds, so 2 is refused and so is 4 behind it (a prefix).
    # Cluster 1 is blocked: its request is refused although it would fit.
    to = np.array([0, 0, 0, 0, 1])
    gain = np.array([5, 7, 5, 1, 9])
    gid = np.array([1, 3, 2, 4, 8])
    w = np.array([[2], [2], [1], [3], [1]])
    current = np.array([[6], [6], [6], [6], [0]])
    ok = admit(to, gain, gid, w, current, np.array([10]), np.array([False] * 4 + [True]))
    assert ok.tolist() == [True, True, False, False, False]


def test_admit_needs_every_constraint():
    ok = admit(np.array([0, 0]), np.array([2, 1]), np.array([0, 1]), np.array([[1, 0], [0, 1]]),
               np.array([[0, 5], [0, 5]]), np.array([3, 5]), np.zeros(2, bool))
    assert ok.tolist() == [True, False]


def greedy_chunks(group, w, cap):
    """The serial greedy: a chunk takes the next item of its group while it fits."""
    head, acc = np.empty(len(group), np.int64), None
    for i in range(len(group)):
        if i == 0 or group[i] != group[i - 1] or np.any(acc + w[i] > cap):
            start, acc = i, np.zeros_like(w[i])
        acc = acc + w[i]
        head[i] = start
    return head


def test_pack_groups_is_the_serial_greedy():
    rng = np.random.default_rng(2)
    group = np.sort(rng.integers(-3, 6, 3000))
    w = rng.integers(0, 4, (3000, 2))
    cap = np.array([20, 25])
    head = pack_groups(group, w, cap)
    assert np.array_equal(head, greedy_chunks(group, w, cap))
    assert np.array_equal(pack_groups(group[:1], w[:1], cap), [0]) and len(pack_groups(group[:0], w[:0], cap)) == 0


def test_batches_depend_on_global_ids_only():
    key = round_key(7, 2, 1)
    ids = np.arange(10_000)
    whole = batch_of(ids, key, 4)
    assert np.array_equal(np.concatenate([batch_of(ids[:3333], key, 4), batch_of(ids[3333:], key, 4)]), whole)
    assert np.all(np.abs(np.bincount(whole, minlength=4) - 2500) < 200)
    assert not np.array_equal(batch_of(ids, round_key(7, 2, 2), 4), whole)


def test_cluster_cap_is_eps_over_k_but_at_least_the_heaviest_vertex():
    assert cluster_cap(np.array([400_000, 100]), 4, np.array([1, 7]), eps=0.03).tolist() == [3000, 7]


# ---------------------------------------------------------------- one rank

def contraction_by_hand(g: LevelGraph, f2c: np.ndarray, nc: int):
    rows = rows_of(g)
    cu, cv = f2c[rows], f2c[g.adjncy]
    keep = cu != cv
    key, inv = np.unique(cu[keep] * nc + cv[keep], return_inverse=True)
    w = np.zeros(len(key), np.int64)
    np.add.at(w, inv, g.adjwgt[keep])
    vw = np.zeros((nc, g.ncon), np.int64)
    np.add.at(vw, f2c, g.vwgt)
    return key // nc, key % nc, w, vw


def test_cluster_and_contract_on_one_rank():
    g = community_graph()
    halo = Halo.build(COMM, g)
    cap = cluster_cap(g.total, 8, g.vwgt.max(axis=0))
    labels = cluster(COMM, g, halo, cap, seed=3, level=0)
    names, inv = np.unique(labels, return_inverse=True)
    weight = np.zeros((len(names), g.ncon), np.int64)
    np.add.at(weight, inv, g.vwgt)
    assert np.all(weight <= cap)
    assert len(names) < g.n // 4          # it clusters
    coarse, f2c = contract(COMM, g, halo, labels)
    assert np.array_equal(f2c, inv)        # coarse IDs: rank of the label
    assert coarse.n == len(names) and np.array_equal(coarse.vtxdist, [0, len(names)])
    cu, cv, w, vw = contraction_by_hand(g, f2c, coarse.n)
    assert np.array_equal(rows_of(coarse), cu) and np.array_equal(coarse.adjncy, cv)
    assert np.array_equal(coarse.adjwgt, w) and np.array_equal(coarse.vwgt, vw)
    assert np.array_equal(coarse.total, g.total)
    # Contracting the rows in small pieces (each reduced, then merged) changes nothing, with
    # an edge's ends packed in one key or (the path past 2**31 coarse vertices) kept apart.
    for packed in (True, False):
        small, f2c_small = contract(COMM, g, halo, labels, piece=1000, packed=packed)
        assert np.array_equal(f2c_small, f2c) and np.array_equal(small.xadj, coarse.xadj)
        assert np.array_equal(small.adjncy, coarse.adjncy) and np.array_equal(small.adjwgt, coarse.adjwgt)


def test_isolated_and_rejected_vertices_are_grouped():
    # A star with 200 leaves and room for 40 per cluster: LP fills the hub's cluster, the
    # other leaves want it too and are packed together two hops apart; 50 isolated vertices
    # are packed by ID.
    n = 251
    u, v = np.zeros(200, np.int64), np.arange(1, 201)
    g = level_graph(n, u, v, np.ones(200, np.int64), np.ones((n, 1), np.int64))
    labels = cluster(COMM, g, Halo.build(COMM, g), np.array([40]), seed=0, level=0)
    names, counts = np.unique(labels, return_counts=True)
    assert counts.max() <= 40
    assert len(names) <= 8                   # 251 / 40 rounded up, plus a little slack
    assert sorted(counts[names > 200].tolist()) == [10, 40]   # 50 isolated vertices


def test_grouping_lonely_vertices_stops_near_the_target():
    # 2000 isolated vertices, 10 to a chunk: packing all would leave 200 clusters; with a
    # target of 1000 about half the chunks are formed, the others stay single vertices.
    n = 2000
    g = LevelGraph(np.array([0, n]), np.zeros(n + 1, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
                   np.ones((n, 1), np.int64)).with_totals(COMM)
    halo = Halo.build(COMM, g)
    assert len(np.unique(cluster(COMM, g, halo, np.array([10]), seed=0, level=0))) == 200
    left = len(np.unique(cluster(COMM, g, halo, np.array([10]), seed=0, level=0, stop_at=1000)))
    assert 850 <= left <= 1150, left


def test_coarsen_reaches_the_target_and_maps_compose():
    g = community_graph(n=4000, m=20000, seed=4)
    levels, maps = coarsen(COMM, g, 4, seed=1, target=400)
    assert levels[0] is g and len(maps) == len(levels) - 1 >= 1
    assert 200 <= levels[-1].n <= 400
    cap = cluster_cap(g.total, 4, g.vwgt.max(axis=0))
    for fine, coarse, m in zip(levels, levels[1:], maps):
        assert np.array_equal(coarse.total, g.total) and len(m) == fine.n
        assert np.all(coarse.vwgt <= cap)
        cu, cv, w, vw = contraction_by_hand(fine, m, coarse.n)
        assert np.array_equal(rows_of(coarse), cu) and np.array_equal(coarse.adjncy, cv) and np.array_equal(coarse.adjwgt, w)
        assert np.array_equal(coarse.vwgt, vw)
    _, again_maps = coarsen(COMM, g, 4, seed=1, target=400)
    assert all(np.array_equal(a, b) for a, b in zip(maps, again_maps))

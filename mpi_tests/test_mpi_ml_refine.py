"""Jet and the multi-constraint rebalancer under MPI: the same partition for R = 1, 2 and 4.

This file is also the worker: `mpiexec -n R python test_mpi_ml_refine.py OUT` builds, on every
rank, a small RMAT-like graph and a 2-D grid from fixed seeds, keeps its block of rows of the
symmetrized simple graph, weighs the vertices with three constraints (ones; a 0/1 type
column correlated with the structure; a sparse 0/1 train column), starts from a random
partition, runs `rebalance` then `jet`, and writes its rows of the result. A third case,
the RMAT graph with two random types each balanced in node count and in-degree, is where
Jet needs the rebalancer's exchanges (`swap_state`) and its constrained mode: the worker
counts what the exchanges moved and which iterations were constrained. The test checks the
result against cuts and weights counted here, serially.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from graphs import grid_edges
from harness import RANKS, mpirun, start_early

K = 4
IMBALANCE = 1.05


def rmat_edges(scale: int, m: int, seed: int) -> "tuple[int, np.ndarray]":
    """An R-MAT graph's sampled edges (a, b, c = 0.57, 0.19, 0.19), vertex IDs shuffled."""
    rng = np.random.default_rng(seed)
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for _ in range(scale):
        r = rng.random(m)
        src = (src << 1) | (r >= 0.76)
        dst = (dst << 1) | (((r >= 0.57) & (r < 0.76)) | (r >= 0.95))
    perm = rng.permutation(1 << scale)
    return 1 << scale, np.stack([perm[src], perm[dst]], 1)


def simple(n: int, edges: np.ndarray) -> np.ndarray:
    """Sorted keys src * n + dst of the symmetrized graph without loops or duplicates."""
    s, d = np.concatenate([edges[:, 0], edges[:, 1]]), np.concatenate([edges[:, 1], edges[:, 0]])
    keep = s != d
    return np.unique(s[keep] * n + d[keep])


NAMES = ("rmat", "grid", "indegree")


def case(name: str) -> "tuple[int, np.ndarray, np.ndarray]":
    """(n, sorted symmetric arc keys, vertex weights) of a test graph."""
    if name in ("rmat", "indegree"):
        n, edges = rmat_edges(12, 40_000, seed=11)
    else:
        n, edges = 64 * 64, grid_edges(64, 64)
    keys = simple(n, edges)
    rng = np.random.default_rng(12)
    if name == "indegree":
        # Two random types, each balanced in node count and in in-degree (as --balance-ntypes
        # --balance-edges do): where the exchanges of `swap_state` are needed.
        typ = rng.random(n) < 0.4
        indeg = np.bincount(edges[:, 1], minlength=n)
        return n, keys, np.stack([~typ, typ, np.where(typ, 0, indeg), np.where(typ, indeg, 0)], 1).astype(np.int64)
    # Types: on the grid a band of rows (a constraint that follows the structure); on RMAT at
    # random (there a type that follows the core costs Jet half of its gain).
    typ = np.arange(n) < 0.3 * n if name == "grid" else rng.random(n) < 0.3
    vwgt = np.stack([np.ones(n), typ, rng.random(n) < 0.05], 1).astype(np.int64)
    return n, keys, vwgt


def random_start(n: int, seed: int = 99) -> np.ndarray:
    from distpart.arrays import splitmix64
    return (splitmix64(np.arange(n, dtype=np.uint64) + np.uint64(seed)) % np.uint64(K)).astype(np.int64)


def worker(out: Path) -> None:
    from mpi4py import MPI

    from distpart.assign.multilevel.graph import Halo, LevelGraph, block_caps
    from distpart.assign.multilevel.refinement import jet as jet_module
    from distpart.assign.multilevel.refinement.balancer import rebalance
    from distpart.assign.multilevel.refinement.jet import jet
    from distpart.assign.multilevel.refinement.volume import volume_refine

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    exchanges = []   # vertices each call of swap_state moved (the test checks it ran)
    swap_state = jet_module.swap_state

    def counted(comm, ctx, st):
        out = swap_state(comm, ctx, st)
        exchanges.append(int(np.count_nonzero(out.ext[:ctx.g.nlocal] != st.ext[:ctx.g.nlocal])))
        return out
    jet_module.swap_state = counted
    constrained = []   # per jet_moves call: was it in constrained mode
    jet_moves = jet_module.jet_moves

    def watched(comm, ctx, st, locked, factor, capped, constrained_mode=False):
        constrained.append(constrained_mode)
        return jet_moves(comm, ctx, st, locked, factor, capped, constrained_mode)
    jet_module.jet_moves = watched
    # On this small graph the iterations end further over than Jet's bound for exchanges.
    jet_module.SWAP_MAX_OVER = float("inf")
    for name in NAMES:
        n, keys, vwgt = case(name)
        vtxdist = np.array([n * r // size for r in range(size + 1)], dtype=np.int64)
        lo, hi = int(vtxdist[rank]), int(vtxdist[rank + 1])
        a, b = np.searchsorted(keys, [lo * n, hi * n])
        src, dst = keys[a:b] // n, keys[a:b] % n
        xadj = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(np.bincount(src - lo, minlength=hi - lo), out=xadj[1:])
        g = LevelGraph(vtxdist, xadj, dst, np.ones(len(dst), dtype=np.int64), vwgt[lo:hi]).with_totals(comm)
        halo = Halo.build(comm, g)
        caps = block_caps(g.total, K, IMBALANCE)
        parts = rebalance(comm, g, halo, random_start(n)[lo:hi], K, caps, seed=5)
        np.save(out / f"{name}-rebalanced-{rank}.npy", parts)
        np.save(out / f"{name}-vol-{rank}.npy", volume_refine(comm, g, halo, parts, K, caps, seed=5))
        # The grid runs as a coarse level would (c = 0.75, moves capped per target block).
        constrained.clear()
        parts = jet(comm, g, halo, parts, K, caps, seed=5, finest=name != "grid")
        np.save(out / f"{name}-{rank}.npy", parts)
        np.save(out / f"{name}-constrained-{rank}.npy", np.array(constrained, dtype=bool))
    np.save(out / f"exchanges-{rank}.npy", np.array(exchanges, dtype=np.int64))
    comm.Barrier()
    if rank == 0:
        print("checks: passed", flush=True)


def gathered(out: Path, stem: str, nranks: int) -> np.ndarray:
    return np.concatenate([np.load(out / f"{stem}-{r}.npy") for r in range(nranks)])


@start_early
def test_refinement_is_the_same_for_any_rank_count_and_meets_every_cap(tmp_path: Path) -> None:
    from distpart.assign.multilevel.graph import block_caps

    results = {}
    for r in RANKS:
        out = tmp_path / f"r{r}"
        out.mkdir()
        run = mpirun(r, [out], timeout=240, script=Path(__file__))
        assert run.returncode == 0 and "checks: passed" in run.stdout, run.output
        results[r] = {name: (gathered(out, f"{name}-rebalanced", r), gathered(out, name, r),
                             gathered(out, f"{name}-vol", r)) for name in NAMES}
        # The in-degree case needs exchanges, and they moved vertices (summed over ranks).
        moved = sum(np.load(out / f"exchanges-{q}.npy") for q in range(r))
        assert len(moved) and moved.sum() > 0, moved
        # ... and constrained mode: its first two iterations fail, every later one is constrained.
        modes = np.load(out / f"indegree-constrained-{0}.npy")
        assert not modes[:2].any() and modes[2:].all() and len(modes) > 3, modes
    for name in NAMES:
        for r in RANKS[1:]:
            for got, want in zip(results[r][name], results[1][name]):
                assert np.array_equal(got, want), f"{name}: R={r} differs from R=1"
        n, keys, vwgt = case(name)
        rebalanced, parts, vol = results[1][name]
        caps = block_caps(vwgt.sum(axis=0), K, IMBALANCE)
        for p in (rebalanced, parts, vol):
            weights = np.stack([np.bincount(p, weights=vwgt[:, c], minlength=K) for c in range(vwgt.shape[1])], 1)
            assert (weights <= caps).all(), (name, weights, caps)
        src, dst = keys // n, keys % n
        one_way = src < dst

        def cut(p: np.ndarray) -> int:
            return int((p[src[one_way]] != p[dst[one_way]]).sum())

        start = cut(random_start(n))
        # Random cuts 3/4 of the edges. Jet from a random start reaches about 25% on this small
        # RMAT and on the grid (the hierarchy, not tested here, is what fixes meshes).
        # In-degree balance keeps every method near 2/3 of the edges cut on RMAT.
        bound = {"grid": start / 3, "rmat": start / 2.5, "indegree": start * 0.95}[name]
        assert cut(parts) < bound, (name, cut(parts), start)
        # Jet keeps the best partition it sees; with in-degree balance only its constrained
        # iterations beat the rebalanced start (22544 -> 20818 cut edges).
        assert cut(parts) < cut(rebalanced), (name, cut(parts), cut(rebalanced))

        def volume(p: np.ndarray) -> int:   # each vertex once per other block among its neighbours
            pairs = np.unique(src * K + p[dst])
            return int(np.count_nonzero(p[pairs // K] != pairs % K))

        # The volume refinement (--objective vol) from the rebalanced random start.
        assert volume(vol) < 0.9 * volume(rebalanced), (name, volume(vol), volume(rebalanced))


if __name__ == "__main__":
    worker(Path(sys.argv[1]))

"""Multilevel coarsening gives the same hierarchy on 1, 2 and 4 ranks (RANKS), and each level
is the exact contraction of the one before.

This file is also the worker: run under mpiexec as a script, it builds a small graph with
communities, hubs, isolated vertices, two vertex-weight columns and edge weights (the same
on every rank, each rank keeping its block of rows), coarsens it, gathers every level and
map to rank 0 (buffer-based Gatherv), checks each level against a serial recomputation and
writes a digest of the hierarchy. It does the same for a torus (no hubs: clustered in pairs)
coarsened inside the blocks of a given partition, as a V-cycle does, and checks that every
cluster lies in one block, that the blocks carried to each level are those of its members,
and that no pair cluster weighs more than twice the level's heaviest vertex. The test
compares the digests across rank counts.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from harness import RANKS, mpirun, start_early

N, M, ISOLATED, K, SEED, TARGET = 6000, 30000, 150, 4, 11, 300
SIDE = 48          # the torus: SIDE x SIDE vertices, 4 neighbours each


def build_graph(comm):
    from distpart.assign.multilevel.graph import LevelGraph
    from distpart.chunked.readers import block_bounds
    rng = np.random.default_rng(2024)
    linked = N - ISOLATED
    span = linked // 40
    u = rng.integers(0, linked, M)
    near = np.minimum((u // span) * span + rng.integers(0, span, M), linked - 1)
    hubs = (rng.pareto(1.2, M) * 5).astype(np.int64) % linked   # a few heavy hubs
    pick = rng.random(M)
    v = np.where(pick < 0.7, near, np.where(pick < 0.9, hubs, rng.integers(0, linked, M)))
    w = rng.integers(1, 4, M)
    keep = u != v
    a, b = np.concatenate([u[keep], v[keep]]), np.concatenate([v[keep], u[keep]])
    key, inv = np.unique(a * N + b, return_inverse=True)
    wsum = np.zeros(len(key), np.int64)
    np.add.at(wsum, inv, np.concatenate([w[keep], w[keep]]))
    vwgt = np.column_stack([np.ones(N, np.int64), (rng.random(N) < 0.2).astype(np.int64)])
    vtxdist = block_bounds(N, comm.Get_size())
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    rows = key // N
    sel = (rows >= lo) & (rows < hi)
    xadj = np.concatenate([[0], np.cumsum(np.bincount(rows[sel] - lo, minlength=hi - lo))])
    return LevelGraph(vtxdist, xadj, key[sel] % N, wsum[sel], vwgt[lo:hi]).with_totals(comm)


def build_torus(comm):
    """A SIDE x SIDE torus, its vertices in row-major order, unit weights; and the block of
    each local vertex: 4 bands of rows whose borders zigzag (a partition that is not a
    clustering of the grid's own)."""
    from distpart.assign.multilevel.graph import LevelGraph
    from distpart.chunked.readers import block_bounds
    n = SIDE * SIDE
    vtxdist = block_bounds(n, comm.Get_size())
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    v = np.arange(lo, hi, dtype=np.int64)
    r, c = v // SIDE, v % SIDE
    nbrs = np.stack([((r + 1) % SIDE) * SIDE + c, ((r - 1) % SIDE) * SIDE + c,
                     r * SIDE + (c + 1) % SIDE, r * SIDE + (c - 1) % SIDE], axis=1)
    nbrs.sort(axis=1)
    g = LevelGraph(vtxdist, np.arange(0, 4 * (hi - lo) + 1, 4, dtype=np.int64), nbrs.reshape(-1),
                   np.ones(4 * (hi - lo), dtype=np.int64), np.ones((hi - lo, 1), dtype=np.int64))
    blocks = ((r + (c % 5 == 0)) * 4 // SIDE) % 4
    return g.with_totals(comm), blocks.astype(np.int64)


def within_blocks(comm, failures, digest) -> None:
    """coarsen_within on the torus: clusters inside blocks, blocks carried, pairs capped."""
    from distpart.assign.multilevel.coarsening import coarsen_within, mesh_like
    g, blocks = build_torus(comm)
    if not mesh_like(comm, g):
        failures.append("the torus is not mesh-like")
    levels, maps, coarse_blocks = coarsen_within(comm, g, K, SEED, blocks, cycle=1, target=TARGET)
    fine_blocks = gather(comm, blocks)
    glob_maps = [gather(comm, m) for m in maps]
    weights = [gather(comm, lv.vwgt) for lv in levels]
    last = gather(comm, coarse_blocks)
    if comm.Get_rank() != 0:
        return
    if len(levels) < 3:
        failures.append(f"torus: {len(levels)} levels, expected pairs to halve it several times")
    for i, f2c in enumerate(glob_maps):
        nc = len(weights[i + 1])
        lo_b, hi_b = np.full(nc, 99), np.full(nc, -1)
        np.minimum.at(lo_b, f2c, fine_blocks)
        np.maximum.at(hi_b, f2c, fine_blocks)
        if np.any(lo_b != hi_b):
            failures.append(f"torus level {i + 1}: {int((lo_b != hi_b).sum())} clusters span blocks")
        if np.any(weights[i + 1] > 2 * weights[i].max(axis=0)):
            failures.append(f"torus level {i + 1}: a cluster weighs {weights[i + 1].max()} > twice "
                            f"the heaviest vertex {weights[i].max()}")
        fine_blocks = lo_b
    if not np.array_equal(fine_blocks, last):
        failures.append("torus: the carried blocks of the coarsest level are not its members' blocks")
    digest["torus"] = [hashlib.sha256(m.tobytes()).hexdigest() for m in glob_maps]
    digest["torus_blocks"] = hashlib.sha256(last.tobytes()).hexdigest()


def gather(comm, arr: np.ndarray) -> np.ndarray:
    """Every rank's rows of an int64 array, concatenated in rank order, on rank 0 (elsewhere
    an empty array)."""
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    counts = comm.gather(arr.size, root=0)
    out = np.empty(sum(counts) if counts else 0, dtype=np.int64)
    comm.Gatherv(arr.reshape(-1), [out, counts] if counts else None, root=0)
    return out.reshape(-1, *arr.shape[1:])


def whole(comm, g):
    """(rows, adjncy, adjwgt, vwgt) of the whole level on rank 0."""
    return gather(comm, np.repeat(np.arange(g.nlocal, dtype=np.int64), np.diff(g.xadj)) + g.first(comm)), gather(comm, g.adjncy), gather(comm, g.adjwgt), gather(comm, g.vwgt)


def check_level(fine, coarse, f2c, cap, failures, i):
    rows, adj, adjw, vw = fine
    crow, cadj, cadjw, cvw = coarse
    nc = len(cvw)
    if sorted(set(f2c.tolist())) != list(range(nc)):
        failures.append(f"level {i}: the map does not cover 0..{nc - 1}")
        return
    cu, cv = f2c[rows], f2c[adj]
    inside = cu == cv
    key, inv = np.unique(cu[~inside] * nc + cv[~inside], return_inverse=True)
    want_w = np.zeros(len(key), np.int64)
    np.add.at(want_w, inv, adjw[~inside])
    if not (np.array_equal(crow, key // nc) and np.array_equal(cadj, key % nc) and np.array_equal(cadjw, want_w)):
        failures.append(f"level {i}: coarse edges are not the contraction of the fine ones")
    if int(cadjw.sum()) != int(adjw[~inside].sum()):
        failures.append(f"level {i}: coarse edge weight {cadjw.sum()} != cut fine weight {adjw[~inside].sum()}")
    want_vw = np.zeros_like(cvw)
    np.add.at(want_vw, f2c, vw)
    if not np.array_equal(cvw, want_vw) or not np.array_equal(cvw.sum(axis=0), vw.sum(axis=0)):
        failures.append(f"level {i}: coarse vertex weights are not the sums")
    if np.any(cvw > cap):
        failures.append(f"level {i}: a cluster weighs {cvw.max(axis=0)} > cap {cap}")


def worker(out: str) -> int:
    from mpi4py import MPI

    from distpart.assign.multilevel.coarsening import cluster_cap, coarsen
    comm = MPI.COMM_WORLD
    g = build_graph(comm)
    levels, maps = coarsen(comm, g, K, SEED, target=TARGET)
    graphs = [whole(comm, lv) for lv in levels]
    glob_maps = [gather(comm, m) for m in maps]
    failures = []
    digest = {}
    within_blocks(comm, failures, digest)
    if comm.Get_rank() == 0:
        cap = cluster_cap(g.total, K, graphs[0][3].max(axis=0))
        for i, (fine, coarse, f2c) in enumerate(zip(graphs, graphs[1:], glob_maps)):
            check_level(fine, coarse, f2c, cap, failures, i + 1)
        digest.update({"sizes": [lv.n for lv in levels], "levels": [], "maps": []})
        for arrays in graphs:
            digest["levels"].append(hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest())
        for m in glob_maps:
            digest["maps"].append(hashlib.sha256(m.tobytes()).hexdigest())
        Path(out).write_text(json.dumps(digest))
        print("\n".join(failures) or "coarsen checks: passed")
    return 1 if comm.bcast(len(failures)) else 0


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1]))


# ---------------------------------------------------------------- the test

@start_early
def test_hierarchy_is_exact_and_the_same_on_any_number_of_ranks(tmp_path):
    digests = {}
    for nranks in RANKS:
        out = tmp_path / f"digest{nranks}.json"
        run = mpirun(nranks, [out], timeout=120, script=Path(__file__))
        assert run.returncode == 0 and "coarsen checks: passed" in run.stdout, run.output
        digests[nranks] = json.loads(out.read_text())
    sizes = digests[RANKS[0]]["sizes"]
    assert sizes[0] == N and len(sizes) >= 3 and TARGET // 2 <= sizes[-1] <= TARGET, sizes
    for nranks, d in digests.items():
        assert d == digests[RANKS[0]], f"{nranks} ranks: {d} != {RANKS[0]} ranks: {digests[RANKS[0]]}"


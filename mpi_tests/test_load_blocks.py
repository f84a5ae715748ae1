"""Step 1's vertex blocks cut by load (`adjacency.load_blocks`, and the coarse levels'
`contraction`): on a graph whose hubs have the lowest IDs, every rank holds about the same
number of adjacency entries, at the finest level and at the coarse ones, and the multilevel
assignment on 2 and 4 ranks is the one of 1 rank, where the load blocks are the one block
of all vertices that equal-size blocks give too.

This file is also the worker: run under mpiexec as a script, it builds the CSR in both
blocks, checks the balance, that a contraction routes unpacked edges to the same blocks as
packed ones, runs the multilevel method (with the load blocks) and writes a digest of the
assignment. (An equal-block run beside it on every rank count would add nothing the
digests do not show: the method's output does not depend on R, test_multilevel.py.)
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from harness import RANKS, mpirun, start_early

N, M, K, SEED = 6000, 30000, 4, 3


def write_graph(folder: Path) -> Path:
    """One node type, RMAT edges not relabelled: the hubs have the lowest IDs."""
    from distpart.synthetic.graph_models import rmat_pairs
    from distpart.synthetic.writer import EdgeTypeSpec, NodeTypeSpec, write_chunked_graph

    def model(rng, canonical, n_src, n_dst, first, count, seed):
        return rmat_pairs(rng, n_src, n_dst, count)
    return write_chunked_graph(folder, [NodeTypeSpec("v", N)], [EdgeTypeSpec("v:e:v", M)], num_chunks=3,
                               seed=SEED, edge_model=model)


def spread(comm, value: int) -> float:
    """max / mean of `value` over the ranks."""
    values = np.array(comm.allgather(int(value)), dtype=np.float64)
    return float(values.max() / values.mean())


def coarse_spreads(comm, csr) -> list:
    """max / mean of the adjacency entries per rank at every coarse level of `csr`'s hierarchy."""
    from distpart.assign.multilevel.coarsening import coarsen
    from distpart.assign.multilevel.graph import LevelGraph, unit_weights
    g = LevelGraph(csr.vtxdist, csr.xadj, csr.adjncy, unit_weights(len(csr.adjncy)),
                   np.ones((len(csr.xadj) - 1, 1), dtype=np.int64)).with_totals(comm)
    levels, _ = coarsen(comm, g, K, SEED, target=800)
    return [spread(comm, lv.entries + lv.nlocal) for lv in levels[1:]]


def unpacked_differs(comm, csr) -> bool:
    """Whether contracting one clustering of `csr` with an edge's ends kept apart (the path
    past 2**31 coarse vertices, whose edges are routed by their own row array) gives another
    coarse graph, or other blocks, than with them packed."""
    from distpart.assign.multilevel.coarsening import cluster_cap
    from distpart.assign.multilevel.coarsening.clustering import cluster
    from distpart.assign.multilevel.coarsening.contraction import contract
    from distpart.assign.multilevel.graph import Halo, LevelGraph, unit_weights
    g = LevelGraph(csr.vtxdist, csr.xadj, csr.adjncy, unit_weights(len(csr.adjncy)),
                   np.ones((len(csr.xadj) - 1, 1), dtype=np.int64)).with_totals(comm)
    halo = Halo.build(comm, g)
    labels = cluster(comm, g, halo, cluster_cap(g.total, K, np.ones(1, np.int64)), SEED, 0)
    (a, fa), (b, fb) = (contract(comm, g, halo, labels, packed=p) for p in (True, False))
    same = all(np.array_equal(x, y) for x, y in [(a.vtxdist, b.vtxdist), (a.xadj, b.xadj), (a.adjncy, b.adjncy),
                                                 (a.adjwgt, b.adjwgt), (a.vwgt, b.vwgt), (fa, fb)])
    return not all(comm.allgather(same))


def assignment(comm, meta) -> np.ndarray:
    """The multilevel assignment of the whole graph (on every rank), in load blocks."""
    from distpart.assign.balance import BalanceOptions
    from distpart.assign.multilevel import partitioner
    from distpart.assign.step1 import run_method
    from distpart.run.progress import Progress
    result = run_method(comm, meta, K, BalanceOptions(edges=True), partitioner, SEED, 1 << 26, Progress.off())
    return np.concatenate(comm.allgather(result.blocks["v"].parts))


def worker(graph: str, out: str) -> int:
    from mpi4py import MPI

    from distpart.assign.adjacency import build_csr, load_blocks
    from distpart.chunked.metadata import load_metadata
    comm = MPI.COMM_WORLD
    meta = load_metadata(Path(graph) / "metadata.json")
    failures = []
    equal = build_csr(comm, meta)
    loaded = build_csr(comm, meta, blocks=load_blocks(comm, meta))
    equal_spread = spread(comm, equal.xadj[-1] + len(equal.xadj) - 1)
    load_spread = spread(comm, loaded.xadj[-1] + len(loaded.xadj) - 1)
    if comm.Get_size() > 1:
        if equal_spread < 1.3:
            failures.append(f"the graph is not skewed: equal-size blocks hold max/mean {equal_spread:.2f} entries")
        if load_spread > 1.1:
            failures.append(f"load blocks: max/mean {load_spread:.2f} entries per rank (equal-size {equal_spread:.2f})")
        if unpacked_differs(comm, loaded):
            failures.append("contraction with unpacked edges differs from the packed one")
        levels = coarse_spreads(comm, loaded)
        if not levels or max(levels) > 1.15:
            failures.append(f"coarse levels: max/mean entries per rank {levels}")
    parts = assignment(comm, meta)
    if comm.Get_rank() == 0:
        Path(out).write_text(json.dumps({"parts": hashlib.sha256(parts.tobytes()).hexdigest(),
                                         "sizes": np.bincount(parts, minlength=K).tolist()}))
        print("\n".join(failures) or "load blocks checks: passed")
    return 1 if comm.bcast(len(failures)) else 0


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1], sys.argv[2]))


# ---------------------------------------------------------------- the test

@start_early
def test_blocks_hold_equal_load_and_leave_the_assignment_as_it_is(tmp_path):
    graph = write_graph(tmp_path / "graph").parent
    digests = {}
    for nranks in RANKS:
        out = tmp_path / f"digest{nranks}.json"
        run = mpirun(nranks, [graph, out], timeout=180, script=Path(__file__))
        assert run.returncode == 0 and "load blocks checks: passed" in run.stdout, run.output
        digests[nranks] = json.loads(out.read_text())
    assert all(s > 0 for s in digests[RANKS[0]]["sizes"]), digests
    for nranks, d in digests.items():
        assert d == digests[RANKS[0]], f"{nranks} ranks: {d} != {RANKS[0]} ranks: {digests[RANKS[0]]}"

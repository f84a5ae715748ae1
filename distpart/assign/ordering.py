"""The order in which ParMETIS sees the vertices: hubs first.

ParMETIS's cut depends on the numbering it is given, and inputs usually number nodes with no
regard to degree: on power-law graphs, vertices renumbered by degree, highest first, give
ParMETIS far smaller cuts, and on communities and meshes about the same (measured by
benchmarks/bench_assign.py; the runs are in commit 7a052fa). Peeling degree-0 and degree-1
vertices, or handing ParMETIS METIS's partition as the vertex distribution, did not help: the
gap to METIS is in the graph's core.

Vertices go by degree bucket (8 buckets per doubling of the degree), highest first, then by
original ID. A fixed number of buckets lets every rank compute its vertices' new IDs from
one Allgather of bucket counts, and the order does not depend on the number of ranks.

Hubs first means the first ranks' rows would hold most of the adjacency if the ranks got equal
numbers of vertices, so the blocks are cut by load instead
(degree + 1 per vertex): every rank holds about the same number of adjacency entries, and
the hubs stay together, which is what helps ParMETIS.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np

from .adjacency import Renumbering, piece_rows, type_offsets
from ..chunked.blocks import edge_pieces
from ..mpi.exchange import DEFAULT_MAX_BYTES, allgather_int64, exchange
from ..chunked.metadata import GraphMeta
from ..run.progress import Progress
from ..chunked.readers import block_bounds
from ..arrays import new_node_ids, owner_of

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

BUCKETS_PER_DOUBLING = 8
NUM_BUCKETS = BUCKETS_PER_DOUBLING * 64


def degree_group(degree: np.ndarray) -> np.ndarray:
    """Group of each vertex, 0 for the highest degrees: groups are visited in ascending order."""
    bucket = np.floor(np.log2(np.asarray(degree, dtype=np.float64) + 1) * BUCKETS_PER_DOUBLING)
    return (NUM_BUCKETS - 1 - bucket.astype(np.int64)).clip(0, NUM_BUCKETS - 1)


def hubs_first_ids(groups: np.ndarray, counts: np.ndarray, rank: int, first: int = 0) -> np.ndarray:
    """New IDs of a rank's vertices (ascending original IDs) from their groups and every
    rank's group counts `counts` (R, NUM_BUCKETS): group by group, ranks in order, original
    order within a rank. `first` is the lowest new ID."""
    totals = counts.sum(axis=0)
    starts = first + np.concatenate([[0], np.cumsum(totals[:-1])])
    return new_node_ids(groups, starts + counts[:rank].sum(axis=0))


def degrees(comm: Intracomm, meta: GraphMeta, max_bytes: int = DEFAULT_MAX_BYTES,
            progress: Optional[Progress] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(degree, in-degree) in the input of this rank's block of homogeneous vertex IDs
    (block_bounds), counting every edge, duplicates and self loops included. Collective."""
    progress = progress or Progress.off()
    total = sum(-(-et.count // comm.Get_size()) for et in meta.edge_types)
    with progress.task("vertex degrees", total, "edges"):
        return _degrees(comm, meta, max_bytes, progress)


def _degrees(comm: Intracomm, meta: GraphMeta, max_bytes: int, progress: Progress) -> Tuple[np.ndarray, np.ndarray]:
    offsets = type_offsets(meta)
    vtxdist = block_bounds(int(offsets[-1]), comm.Get_size())
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    degree = np.zeros(hi - lo, dtype=np.int64)
    in_degree = np.zeros(hi - lo, dtype=np.int64)
    for etype in meta.edge_types:
        for piece in edge_pieces(comm, meta, etype, piece_rows(max_bytes), progress):
            ends = np.concatenate([piece.dst + offsets[meta.ntype_id(etype.dst)],
                                   piece.src + offsets[meta.ntype_id(etype.src)]])
            is_in = np.zeros(len(ends), np.uint8)
            is_in[:len(piece.dst)] = 1
            del piece
            (ids, flags), _ = exchange(comm, owner_of(vtxdist, ends),
                                       [ends, is_in], max_bytes)
            ids -= lo
            degree += np.bincount(ids, minlength=hi - lo)
            in_degree += np.bincount(ids[flags == 1], minlength=hi - lo)
    return degree, in_degree


def load_before(groups: np.ndarray, load: np.ndarray, group_loads: np.ndarray, rank: int) -> np.ndarray:
    """For each of a rank's vertices, the total load of the vertices before it in the
    hubs-first order (`group_loads`: every rank's load per group, (R, NUM_BUCKETS))."""
    totals = group_loads.sum(axis=0)
    base = np.concatenate([[0], np.cumsum(totals[:-1])]) + group_loads[:rank].sum(axis=0)
    order = np.argsort(groups, kind="stable")
    ordered = load[order]
    inclusive = np.cumsum(ordered)
    sorted_groups = groups[order]
    starts = np.searchsorted(sorted_groups, np.arange(NUM_BUCKETS))
    before_in_group = inclusive - ordered - np.concatenate([[0], inclusive])[starts[sorted_groups]]
    out = np.empty(len(groups), dtype=np.int64)
    out[order] = base[sorted_groups] + before_in_group
    return out


def boundary_candidates(new_ids: np.ndarray, before: np.ndarray, total: int, nranks: int,
                        num_vertices: int) -> np.ndarray:
    """For k = 1..R-1, the smallest of these vertices' new IDs whose load-before reaches
    k/R of the total (num_vertices where none does); the minimum over all ranks is the start
    of rank k's block."""
    targets = (np.arange(1, nranks, dtype=np.int64) * total) // nranks
    out = np.full(nranks - 1, num_vertices, dtype=np.int64)
    order = np.argsort(before, kind="stable")
    pos = np.searchsorted(before[order], targets, side="left")
    # `before` grows with the new ID, so the first vertex reaching a target has the smallest ID.
    found = pos < len(order)
    out[found] = new_ids[order[pos[found]]]
    return out


def hubs_first(comm: Intracomm, degree: np.ndarray) -> Renumbering:
    """New IDs of this rank's block of vertices, hubs first, with load-balanced row blocks
    (see the module). Collective."""
    from mpi4py import MPI
    rank, nranks = comm.Get_rank(), comm.Get_size()
    groups = degree_group(degree)
    counts = allgather_int64(comm, np.bincount(groups, minlength=NUM_BUCKETS))
    new_ids = hubs_first_ids(groups, counts, rank)
    load = np.asarray(degree, dtype=np.int64) + 1
    group_loads = allgather_int64(comm, np.bincount(groups, weights=load, minlength=NUM_BUCKETS).astype(np.int64))
    num_vertices = int(counts.sum())
    local = boundary_candidates(new_ids, load_before(groups, load, group_loads, rank),
                                int(group_loads.sum()), nranks, num_vertices)
    starts = np.empty_like(local)
    comm.Allreduce(local, starts, op=MPI.MIN)
    return Renumbering(new_ids, np.concatenate([[0], starts, [num_vertices]]).astype(np.int64))

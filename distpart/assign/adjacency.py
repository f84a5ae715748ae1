"""The graph ParMETIS partitions: homogeneous, symmetrized, simple, in contiguous vertex blocks.

Homogeneous IDs put node types in metadata order (type t's node i is `offset[t] + i`, as
in DGL's guide 7.5). Rank r owns vertices [vtxdist[r], vtxdist[r+1]). Every input edge u->v
of every type contributes v's row (u) and u's row (v); self loops and duplicates are
dropped because ParMETIS fails on them. Each directed edge is also counted once towards its
destination's in-degree, the number of edges that vertex's partition will keep.

The edges are read and routed in pieces, so a rank holds its share of the graph once (as
sorted keys, then as the CSR) plus one piece in flight: the partitioner, not the
preparation, sets the memory peak.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional

import numpy as np

from ..arrays import offsets, owner_of, sorted_unique
from ..chunked.blocks import edge_pieces
from ..mpi.exchange import DEFAULT_MAX_BYTES, exchange, lookup
from ..chunked.metadata import GraphMeta
from ..run.progress import Progress
from ..chunked.readers import block_bounds

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


@dataclass
class DistributedCSR:
    """This rank's rows of the symmetric graph (neighbours as global homogeneous IDs)."""

    vtxdist: np.ndarray     # (R + 1,) vertex block boundaries
    xadj: np.ndarray        # (nlocal + 1,)
    adjncy: np.ndarray      # neighbours, ascending within each row
    in_degree: np.ndarray   # (nlocal,) directed in-degree in the input, self loops included


@dataclass(frozen=True)
class Renumbering:
    """New vertex IDs for the partitioner: `new_ids` of this rank's block of input IDs
    (`block_bounds` of the vertex count), and `bounds`, the blocks of new IDs whose rows each
    rank holds (the partitioner's vtxdist; blocks need not be equal)."""

    new_ids: np.ndarray
    bounds: np.ndarray


def type_offsets(meta: GraphMeta) -> np.ndarray:
    """offset[t] = first homogeneous ID of node type t; offset[-1] = total nodes."""
    return offsets(meta.node_counts)


def build_csr(comm: Intracomm, meta: GraphMeta, max_bytes: int = DEFAULT_MAX_BYTES,
              progress: Optional[Progress] = None, index_dtype: "np.dtype | type" = np.int64,
              numbering: Optional[Renumbering] = None) -> DistributedCSR:
    """Read the edges piece by piece and route both directions of each edge to its row's
    owner. Collective.

    Memory: each rank keeps one sorted int64 key (row * N + column) per received adjacency
    entry, duplicates dropped piece by piece, then merges them in place into the CSR;
    `xadj`/`adjncy` come out in `index_dtype` (the partitioner's integer type) so handing
    them over copies nothing. Transient memory is bounded by the piece size.

    `numbering` renumbers the vertices (e.g. `ordering.hubs_first`): rows, columns and
    in-degrees are then in the new numbering, rows in its blocks.
    """
    progress = progress or Progress.off()
    total = sum(-(-et.count // comm.Get_size()) for et in meta.edge_types)
    with progress.task("graph for the partitioner", total, "edges"):
        return _build_csr(comm, meta, max_bytes, progress, np.dtype(index_dtype), numbering)


def piece_rows(max_bytes: int) -> int:
    """Edges per piece: an edge becomes two entries of (row, column, flag) plus the
    exchange's send and receive copies, about 100 bytes in flight; 512K edges at the default
    cap keeps that near 50 MB, a small fraction of what a rank holds of a large graph, and
    large enough that the exchanges' latency does not show."""
    return max(1 << 10, max_bytes // 512)


def _build_csr(comm: Intracomm, meta: GraphMeta, max_bytes: int, progress: Progress,
               index_dtype: np.dtype, numbering: Optional[Renumbering]) -> DistributedCSR:
    offsets = type_offsets(meta)
    n = int(offsets[-1])
    input_blocks = block_bounds(n, comm.Get_size())
    vtxdist = input_blocks if numbering is None else numbering.bounds
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    in_degree = np.zeros(hi - lo, dtype=np.int64)
    keys: List[np.ndarray] = []
    for etype in meta.edge_types:
        for piece in edge_pieces(comm, meta, etype, piece_rows(max_bytes), progress, 0.5):
            u = piece.src + offsets[meta.ntype_id(etype.src)]
            v = piece.dst + offsets[meta.ntype_id(etype.dst)]
            del piece
            if numbering is not None:
                u = lookup(comm, u, input_blocks, numbering.new_ids, max_bytes)
                v = lookup(comm, v, input_blocks, numbering.new_ids, max_bytes)
            loop = u == v
            # Row v gets u (and counts the edge as incoming); row u gets v unless it is a self loop.
            first = np.concatenate([v, u[~loop]])
            second = np.concatenate([u, v[~loop]])
            is_in = np.zeros(len(first), np.uint8)
            is_in[:len(v)] = 1
            del u, v, loop
            owner = owner_of(vtxdist, first)
            (r, c, i), _ = exchange(comm, owner, [first, second, is_in], max_bytes)
            del first, second, is_in, owner
            r -= lo
            in_degree += np.bincount(r[i == 1], minlength=hi - lo)
            simple = r + lo != c
            keys.append(sorted_unique(r[simple] * n + c[simple]))
            progress.advance(len(i) * 0.25)
    return _csr_from_keys(vtxdist, keys, n, hi - lo, in_degree, index_dtype)


_COMPACT = 1 << 20


def _csr_from_keys(vtxdist: np.ndarray, keys: List[np.ndarray], n: int, nlocal: int,
                   in_degree: np.ndarray, index_dtype: np.dtype) -> DistributedCSR:
    """Merge the pieces' sorted keys into one sorted, duplicate-free array in place (each
    piece freed as it is copied), then cut it into rows without a row array."""
    merged = np.empty(sum(len(k) for k in keys), dtype=np.int64)
    at = 0
    while keys:
        piece = keys.pop(0)
        merged[at:at + len(piece)] = piece
        at += len(piece)
        del piece
    merged.sort()
    # Compaction in place, a window at a time: a window's survivors are copied out before
    # anything at or after the write position is overwritten.
    write, prev = 0, None
    for a in range(0, len(merged), _COMPACT):
        window = merged[a:a + _COMPACT]
        keep = np.empty(len(window), dtype=bool)
        keep[0] = prev is None or window[0] != prev
        np.not_equal(window[1:], window[:-1], out=keep[1:])
        prev = int(window[-1])
        survivors = window[keep]
        merged[write:write + len(survivors)] = survivors
        write += len(survivors)
    merged = merged[:write]
    xadj = np.searchsorted(merged, np.arange(nlocal + 1, dtype=np.int64) * n).astype(index_dtype)
    adjncy = np.empty(write, dtype=index_dtype)
    for a in range(0, write, _COMPACT):
        np.remainder(merged[a:a + _COMPACT], n, out=adjncy[a:a + _COMPACT], casting="unsafe")
    return DistributedCSR(vtxdist, xadj, adjncy, in_degree)

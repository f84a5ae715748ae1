"""The graph ParMETIS partitions: homogeneous, symmetrized, simple, in contiguous vertex blocks.

Homogeneous IDs put node types in metadata order (type t's node i is `offset[t] + i`, as
in DGL's guide 7.5). Rank r owns vertices [vtxdist[r], vtxdist[r+1]): blocks of equal size
(`block_bounds`), or cut by load (`load_blocks`: about as many adjacency entries + vertices
on every rank, whatever IDs the hubs have). Every input edge u->v
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
from ..mpi.exchange import DEFAULT_MAX_BYTES, allreduce_sum, exchange, lookup
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


# Load histogram resolution of `load_blocks`: a block boundary falls on a multiple of
# ceil(n / LOAD_BUCKETS) (every vertex on graphs up to that size); 512 KB per rank.
LOAD_BUCKETS = 1 << 16


def load_blocks(comm: Intracomm, meta: GraphMeta, max_bytes: int = DEFAULT_MAX_BYTES,
                progress: Optional[Progress] = None) -> np.ndarray:
    """vtxdist of contiguous input-ID blocks holding about the same load each, a vertex's load
    being its degree in the input (both directions, duplicates and self loops included) + 1.
    One read of the edges into a histogram of ID ranges, one Allreduce, a prefix sum: no
    exchange. Collective."""
    offsets = type_offsets(meta)
    n, nranks = int(offsets[-1]), comm.Get_size()
    if nranks == 1:
        return block_bounds(n, 1)
    progress = progress or Progress.off()
    load = load_histogram(np.empty(0, dtype=np.int64), n)
    total = sum(-(-et.count // nranks) for et in meta.edge_types)
    with progress.task("vertex blocks by load", total, "edges"):
        for etype in meta.edge_types:
            for piece in edge_pieces(comm, meta, etype, piece_rows(max_bytes), progress):
                load += load_histogram(piece.src + offsets[meta.ntype_id(etype.src)], n)
                load += load_histogram(piece.dst + offsets[meta.ntype_id(etype.dst)], n)
    return blocks_by_load(comm, load, n)


def _range_width(n: int) -> int:
    """IDs per range of the load histogram of IDs 0..n-1."""
    return max(1, -(-n // LOAD_BUCKETS))


def load_histogram(ids: np.ndarray, n: int) -> np.ndarray:
    """How many of `ids` (each in 0..n-1) fall in each range of `blocks_by_load`'s histogram."""
    width = _range_width(n)
    return np.bincount(ids // width, minlength=-(-n // width))


def load_ranges(n: int) -> np.ndarray:
    """Boundaries of `load_histogram`'s ranges of IDs 0..n-1 (one more than there are ranges),
    to count sorted IDs by binary search."""
    width = _range_width(n)
    return np.minimum(np.arange(-(-n // width) + 1, dtype=np.int64) * width, n)


def blocks_by_load(comm: Intracomm, load: np.ndarray, n: int) -> np.ndarray:
    """vtxdist of IDs 0..n-1 in contiguous blocks of about equal load, from every rank's
    `load_histogram` of its adjacency entries (`cut_by_load` of their sum). Collective (one
    Allreduce)."""
    return cut_by_load(allreduce_sum(comm, np.asarray(load, dtype=np.int64)), n, comm.Get_size())


def cut_by_load(load: np.ndarray, n: int, nranks: int) -> np.ndarray:
    """vtxdist of `nranks` blocks of IDs 0..n-1 from the adjacency entries of each
    `load_histogram` range (each ID adds 1): block k starts at the first range whose load
    before it reaches k/R of the total, so a block exceeds 1/R of the load by less than one
    range's."""
    width = _range_width(n)
    load = np.asarray(load, dtype=np.int64) + np.diff(load_ranges(n))
    before = np.cumsum(load) - load
    targets = (np.arange(1, nranks, dtype=np.int64) * int(load.sum())) // nranks
    starts = np.minimum(np.searchsorted(before, targets, side="left") * width, n)
    return np.concatenate([[0], starts, [n]]).astype(np.int64)


def build_csr(comm: Intracomm, meta: GraphMeta, max_bytes: int = DEFAULT_MAX_BYTES,
              progress: Optional[Progress] = None, index_dtype: "np.dtype | type" = np.int64,
              numbering: Optional[Renumbering] = None, blocks: Optional[np.ndarray] = None) -> DistributedCSR:
    """Read the edges piece by piece and route both directions of each edge to its row's
    owner. Collective.

    Memory: each rank keeps one sorted int64 key (row * N + column) per received adjacency
    entry, duplicates dropped piece by piece, then merges them in place into the CSR;
    `xadj`/`adjncy` come out in `index_dtype` (the partitioner's integer type) so handing
    them over copies nothing. Transient memory is bounded by the piece size.

    `numbering` renumbers the vertices (e.g. `ordering.hubs_first`): rows, columns and
    in-degrees are then in the new numbering, rows in its blocks. `blocks` (without
    `numbering`): the vtxdist of the rows (default: equal blocks, `block_bounds`).
    """
    progress = progress or Progress.off()
    total = sum(-(-et.count // comm.Get_size()) for et in meta.edge_types)
    with progress.task("graph for the partitioner", total, "edges"):
        return _build_csr(comm, meta, max_bytes, progress, np.dtype(index_dtype), numbering, blocks)


def piece_rows(max_bytes: int) -> int:
    """Edges per piece: an edge becomes two entries of (row, column, flag) plus the
    exchange's send and receive copies, about 100 bytes in flight; 512K edges at the default
    cap keeps that near 50 MB, a small fraction of what a rank holds of a large graph, and
    large enough that the exchanges' latency does not show."""
    return max(1 << 10, max_bytes // 512)


def _build_csr(comm: Intracomm, meta: GraphMeta, max_bytes: int, progress: Progress,
               index_dtype: np.dtype, numbering: Optional[Renumbering],
               blocks: Optional[np.ndarray]) -> DistributedCSR:
    offsets = type_offsets(meta)
    n = int(offsets[-1])
    input_blocks = block_bounds(n, comm.Get_size())
    if numbering is not None:
        vtxdist = numbering.bounds
    else:
        vtxdist = input_blocks if blocks is None else np.asarray(blocks, dtype=np.int64)
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

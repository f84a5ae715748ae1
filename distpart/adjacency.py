"""The graph ParMETIS partitions: homogeneous, symmetrized, simple, in contiguous vertex blocks.

Homogeneous IDs put node types in metadata order (type t's node i is `offset[t] + i`, as
in DGL's guide 7.5). Rank r owns vertices [vtxdist[r], vtxdist[r+1]). Every input edge u->v
of every type contributes v's row (u) and u's row (v); self loops and duplicates are
dropped because ParMETIS fails on them. Each directed edge is also counted once towards its
destination's in-degree, the number of edges that vertex's partition will keep.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional

import numpy as np

from .arrays import offsets
from .blocks import read_edge_block
from .exchange import DEFAULT_MAX_BYTES, exchange
from .metadata import GraphMeta
from .progress import Progress
from .readers import block_bounds

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


@dataclass
class DistributedCSR:
    """This rank's rows of the symmetric graph (neighbours as global homogeneous IDs)."""

    vtxdist: np.ndarray     # (R + 1,) vertex block boundaries
    xadj: np.ndarray        # (nlocal + 1,)
    adjncy: np.ndarray      # neighbours, ascending within each row
    in_degree: np.ndarray   # (nlocal,) directed in-degree in the input, self loops included


def type_offsets(meta: GraphMeta) -> np.ndarray:
    """offset[t] = first homogeneous ID of node type t; offset[-1] = total nodes."""
    return offsets(meta.node_counts)


def csr_from_pairs(rows: np.ndarray, cols: np.ndarray, nrows: int,
                   num_cols: int) -> "tuple[np.ndarray, np.ndarray]":
    """(xadj, adjncy) of the pairs (row, col) with self loops already removed; duplicates dropped.

    Sorting one combined int64 key is several times faster than a lexsort of two arrays;
    it is used whenever row * num_cols + col cannot overflow.
    """
    if nrows * num_cols < 2**62:
        key = np.sort(rows * num_cols + cols)
        if len(key):
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
        rows_s, cols_s = key // num_cols, key % num_cols
    else:
        order = np.lexsort((cols, rows))
        rows_s, cols_s = rows[order], cols[order]
        if len(rows_s):
            keep = np.concatenate([[True], (rows_s[1:] != rows_s[:-1]) | (cols_s[1:] != cols_s[:-1])])
            rows_s, cols_s = rows_s[keep], cols_s[keep]
    xadj = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows_s, minlength=nrows), out=xadj[1:])
    return xadj, cols_s.astype(np.int64, copy=False)


def build_csr(comm: Intracomm, meta: GraphMeta, max_bytes: int = DEFAULT_MAX_BYTES,
              progress: Optional[Progress] = None) -> DistributedCSR:
    """Read every edge block and route both directions of each edge to its row's owner. Collective."""
    progress = progress or Progress.off()
    total = sum(-(-et.count // comm.Get_size()) for et in meta.edge_types)
    with progress.task("graph for the partitioner", total, "edges"):
        return _build_csr(comm, meta, max_bytes, progress)


def _build_csr(comm: Intracomm, meta: GraphMeta, max_bytes: int, progress: Progress) -> DistributedCSR:
    offsets = type_offsets(meta)
    vtxdist = block_bounds(int(offsets[-1]), comm.Get_size())
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    rows: List[np.ndarray] = []
    cols: List[np.ndarray] = []
    incoming: List[np.ndarray] = []
    for etype in meta.edge_types:
        block = read_edge_block(comm, meta, etype, progress, 0.5)
        n = len(block.src)
        u = block.src + offsets[meta.ntype_id(etype.src)]
        v = block.dst + offsets[meta.ntype_id(etype.dst)]
        del block
        loop = u == v
        # Row v gets u (and counts the edge as incoming); row u gets v unless it is a self loop.
        first = np.concatenate([v, u[~loop]])
        second = np.concatenate([u, v[~loop]])
        is_in = np.concatenate([np.ones(len(v), np.uint8), np.zeros(int((~loop).sum()), np.uint8)])
        del u, v, loop
        owner = np.searchsorted(vtxdist, first, side="right") - 1
        (r, c, i), _ = exchange(comm, owner, [first, second, is_in], max_bytes)
        rows.append(r - lo)
        cols.append(c)
        incoming.append(i)
        progress.advance(n * 0.5)
    r = np.concatenate(rows) if rows else np.empty(0, np.int64)
    c = np.concatenate(cols) if cols else np.empty(0, np.int64)
    i = np.concatenate(incoming) if incoming else np.empty(0, np.uint8)
    in_degree = np.bincount(r[i == 1], minlength=hi - lo).astype(np.int64)
    simple = r + lo != c
    xadj, adjncy = csr_from_pairs(r[simple], c[simple], hi - lo, int(offsets[-1]))
    return DistributedCSR(vtxdist, xadj, adjncy, in_degree)

"""Contraction: the graph of a level's clusters, the next coarser `LevelGraph` (`contract`).

Numpy only: both ends of every edge mapped to clusters, then one sort of packed (coarse u,
coarse v, weight) integers per piece of rows (`arrays.sum_pairs`), merged at each row's owner.
The coarse rows go to the ranks in blocks of about equal entries (`adjacency.blocks_by_load`):
clusters of hubs have the lowest coarse IDs whatever the input numbering, so equal-size blocks
would put most of a coarse level's edges on the first rank.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from ....arrays import owner_of, pair_bits, segment_starts, sorted_unique, sum_keys, sum_pairs, sum_sorted_runs
from ....chunked.readers import block_bounds
from ...adjacency import blocks_by_load, load_ranges
from ....mpi.exchange import allreduce_sum, alltoallv_grouped, exchange, exscan_sum, lookup
from ..graph import CONTRACT_PIECE, Halo, LevelGraph

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


def contract(comm: "Intracomm", g: LevelGraph, halo: Halo, labels: np.ndarray, piece: int = CONTRACT_PIECE,
             packed: bool = True) -> Tuple[LevelGraph, np.ndarray]:
    """The graph of the clusters: one coarse vertex per distinct label, numbered by the
    label's rank among all labels (ascending), its weight the sum of its members', an edge
    between two clusters weighing the sum of the fine edges between them (edges inside a
    cluster vanish). Returns (coarse graph, fine-to-coarse global IDs of the local
    vertices). Collective. `packed=False` keeps an edge's two ends apart even where they fit
    one int64 key (what graphs past 2**31 coarse vertices do; the result is the same)."""
    nranks, rank, lo = comm.Get_size(), comm.Get_rank(), g.first(comm)
    mine = sorted_unique(labels)
    (named,), _ = exchange(comm, g.owner(mine), [mine])
    used = np.zeros(g.nlocal, dtype=bool)
    used[named - lo] = True
    count = int(used.sum())
    base = int(exscan_sum(comm, np.array([count]))[0])
    nc = int(allreduce_sum(comm, np.array([count]))[0])
    coarse_id = np.full(g.nlocal, -1, dtype=np.int64)
    coarse_id[used] = base + np.arange(count, dtype=np.int64)
    fine_to_coarse = lookup(comm, labels, g.vtxdist, coarse_id)
    # Edges: both ends mapped, inside-cluster edges dropped, duplicates summed here and at
    # the owner of the row (every rank sent its rows sorted; the owner merges them).
    # The local rows go in pieces of about `piece` entries, each reduced at once, so the
    # temporaries stay small next to the graph (coarse rows are far fewer than fine ones).
    ext = halo.extend(comm, fine_to_coarse)
    bits = pair_bits(max(nc - 1, 0), max(nc - 1, 0)) if packed else None
    cuts = np.searchsorted(g.xadj, np.arange(1, -(-g.entries // piece)) * piece)
    bounds = sorted_unique(np.concatenate([[0], cuts, [g.nlocal]]))
    pieces = []
    for r0, r1 in zip(bounds[:-1], bounds[1:]):
        e0, e1 = g.xadj[r0], g.xadj[r1]
        cu = np.repeat(fine_to_coarse[r0:r1], np.diff(g.xadj[r0:r1 + 1]))
        cv = ext[halo.col[e0:e1]]
        keep = cu != cv
        pieces.append(_edge_sums(cu[keep], cv[keep], g.adjwgt[e0:e1][keep], nc, bits))
        del cu, cv, keep
    del ext
    # An edge is (key, weight) when the pair packs into one int64 (16 bytes, not 24); the
    # pieces' sorted runs are then merged a slice of the key range at a time.
    if bits is not None and len(pieces) > 1:
        edges = list(sum_sorted_runs([p[0] for p in pieces], [p[1] for p in pieces], _key_max(nc, bits), piece))
    else:
        edges = [_popped(pieces, i) for i in range(2 if bits is not None else 3)]
        if len(pieces) > 1:
            edges = list(sum_pairs(*edges, max(nc - 1, 0), max(nc - 1, 0)))
    del pieces
    # Coarse rows in blocks of about equal entries, first as counted before the owners merge
    # them (what each owner receives), then as merged (what each owner keeps). The edges are
    # sorted by row, so each owner's rows are one slice: no owner or order arrays, no copy.
    cdist = blocks_by_load(comm, _row_histogram(edges, bits, nc), nc) if nranks > 1 else block_bounds(nc, 1)
    received, counts = alltoallv_grouped(comm, edges, np.diff(_row_starts(edges, bits, cdist)))
    del edges
    received = _merged(received, counts, nc, bits, piece)
    if nranks > 1:
        received, cdist = _rebalanced(comm, received, cdist, nc, bits)
    clo, cn = int(cdist[rank]), int(cdist[rank + 1] - cdist[rank])
    vwgt = _coarse_weights(comm, g, fine_to_coarse, cdist, clo, cn)
    if bits is not None:
        key, rw = received
        del received
        ru, rv = key >> bits, key & np.int64((1 << bits) - 1)
        del key
    else:
        (ru, rv, rw), received = received, None
    xadj = np.zeros(cn + 1, dtype=np.int64)
    np.cumsum(np.bincount(ru - clo, minlength=cn), out=xadj[1:])
    del ru
    coarse = LevelGraph(cdist, xadj, rv, rw, vwgt).with_totals(comm)
    return coarse, fine_to_coarse


def _merged(received: list, counts: np.ndarray, nc: int, bits: "int | None", piece: int) -> list:
    """The edges an owner received, one sorted run from each rank, merged (weights summed)."""
    if np.count_nonzero(counts) > 1 and bits is not None:
        ends = np.cumsum(counts)
        starts = ends - counts
        key, w = received
        received = list(sum_sorted_runs([key[a:b] for a, b in zip(starts, ends)],
                                        [w[a:b] for a, b in zip(starts, ends)], _key_max(nc, bits), piece))
        del key, w
    elif np.count_nonzero(counts) > 1:
        received = list(sum_pairs(*received, max(nc - 1, 0), max(nc - 1, 0)))
    return received


def _rebalanced(comm: "Intracomm", edges: list, cdist: np.ndarray, nc: int, bits: "int | None"
                ) -> Tuple[list, np.ndarray]:
    """The merged rows (sorted) and their blocks, the blocks cut again by the merged entries
    where that moves a boundary: the rows of a hubs' cluster, sent by many ranks, merge to
    far fewer entries than were counted. Collective."""
    final = blocks_by_load(comm, _row_histogram(edges, bits, nc), nc)
    if np.array_equal(final, cdist):
        return edges, cdist
    # Each rank's rows are one ascending range and arrive in rank order: still sorted.
    moved, _ = alltoallv_grouped(comm, edges, np.diff(_row_starts(edges, bits, final)))
    return moved, final


def _row_starts(edges: list, bits: "int | None", rows: np.ndarray) -> np.ndarray:
    """Index of the first of the row-sorted `edges` in each of `rows` or after it."""
    first = np.asarray(rows, dtype=np.int64)
    return np.searchsorted(edges[0], first << bits if bits is not None else first)


def _row_histogram(edges: list, bits: "int | None", nc: int) -> np.ndarray:
    """`load_histogram` of the rows of the row-sorted `edges` (by binary search)."""
    return np.diff(_row_starts(edges, bits, load_ranges(nc)))


def _coarse_weights(comm: "Intracomm", g: LevelGraph, fine_to_coarse: np.ndarray, cdist: np.ndarray,
                    clo: int, cn: int) -> np.ndarray:
    """(cn, ncon) weights of this rank's coarse vertices: summed here per coarse vertex, then
    at its owner."""
    order = np.argsort(fine_to_coarse, kind="stable")
    fc = fine_to_coarse[order]
    st = segment_starts(fc)
    part = np.add.reduceat(g.vwgt[order], st, axis=0) if len(st) else g.vwgt[:0]
    (ids, wts), _ = exchange(comm, owner_of(cdist, fc[st]), [fc[st], np.ascontiguousarray(part)])
    vwgt = np.zeros((cn, g.ncon), dtype=np.int64)
    np.add.at(vwgt, ids - clo, wts)
    return vwgt


def _edge_sums(cu: np.ndarray, cv: np.ndarray, w: np.ndarray, nc: int, bits: "int | None") -> list:
    """Distinct coarse edges with summed weights: [key, w] (key = cu << bits | cv) or [cu, cv, w]."""
    if bits is None:
        return list(sum_pairs(cu, cv, w, max(nc - 1, 0), max(nc - 1, 0)))
    key = np.left_shift(cu, bits, dtype=np.int64)
    key |= cv
    return list(sum_keys(key, w, _key_max(nc, bits), in_place=True))


def _key_max(nc: int, bits: int) -> int:
    """The largest key of an edge between coarse vertices 0..nc-1."""
    return (max(nc - 1, 0) << bits) | max(nc - 1, 0)


def _popped(pieces: list, i: int) -> np.ndarray:
    """Column i of every piece, concatenated, each piece's column freed once copied."""
    out = np.concatenate([p[i] for p in pieces]) if pieces else np.empty(0, np.int64)
    for p in pieces:
        p[i] = None
    return out

"""Step 2's edges stage: each rank's block of every edge type goes to the owners of its
destinations, endpoints as new IDs, in chunks so that the lookups' and the exchange's
temporaries stay bounded whatever the block's size.

Edges are held compactly (`arrays.id_dtype`: int32 original IDs and new IDs while they fit)
until the partition is written. Each rank reads an ascending block of edge IDs in ID order
and `exchange` delivers rows grouped by source rank in the order sent, so an owner that
keeps each source rank's chunks apart and joins them source by source has its edges in
original-ID order without sorting (`_Inbox`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..arrays import id_dtype, offsets
from ..assign.assignment import Assignment
from ..chunked.blocks import read_block_pieces
from ..chunked.metadata import EdgeType, GraphMeta
from ..mpi.exchange import allreduce_max, exchange, lookup
from ..partitions.layout import PartitionLayout
from ..run.progress import Progress
from .relabel import by_partition

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

# Shares of one edge's work in the edges stage, for progress: reading it, the two endpoint
# lookups, and the exchange to its owner (measured proportions, roughly).
_READ, _LOOKUP, _SEND = 0.5, 0.15, 0.2
# Edges per chunk at most; the lookups and the exchange hold about 64 bytes per edge of a chunk.
CHUNK_ROWS = 1 << 20


@dataclass
class PartEdges:
    """Edges of one (partition, edge type), sorted by original edge ID; endpoints as new IDs
    (local IDs once the partition's graph is written)."""

    orig: np.ndarray
    src: np.ndarray
    dst: np.ndarray


@dataclass
class EdgeRoute:
    """Where this rank's block of one edge type went: its first edge ID, its length, and the
    partition of each edge (kept only for edge types with features, which follow the edges)."""

    start: int
    count: int
    part: Optional[np.ndarray]


def expected_share(count: int, nranks: int) -> int:
    """Rows of a `count`-row table in one rank's block (for progress totals only)."""
    return -(-count // nranks)


def chunk_rows(max_bytes: int) -> int:
    return max(1, min(CHUNK_ROWS, max_bytes // 64))


def send_edges(comm: Intracomm, meta: GraphMeta, assignment: Assignment, new_ids: Dict[str, np.ndarray],
               part_starts: np.ndarray, layout: PartitionLayout, building: List[int],
               rows_to_build: Callable[[np.ndarray], "slice | np.ndarray"], max_bytes: int,
               progress: Progress) -> Tuple[Dict[int, List[PartEdges]], List[EdgeRoute], np.ndarray]:
    """Every edge reaches the owner of its destination's partition. Returns this rank's
    (edges per own partition being built, one list entry per edge type; the route of each
    edge type's block; (P, E) counts of the edges this rank read, by partition). Collective.

    `part_starts` (P + 1) bounds each partition's new node IDs; `rows_to_build(parts)` picks
    the rows bound for partitions being built (a resumed run keeps the others)."""
    total = sum(expected_share(et.count, layout.nranks) for et in meta.edge_types)
    edges: Dict[int, List[PartEdges]] = {p: [] for p in building}
    routes: List[EdgeRoute] = []
    counts = np.zeros((layout.num_parts, len(meta.edge_types)), dtype=np.int64)
    node_dtype = id_dtype(int(part_starts[-1]))
    with progress.task("edges", total, "edges"):
        for e, etype in enumerate(meta.edge_types):
            inbox = _Inbox(building, layout.parts_of(comm.Get_rank()), part_starts, comm.Get_size(),
                           id_dtype(etype.count), node_dtype)
            routes.append(_send_edge_type(comm, meta, assignment, etype, new_ids, part_starts, layout,
                                          rows_to_build, max_bytes, progress, inbox, counts[:, e]))
            for p, held in inbox.joined().items():
                edges[p].append(held)
    return edges, routes, counts


def _send_edge_type(comm: Intracomm, meta: GraphMeta, assignment: Assignment, etype: EdgeType,
                    new_ids: Dict[str, np.ndarray], part_starts: np.ndarray, layout: PartitionLayout,
                    rows_to_build: Callable[[np.ndarray], "slice | np.ndarray"], max_bytes: int,
                    progress: Progress, inbox: "_Inbox", counts: np.ndarray) -> EdgeRoute:
    """Send one edge type's block chunk by chunk; `counts` (P,) gets the block's edges per partition."""
    pieces, start = read_block_pieces(comm, meta, etype, chunk_rows(max_bytes), progress, _READ)
    n = sum(len(src) for src, _ in pieces)
    src_blk, dst_blk = assignment.blocks[etype.src], assignment.blocks[etype.dst]
    orig_dtype = id_dtype(etype.count)
    featured = bool(meta.edge_features(etype.name))
    route: List[np.ndarray] = []
    chunks = int(allreduce_max(comm, np.array([len(pieces)]))[0])
    at = start
    for c in range(chunks):
        src, dst = pieces[c] if c < len(pieces) else (np.empty(0, np.int64), np.empty(0, np.int64))
        if c < len(pieces):
            pieces[c] = None   # freed as this chunk's temporaries are
        m = len(src)
        dst_new = lookup(comm, dst, dst_blk.bounds, new_ids[etype.dst], max_bytes)
        progress.advance(m * _LOOKUP)
        part = (np.searchsorted(part_starts, dst_new, side="right") - 1).astype(np.int32)
        # Counted where the edges are read, so partitions a resumed run keeps count too.
        counts += np.bincount(part, minlength=layout.num_parts)
        if featured:
            route.append(part)
        k = rows_to_build(part)
        src_new = lookup(comm, src[k], src_blk.bounds, new_ids[etype.src], max_bytes)
        progress.advance(m * _LOOKUP)
        orig = np.arange(at, at + m, dtype=orig_dtype)[k]
        at += m
        owners = layout.rank_of(part[k])
        del src, dst, part
        columns = [orig, src_new, dst_new[k]]
        del orig, src_new, dst_new
        (orig_r, src_r, dst_r), from_rank = exchange(comm, owners, columns, max_bytes)
        del owners, columns
        inbox.add(orig_r, src_r, dst_r, from_rank)
        progress.advance(m * _SEND)
    whole = np.concatenate(route) if len(route) > 1 else route[0] if route else np.empty(0, np.int32)
    return EdgeRoute(start, n, whole if featured else None)


class _Inbox:
    """Received edges of one type for this rank's partitions, kept per (partition, source
    rank) in arrival order, joined source by source at the end: original-ID order."""

    def __init__(self, building: List[int], mine: range, part_starts: np.ndarray, nranks: int,
                 orig_dtype: np.dtype, node_dtype: np.dtype) -> None:
        self.building, self.mine, self.part_starts = building, mine, part_starts
        self.dtypes = (orig_dtype, node_dtype, node_dtype)
        self.pieces: Dict[int, List[List[Tuple[np.ndarray, ...]]]] = {p: [[] for _ in range(nranks)]
                                                                     for p in building}

    def add(self, orig: np.ndarray, src: np.ndarray, dst: np.ndarray, from_rank: np.ndarray) -> None:
        bounds = offsets(from_rank)
        if len(self.mine) == 1:
            for p in self.building:   # every row is this partition's: slices, no copies
                for r, held in enumerate(self.pieces[p]):
                    if bounds[r + 1] > bounds[r]:
                        held.append(tuple(col[bounds[r]:bounds[r + 1]] for col in (orig, src, dst)))
            return
        part = np.searchsorted(self.part_starts, dst, side="right") - 1 - self.mine.start
        groups = by_partition(part, len(self.mine))
        del part
        for i, p in enumerate(self.mine):
            if p not in self.pieces:
                continue
            rows = groups[i]
            cut = np.searchsorted(rows, bounds)   # rows keep arrival order: grouped by source
            for r, held in enumerate(self.pieces[p]):
                if cut[r + 1] > cut[r]:
                    sel = rows[cut[r]:cut[r + 1]]
                    held.append(tuple(np.take(col, sel) for col in (orig, src, dst)))

    def joined(self) -> Dict[int, PartEdges]:
        """Each partition's edges in original-ID order, pieces released column by column."""
        out = {}
        for p, by_source in self.pieces.items():
            chunks = [list(piece) for held in by_source for piece in held]
            self.pieces[p] = []
            columns = []
            for j, dtype in enumerate(self.dtypes):
                columns.append(np.concatenate([c[j] for c in chunks]) if len(chunks) > 1
                               else chunks[0][j] if chunks else np.empty(0, dtype))
                for c in chunks:
                    c[j] = None
            out[p] = _sorted_by_orig(PartEdges(*columns))
        return out


def _sorted_by_orig(edges: PartEdges) -> PartEdges:
    """Edges in original-ID order: they arrive so (see the module's docstring), and the sort
    only guards that."""
    if len(edges.orig) < 2 or (edges.orig[1:] > edges.orig[:-1]).all():
        return edges
    order = np.argsort(edges.orig, kind="stable")
    return PartEdges(edges.orig[order], edges.src[order], edges.dst[order])

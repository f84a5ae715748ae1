"""One level of the multilevel hierarchy, distributed, and its halo.

A `LevelGraph` is a symmetric weighted graph whose vertices are numbered 0..n-1 globally
and held in contiguous blocks: rank r owns [vtxdist[r], vtxdist[r+1]). Its rows hold global
neighbour IDs (`adjncy`), edge weights (`adjwgt`, symmetric: w(u,v) == w(v,u)) and one
vertex-weight column per balance constraint (`vwgt`, int64). Everything is integer, so
every sum over ranks is exact and order-free: that is what lets the whole method give the
same assignment for any number of ranks.

A `Halo` maps the columns to "extended local" indices (own vertices 0..nlocal-1, then the
ghosts: the distinct neighbours owned by other ranks, ascending by global ID) and refreshes a
per-vertex value for the ghosts with one `Alltoallv`. `col` is that mapping of `adjncy`, so a
neighbour's value is `ext[halo.col]` where `ext = halo.extend(comm, local_values)`.

Also the facts every stage of the method shares: what a hub is (`HUB_SKEW`), how many edges
a stage handles at once, and a block's share of a total (`share_of`, `block_caps`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Tuple

import numpy as np

from ...arrays import group_by_owner, owner_of, sorted_unique
from ...mpi.exchange import (DEFAULT_MAX_BYTES, allreduce_max, allreduce_sum, alltoallv_grouped, alltoallv_planned,
                             rounds_for, row_bytes_of)

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

# A graph whose top degree is at most this many times its average has no hubs (coarsening
# clusters it in pairs); above it, refinement prices a vertex's move by its degree alone.
HUB_SKEW = 8
# Adjacency entries one step handles at a time, to bound its temporaries next to the finest
# level (which holds the run's memory peak); none changes a result (the pieces are summed or
# handled independently).
CONTRACT_PIECE = 1 << 20
AFTERBURNER_PIECE = 1 << 20
EVALUATE_PIECE = 1 << 20
HALO_PIECE = 1 << 22
LP_PIECE = 1 << 22     # of the level's entries; a label propagation batch takes its share
COL32_LIMIT = int(np.iinfo(np.int32).max)   # a level's extended indices up to this are int32


def unit_weights(m: int) -> np.ndarray:
    """m edge weights of 1 that take no memory (a read-only zero-stride view): the finest
    level of the cut objective, whose weights are all 1."""
    return np.broadcast_to(np.ones(1, dtype=np.int64), (m,))


def is_unit_view(adjwgt: np.ndarray) -> bool:
    """`adjwgt` is a `unit_weights` view (recognised without reading it)."""
    return adjwgt.ndim == 1 and adjwgt.strides == (0,) and (len(adjwgt) == 0 or int(adjwgt[0]) == 1)


def is_unit(adjwgt: np.ndarray) -> bool:
    """Every weight is 1 (reads the weights unless they are a `unit_weights` view)."""
    return is_unit_view(adjwgt) or bool(np.all(adjwgt == 1))


def row_pieces(xadj: np.ndarray, piece: int):
    """(first row, end row) ranges of consecutive rows holding about `piece` adjacency
    entries each (a row with more is a piece of its own), covering every row."""
    n, m = len(xadj) - 1, int(xadj[-1])
    cuts = np.searchsorted(xadj, np.arange(piece, m, piece), side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return zip(bounds[:-1].tolist(), bounds[1:].tolist()) if n else iter(())


class LevelGraph:
    """This rank's rows of one level (see the module docstring).

    Once a level's halo is built (`keep_halo`), its `adjncy` is dropped: the halo's `col`
    (4 bytes an entry where indices fit, against adjncy's 8) and ghosts hold the same
    neighbours, and `adjncy` is rebuilt from them only where a caller still asks for it."""

    def __init__(self, vtxdist: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray, adjwgt: np.ndarray,
                 vwgt: np.ndarray, total: "np.ndarray | None" = None) -> None:
        self.vtxdist = vtxdist    # (R + 1,) int64 block boundaries of global vertex IDs
        self.xadj = xadj          # (nlocal + 1,) int64
        self._adjncy = adjncy     # (m,) int64 global neighbour IDs, no self loops, no duplicates in a row
        self.adjwgt = adjwgt      # (m,) int64 edge weights (`unit_weights` where all are 1)
        vwgt = np.asarray(vwgt, dtype=np.int64)
        # One column may come as a vector; (0, ncon) must stay as it is (a rank can own no vertex).
        self.vwgt = vwgt.reshape(-1, 1) if vwgt.ndim == 1 else vwgt   # (nlocal, ncon) int64
        self.total = total        # (ncon,) int64 global column sums
        self._halo: "Halo | None" = None

    @property
    def adjncy(self) -> np.ndarray:
        """Global neighbour IDs of the local rows (a new array if the level kept only its halo)."""
        if self._adjncy is not None:
            return self._adjncy
        halo = self._halo
        return np.concatenate([np.arange(halo.lo, halo.lo + self.nlocal, dtype=np.int64), halo.ghosts])[halo.col]

    def keep_halo(self, comm: "Intracomm", max_bytes: int = DEFAULT_MAX_BYTES) -> "Halo":
        """This level's halo, built once and kept with the level, which drops `adjncy` (the
        halo holds the same neighbours in half the bytes). Collective."""
        halo = Halo.build(comm, self, max_bytes)
        self._halo, self._adjncy = halo, None
        return halo

    def with_totals(self, comm: "Intracomm") -> "LevelGraph":
        """Fill `total` (collective)."""
        self.total = allreduce_sum(comm, self.vwgt.sum(axis=0))
        return self

    @property
    def nlocal(self) -> int:
        return len(self.xadj) - 1

    @property
    def entries(self) -> int:
        """Local adjacency entries."""
        return int(self.xadj[-1])

    @property
    def n(self) -> int:
        return int(self.vtxdist[-1])

    @property
    def ncon(self) -> int:
        return self.vwgt.shape[1]

    def owner(self, ids: np.ndarray) -> np.ndarray:
        """Rank owning each global vertex ID."""
        return owner_of(self.vtxdist, ids)

    def global_entries(self, comm: "Intracomm") -> int:
        """Adjacency entries over all ranks (twice the edges). Collective."""
        return int(allreduce_sum(comm, np.array([self.entries]))[0])

    def first(self, comm: "Intracomm") -> int:
        """Global ID of this rank's first vertex."""
        return int(self.vtxdist[comm.Get_rank()])


@dataclass
class Halo:
    """Ghost vertices of one rank of a LevelGraph and the plan to refresh their values."""

    ghosts: np.ndarray        # (nghost,) global IDs, ascending, not owned here
    col: np.ndarray           # (m,) extended local index of every adjacency entry (int32 if it fits)
    send_local: np.ndarray    # local indices of own vertices other ranks need, grouped by rank
    send_counts: np.ndarray   # (R,) rows to each rank
    recv_order: np.ndarray    # where each received row goes among the ghosts
    recv_counts: np.ndarray   # (R,) ghosts owned by each rank
    # Over all ranks: the most rows a rank sends or receives in a refresh, and to or from one
    # peer. A refresh's rounds follow from them and its row size: no collective to plan it.
    traffic: Tuple[int, int]
    lo: int = 0               # global ID of the rank's first vertex
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def build(cls, comm: "Intracomm", g: LevelGraph, max_bytes: int = DEFAULT_MAX_BYTES) -> "Halo":
        """Collective: each rank asks each ghost's owner once, and remembers what it is asked.
        A level that kept its halo (`LevelGraph.keep_halo`) returns that one."""
        if g._halo is not None:
            return g._halo if g._halo.max_bytes == max_bytes else replace(g._halo, max_bytes=max_bytes)
        lo, hi = g.first(comm), g.first(comm) + g.nlocal
        adjncy = g.adjncy
        # In pieces: the finest level's halo is built next to its whole adjacency.
        spans = [(e, min(e + HALO_PIECE, len(adjncy))) for e in range(0, len(adjncy), HALO_PIECE)]
        # A sort, not np.unique: numpy 2's hash-based unique is far slower on millions of IDs.
        ghosts = sorted_unique(np.concatenate(
            [np.empty(0, np.int64)] + [sorted_unique(a[(a < lo) | (a >= hi)]) for a in (adjncy[e0:e1] for e0, e1 in spans)]))
        # Half the bytes of the largest array a level holds besides adjncy, where indices fit.
        col = np.empty(len(adjncy), dtype=np.int32 if g.nlocal + len(ghosts) <= COL32_LIMIT else np.int64)
        for e0, e1 in spans:
            a, c = adjncy[e0:e1], col[e0:e1]
            remote = (a < lo) | (a >= hi)
            np.subtract(a, lo, out=c, casting="unsafe")   # remote entries are set next
            c[remote] = g.nlocal + np.searchsorted(ghosts, a[remote])
        order, counts = group_by_owner(g.owner(ghosts), comm.Get_size())
        (asked,), asked_counts = alltoallv_grouped(comm, [ghosts], counts, order, max_bytes)
        traffic = allreduce_max(comm, np.array([max(len(asked), len(ghosts)),
                                                max(asked_counts.max(initial=0), counts.max(initial=0))]))
        return cls(ghosts, col, asked - lo, asked_counts, order, counts, (int(traffic[0]), int(traffic[1])),
                   lo, max_bytes)

    @property
    def nghost(self) -> int:
        return len(self.ghosts)

    def ghost_values(self, comm: "Intracomm", local: np.ndarray) -> np.ndarray:
        """Values of the ghosts, given every rank's values of its own vertices. Collective: the
        Alltoallv rounds alone, so every rank passes `local` of one dtype and row shape (the
        same code builds it on every rank; `alltoallv_grouped` is the checked path)."""
        rounds = rounds_for(*self.traffic, comm.Get_size(), row_bytes_of(local), self.max_bytes)
        (got,) = alltoallv_planned(comm, [np.ascontiguousarray(local[self.send_local])], self.send_counts,
                                   self.recv_counts, rounds)
        out = np.empty((self.nghost, *local.shape[1:]), dtype=local.dtype)
        out[self.recv_order] = got
        return out

    def extend(self, comm: "Intracomm", local: np.ndarray) -> np.ndarray:
        """Own values followed by the ghosts' values: index it with `col`. Collective."""
        return np.concatenate([local, self.ghost_values(comm, local)])

    def ext_ids(self, g: LevelGraph, comm: "Intracomm") -> np.ndarray:
        """Global ID of every extended local index."""
        return np.concatenate([np.arange(g.first(comm), g.first(comm) + g.nlocal, dtype=np.int64), self.ghosts])


def block_caps(total: np.ndarray, k: int, imbalance: "float | np.ndarray") -> np.ndarray:
    """Largest weight a block may carry in each constraint: `imbalance` times the average,
    as METIS and DGL define imbalance (max / average), but never below the average rounded
    up (a 0/1 column of total W cannot do better than ceil(W / k)). `imbalance`: one factor,
    or one per column."""
    total = np.asarray(total, dtype=np.int64)
    # Above k the cap is the whole total anyway; capping first keeps the product inside int64.
    cap = share_of(total, np.minimum(imbalance, k), k)
    return np.minimum(np.maximum(cap, -(-total // k)), total)


def share_of(total: np.ndarray, factor: "float | np.ndarray", k: int) -> np.ndarray:
    """floor(factor * total / k) as int64, per column: `factor` average blocks of `total`
    (the 1e-9 keeps a product that is an integer from rounding just below it)."""
    return np.floor(factor * np.asarray(total, dtype=np.int64) / k + 1e-9).astype(np.int64)


def block_weights(comm: "Intracomm", g: LevelGraph, parts: np.ndarray, k: int) -> np.ndarray:
    """(k, ncon) global weight of every block in every constraint. Collective (one Allreduce)."""
    local = np.zeros((k, g.ncon), dtype=np.int64)
    np.add.at(local, parts, g.vwgt)
    return allreduce_sum(comm, local)

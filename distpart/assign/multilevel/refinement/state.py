"""What the rebalancer and Jet share on one level: the fixed facts of one call
(`Refinement`: degrees, tie keys, caps, weight classes) and the Allreduced state of a
partition (`State`, from `Refinement.evaluate`: ghosts' blocks, block weights, cut, each
row's entries to other blocks), the quantity the rebalancer descends on (`overload`), and each
vertex's edge weight to each block (`connections`). Every value is a function of global IDs
and Allreduced integer sums, so it is the same for any number of ranks.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np

from ....arrays import group_by_owner, keyed_permutation, segment_sums
from ....mpi.exchange import allreduce_sum, alltoallv_grouped, concat_ranges
from ..graph import EVALUATE_PIECE, HUB_SKEW, Halo, LevelGraph, is_unit, row_pieces
from .select import QBITS

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

DENSE_ENTRIES = 1 << 22        # entries of one dense (rows x blocks [x constraints]) block at a time
EPS = 1e-12                    # below any real change of normalised overload (>= 1 / total)
HAIR = 0.01                    # a target may end this fraction of an average block above its cap
MOVED_PIECE = EVALUATE_PIECE // 8   # adjacency entries of moved rows `evaluate` handles at once
INCREMENTAL_SHARE = 4          # `evaluate` passes over the moved rows' entries while below 1/this of all
HUB_DEGREE = 256               # moves of vertices above this degree (or HUB_SKEW x average) priced by degree


def overload(bw: np.ndarray, caps: np.ndarray, avg: np.ndarray) -> float:
    """Total weight above cap over blocks and constraints, each constraint in units of its
    average block weight (so a 0/1 train column counts as much as the node count)."""
    return float((np.maximum(np.asarray(bw) - caps, 0) / avg).sum())


def narrow(ext: np.ndarray, k: int) -> np.ndarray:
    """Block ids in the smallest integer type that holds k blocks: the edge passes gather
    them at random, and a level's int8 ids stay in cache where int64 ones do not."""
    dtype = np.int8 if k <= 127 else np.int16 if k <= 32767 else np.int32 if k <= 2**31 - 1 else np.int64
    return ext if ext.dtype == dtype else ext.astype(dtype)


def connections(g: LevelGraph, halo: Halo, ext: np.ndarray, rows: np.ndarray, k: int,
                unit: bool = False) -> np.ndarray:
    """(len(rows), k) int64 edge weight from each of the given local rows to each block (`ext`: extended block ids; `unit`: every edge weight is 1, so edges are counted).
    Rows go in pieces of the level (EVALUATE_PIECE entries): edge-length temporaries of one
    piece. Sums of integer weights in float64 are exact below 2**53."""
    out = np.empty((len(rows), k), dtype=np.int64)
    if len(rows) == 0:
        return out
    ext = narrow(ext, k)
    if np.any(rows[1:] < rows[:-1]):
        order = np.argsort(rows, kind="stable")
        out[order] = connections(g, halo, ext, rows[order], k, unit)
        return out
    for lo, hi in row_pieces(g.xadj, EVALUATE_PIECE):
        a, b = np.searchsorted(rows, [lo, hi])
        if a < b:
            out[a:b] = _piece_connections(g, halo, ext, rows[a:b], k, unit, lo, hi)
    return out


def _piece_connections(g: LevelGraph, halo: Halo, ext: np.ndarray, rows: np.ndarray, k: int, unit: bool,
                       lo: int, hi: int) -> np.ndarray:
    """`connections` of rows inside the row range [lo, hi)."""
    deg = g.xadj[rows + 1] - g.xadj[rows]
    e0, e1 = int(g.xadj[lo]), int(g.xadj[hi])
    if 2 * int(deg.sum()) > e1 - e0:
        # Most of the piece's edges: one pass over all of them, other rows counted into a
        # spare row, beats gathering the rows' edges one range at a time.
        pos = np.full(hi - lo, len(rows), dtype=np.int64)
        pos[rows - lo] = np.arange(len(rows), dtype=np.int64)
        key = np.repeat(pos * k, np.diff(g.xadj[lo:hi + 1]))
        key += ext[halo.col[e0:e1]]
        weights = None if unit else g.adjwgt[e0:e1]
    else:
        idx = concat_ranges(g.xadj[rows], deg)
        key = np.repeat(np.arange(len(rows), dtype=np.int64) * k, deg) + ext[halo.col[idx]]
        weights = None if unit else g.adjwgt[idx]
    sums = np.bincount(key, weights=weights, minlength=(len(rows) + 1) * k)[:len(rows) * k]
    return (sums if unit else np.rint(sums)).astype(np.int64).reshape(len(rows), k)


def row_counts(xadj: np.ndarray, flags: np.ndarray, dtype: type) -> np.ndarray:
    """(nlocal,) how many True in `flags` (one per adjacency entry) each row has."""
    out = np.zeros(len(xadj) - 1, dtype=dtype)
    has = np.flatnonzero(xadj[1:] > xadj[:-1])
    if len(has):
        out[has] = np.add.reduceat(flags, xadj[has], dtype=dtype)
    return out


def chunks(n: int, width: int):
    """Slices of [0, n) whose dense (rows x width) blocks stay within DENSE_ENTRIES."""
    step = max(1, DENSE_ENTRIES // max(width, 1))
    return (slice(lo, min(lo + step, n)) for lo in range(0, n, step))


def column_sums(groups: np.ndarray, weights: np.ndarray, ngroups: int) -> np.ndarray:
    """(ngroups, ncon) int64 sums of weight rows per group (bincount, exact below 2**53)."""
    out = np.zeros((ngroups, weights.shape[1]), dtype=np.int64)
    for c in range(weights.shape[1]):
        out[:, c] = np.rint(np.bincount(groups, weights=weights[:, c], minlength=ngroups))
    return out


def weight_classes(w: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(class of each row, the distinct rows): the finest level has a handful of distinct
    weight rows, so per-class tables replace per-vertex (rows x blocks x constraints) work."""
    if len(w) == 0:
        return np.zeros(0, dtype=np.int64), w
    span = w.max(axis=0) + 1
    if np.any(w < 0) or float(np.prod(span.astype(np.float64))) >= 2.0**62:
        return np.arange(len(w), dtype=np.int64), w
    code = w @ np.concatenate([[1], np.cumprod(span[:-1])]).astype(np.int64)
    _, first, cls = np.unique(code, return_index=True, return_inverse=True)
    return cls.reshape(-1).astype(np.int64), w[first]


@dataclass
class State:
    """One partition as the refiners see it, after `Refinement.evaluate`."""

    ext: np.ndarray       # extended block ids: own vertices, then the ghosts
    bw: np.ndarray        # (k, ncon) global block weights
    cut: int              # global cut (each undirected edge once)
    border: np.ndarray    # (nlocal,) bool: some neighbour in another block
    over: float           # `overload` of bw
    extra: np.ndarray     # the Allreduced extra counters `evaluate` was given

    @property
    def feasible(self) -> bool:
        return self.over == 0.0

    def better_than(self, other: "Optional[State]") -> bool:
        """Feasible beats infeasible; then less cut when feasible, less overload (then less
        cut) when not."""
        if other is None:
            return True
        if self.feasible != other.feasible:
            return self.feasible
        if self.feasible:
            return self.cut < other.cut
        return (self.over, self.cut) < (other.over, other.cut)


class Refinement:
    """What Jet and the rebalancer compute once per call on one level."""

    def __init__(self, comm: "Intracomm", g: LevelGraph, halo: Halo, k: int, caps: np.ndarray,
                 seed: int = 0) -> None:
        self.g, self.halo, self.k = g, halo, int(k)
        self.caps = np.asarray(caps, dtype=np.int64).reshape(-1)
        total = g.total if g.total is not None else allreduce_sum(comm, g.vwgt.sum(axis=0))
        self.total = np.asarray(total, dtype=np.int64)
        self.avg = np.maximum(self.total, 1) / self.k   # an all-zero column has nothing to balance
        self.hair = np.ceil(HAIR * self.avg).astype(np.int64)
        self.deg = np.diff(g.xadj)
        self._latest: "Optional[weakref.ref]" = None   # the last state `evaluate` returned (not kept alive)
        self._cnt: "Optional[np.ndarray]" = None  # (nlocal,) its rows' entries to other blocks
        self._small: "Optional[np.ndarray]" = None   # its `ext` narrowed (`narrow`), for the edge passes
        self.cnt_dtype = np.int32 if len(self.deg) == 0 or self.deg.max() < 2**31 else np.int64
        self.wdeg = segment_sums(g.xadj, g.adjwgt)
        self.unit = is_unit(g.adjwgt)   # the finest level: edges are counted, not weighed
        self.hub_degree = max(HUB_DEGREE, HUB_SKEW * g.global_entries(comm) // max(g.n, 1))
        # Ties go by a seeded permutation of global IDs: unique, and the same for any R.
        self.tie = keyed_permutation(halo.ext_ids(g, comm), max(g.n, 1), seed)
        self.cls, self.classes = weight_classes(g.vwgt)
        self.gbits = max(1, (max(g.n, 1) - 1).bit_length())
        self.nbits = QBITS + self.gbits

    def _forget(self, ref: "weakref.ref") -> None:
        """The last state is gone: so are its counts."""
        if ref is self._latest:
            self._latest = self._cnt = self._small = None

    def _narrowed(self, st: "State") -> np.ndarray:
        """`narrow(st.ext)`: kept for the last state evaluated, made for any other."""
        if self._latest is not None and st is self._latest():
            return self._small
        return narrow(st.ext, self.k)

    def connections(self, st: "State", rows: np.ndarray) -> np.ndarray:
        """The rebalancer's `connections` of the given rows: summed over edges for border
        rows, the weighted degree to the own block for the others (most rows of a good
        partition) and for hubs. A hub's move would cut most of its edges whatever the
        target: taking its degree as its loss ranks it last, as it belongs, without passing
        over the edges that half of RMAT's adjacency lies in (KaMinPar's node balancer
        leaves hubs out altogether)."""
        conn = np.zeros((len(rows), self.k), dtype=np.int64)
        b = st.border[rows] & (self.deg[rows] <= self.hub_degree)
        conn[b] = connections(self.g, self.halo, self._narrowed(st), rows[b], self.k, self.unit)
        inner = rows[~b]
        conn[np.flatnonzero(~b), st.ext[inner]] = self.wdeg[inner]
        return conn

    def evaluate(self, comm: "Intracomm", parts: np.ndarray, extra: Tuple[int, ...] = (),
                 prev: "Optional[State]" = None) -> State:
        """Refresh the ghosts' blocks (one halo exchange), then block weights, cut and `extra`
        counters summed over ranks in one Allreduce. With `prev` (the state `parts` was made
        from by a few moves) only the moved vertices' edges are passed over. Collective."""
        g, k = self.g, self.k
        parts = np.asarray(parts, dtype=np.int64)
        moved = None
        # Only the last state evaluated keeps its per-row counts (one array, not one per state).
        if prev is not None and self._latest is not None and prev is self._latest():
            moved = np.flatnonzero(parts != prev.ext[:g.nlocal])
            work = allreduce_sum(comm, np.array([int(self.deg[moved].sum()), g.entries]))
            # An entry of a moved row costs a few passes' worth: past a quarter of all, one pass.
            if INCREMENTAL_SHARE * work[0] > work[1]:
                moved = None
        ext = self.halo.extend(comm, parts)
        own = ext[:g.nlocal]
        small = narrow(ext, k)
        if moved is not None:
            cnt, cut2 = self._moved_counts(comm, prev, small, moved)
            w = g.vwgt[moved]
            bw_local = column_sums(own[moved], w, k) - column_sums(prev.ext[moved], w, k)
        else:
            self._latest = self._cnt = self._small = None   # freed before its successors are allocated
            cnt, cut2 = np.zeros(g.nlocal, dtype=self.cnt_dtype), 0
            # In pieces of rows: edge-length temporaries of one piece, not of the whole level.
            for lo, hi in row_pieces(g.xadj, EVALUATE_PIECE):
                e0, e1 = int(g.xadj[lo]), int(g.xadj[hi])
                diff = small[self.halo.col[e0:e1]] != np.repeat(small[lo:hi], self.deg[lo:hi])
                cut2 += np.count_nonzero(diff) if self.unit else int(g.adjwgt[e0:e1][diff].sum())
                cnt[lo:hi] = row_counts(g.xadj[lo:hi + 1] - e0, diff, self.cnt_dtype)
            bw_local = column_sums(own, g.vwgt, k)
        local = np.concatenate([bw_local.reshape(-1), [cut2], np.asarray(extra, dtype=np.int64)])
        red = allreduce_sum(comm, local)
        bw = red[:k * g.ncon].reshape(k, g.ncon)
        cut2 = int(red[k * g.ncon])
        if moved is not None:
            bw, cut2 = bw + prev.bw, cut2 + 2 * prev.cut
        # Each cut edge is seen once from each end, wherever the ends live.
        st = State(ext, bw, cut2 // 2, cnt > 0, overload(bw, self.caps, self.avg), red[k * g.ncon + 1:])
        self._latest, self._cnt, self._small = weakref.ref(st, self._forget), cnt, small
        return st

    def _moved_counts(self, comm: "Intracomm", prev: State, small: np.ndarray, moved: np.ndarray
                      ) -> Tuple[np.ndarray, int]:
        """(each row's entries to other blocks, this rank's share of the change of twice the
        cut) after the local rows `moved` (and ghosts) changed block since `prev`, from the
        moved rows' entries alone. The adjacency is symmetric: a row that did not move sees
        the change of an entry to a moved vertex (u, v) through its mirror (v, u), which the
        owner of v sends it. Collective (one exchange)."""
        g, halo, nlocal = self.g, self.halo, self.g.nlocal
        old = self._small   # `prev` is the last state evaluated: its narrowed ids and counts
        cnt, cut2 = self._cnt, 0   # updated in place
        ids, change = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        deg = self.deg[moved]
        # In pieces of MOVED_PIECE entries: this pass holds several times the full pass's
        # bytes per entry, and its pieces must stay below that pass's memory.
        ends = np.searchsorted(np.cumsum(deg), np.arange(MOVED_PIECE, int(deg.sum()), MOVED_PIECE), side="right")
        for lo, hi in zip([0, *ends.tolist()], [*ends.tolist(), len(moved)]):
            rows, d = moved[lo:hi], deg[lo:hi]
            idx = concat_ranges(g.xadj[rows], d)
            v = halo.col[idx]
            now = small[v] != np.repeat(small[rows], d)
            cnt[rows] = row_counts(np.concatenate([[0], np.cumsum(d)]), now, np.int64)
            delta = now.view(np.int8) - (old[v] != np.repeat(old[rows], d)).view(np.int8)
            del now
            # An entry between two moved vertices is seen from both ends, any other one from
            # its moved end only: it counts twice there.
            both = small[v] != old[v]
            if self.unit:
                cut2 += 2 * int(delta.sum(dtype=np.int64)) - int(delta[both].sum(dtype=np.int64))
            else:
                w = g.adjwgt[idx] * delta
                cut2 += 2 * int(w.sum()) - int(w[both].sum())
                del w
            tell = ~both & (delta != 0)
            v, delta = v[tell], delta[tell]
            here = v < nlocal
            # Values of cnt's own dtype: np.add.at's fast path, 35x the casting one.
            np.add.at(cnt, v[here], delta[here].astype(cnt.dtype))
            ids.append(halo.ghosts[v[~here] - nlocal])
            change.append(delta[~here].astype(np.int64))
        ids, change = np.concatenate(ids), np.concatenate(change)
        order, counts = group_by_owner(g.owner(ids), comm.Get_size())
        (got, change), _ = alltoallv_grouped(comm, [ids, change], counts, order, halo.max_bytes)
        np.add.at(cnt, got - halo.lo, change.astype(cnt.dtype))
        return cnt, cut2

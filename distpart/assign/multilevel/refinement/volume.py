"""Refinement of the total communication volume (`--objective vol`), on the finest level.

DGL's `partition_graph(objtype="vol")` asks METIS for the least total communication volume:
every vertex counts once for each other block among its neighbours (the halo a partition
must fetch, summed). As a hypergraph this is the connectivity objective, sum over nets of
(lambda - 1), with one net per vertex v holding v and its neighbours (KaHyPar's
definition). With phi_v(p) the pins of v's net in block p, moving u from a to b changes the
objective by the sum over the nets holding u (its own and its neighbours') of
[phi_v(a) == 1] - [phi_v(b) == 0]: a net leaves a when u was its only pin there and enters
b when it had none. Each rank keeps two bit rows per net (phi == 0, phi == 1), packed, and
refreshes its ghosts' rows once per round. A round moves the border vertices whose best
move gains, admitted into each block within its room: first one class of
a seeded colouring, many moves at once; if together they do not lower the objective
(moves that share a net can spoil each other's gains) they are undone, the colouring gets
finer, and the round moves only candidates that come first among every candidate within
two hops: they share no net, so their gains add up exactly. All of it integer and per
vertex from global state, ties by the seeded global-ID key: the same for any R.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from ....mpi.exchange import allreduce_sum, concat_ranges
from ..graph import Halo, LevelGraph
from .select import priority_keys, within_room
from .state import Refinement, State, chunks

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

__all__ = ["volume_refine", "net_bits", "volume_gains"]

MAX_ROUNDS = 60        # a backstop: the idle rule ends every run long before
MAX_CLASSES = 16       # the finest colouring tried after rounds that did not pay
EDGE_PIECE = 1 << 21   # adjacency entries whose unpacked bit rows are held at once


def net_bits(g: LevelGraph, halo: Halo, ext: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray, int]:
    """(zero, one, volume) of this rank's nets: packed bit rows (nlocal, ceil(k/8)) of the
    blocks holding no pin / exactly one pin of each vertex's net (itself and its
    neighbours), and the rank's share of the total volume, sum of (lambda - 1)."""
    nbytes = -(-k // 8)
    zero = np.empty((g.nlocal, nbytes), dtype=np.uint8)
    one = np.empty((g.nlocal, nbytes), dtype=np.uint8)
    volume = 0
    deg = np.diff(g.xadj)
    own = ext[:g.nlocal]
    for s in chunks(g.nlocal, k):
        rows = np.arange(s.start, s.stop, dtype=np.int64)
        d = deg[rows]
        idx = concat_ranges(g.xadj[rows], d)
        row = np.repeat(np.arange(len(rows), dtype=np.int64), d)
        pins = np.bincount(np.concatenate([row * k + ext[halo.col[idx]], np.arange(len(rows)) * k + own[rows]]),
                           minlength=len(rows) * k).reshape(len(rows), k)
        zero[s] = np.packbits(pins == 0, axis=1)
        one[s] = np.packbits(pins == 1, axis=1)
        volume += int(np.count_nonzero(pins)) - len(rows)
    return zero, one, volume


def _bit(packed: np.ndarray, rows: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Bit `blocks[i]` of packed row `rows[i]` (np.packbits order: most significant first)."""
    return (packed[rows, blocks >> 3] >> (7 - (blocks & 7)).astype(np.uint8)) & 1


def volume_gains(g: LevelGraph, halo: Halo, ext: np.ndarray, zero: np.ndarray, one: np.ndarray,
                 rows: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """(target, gain) of the given local rows: the block whose move lowers the volume most
    (ties to the lower block) and by how much. `zero`, `one`: extended packed bit rows."""
    target = np.empty(len(rows), dtype=np.int64)
    gain = np.empty(len(rows), dtype=np.int64)
    deg = g.xadj[rows + 1] - g.xadj[rows]
    piece = max(1, EDGE_PIECE // max(k, 1))
    ends = np.searchsorted(np.cumsum(deg), np.arange(piece, int(deg.sum()), piece), side="right")
    for lo, hi in zip([0, *ends.tolist()], [*ends.tolist(), len(rows)]):
        r, d = rows[lo:hi], deg[lo:hi]
        if len(r) == 0:
            continue
        idx = concat_ranges(g.xadj[r], d)
        nets = np.concatenate([halo.col[idx], r])           # the neighbours' nets, then u's own
        owner = np.concatenate([np.repeat(np.arange(len(r), dtype=np.int64), d), np.arange(len(r))])
        a = ext[r]
        leaves = np.bincount(owner, weights=_bit(one, nets, a[owner]), minlength=len(r))
        order = np.argsort(owner, kind="stable")
        starts = np.searchsorted(owner[order], np.arange(len(r)))
        enters = np.add.reduceat(np.unpackbits(zero[nets[order]], axis=1, count=k).astype(np.int32), starts, axis=0)
        enters[np.arange(len(r)), a] = np.iinfo(np.int32).max
        best = enters.argmin(axis=1)
        target[lo:hi] = best
        gain[lo:hi] = np.rint(leaves).astype(np.int64) - enters[np.arange(len(r)), best]
    return target, gain


def volume_refine(comm: "Intracomm", g: LevelGraph, halo: Halo, parts: np.ndarray, k: int, caps: np.ndarray,
                  seed: int = 0) -> np.ndarray:
    """Blocks of this rank's vertices with less total communication volume, every block
    within `caps` that was (a block over its cap takes no vertex). Collective; the same for
    any R given (g, parts, seed)."""
    ctx = Refinement(comm, g, halo, k, caps, seed)
    st = ctx.evaluate(comm, parts)
    zero, one, volume = _nets(comm, ctx, st)
    classes = 2
    for rnd in range(MAX_ROUNDS):
        rows = np.flatnonzero(st.border)
        target, gain = volume_gains(g, halo, st.ext, zero, one, rows, k)
        pick = gain > 0
        rows, target, gain = rows[pick], target[pick], gain[pick]
        if int(allreduce_sum(comm, np.array([len(rows)]))[0]) == 0:
            break   # no single move lowers the volume
        # Many moves at once (one colour class) when they do not spoil each other's gains,
        # else only moves that share no net, whose gains add up exactly.
        for batch in ((ctx.tie[rows] + rnd) % classes == 0, _apart(comm, ctx, rows, gain)):
            trial = _moved(comm, ctx, st, rows[batch], target[batch], gain[batch])
            if trial is None:
                continue
            t_zero, t_one, t_volume = _nets(comm, ctx, trial)
            if t_volume < volume:
                st, zero, one, volume = trial, t_zero, t_one, t_volume
                break
            classes = min(2 * classes, MAX_CLASSES)
        else:
            break
    return st.ext[:g.nlocal].copy()


def _moved(comm: "Intracomm", ctx: Refinement, st: State, rows: np.ndarray, target: np.ndarray,
           gain: np.ndarray) -> "State | None":
    """The state after the moves each block has room for under its cap, best gain first, None
    if none fits. No credit for what leaves a block (Jet's `cap_inflow` gives it, and its
    rebalancer repairs the rest): every block stays within its cap."""
    w = ctx.g.vwgt[rows]
    room = np.maximum(ctx.caps - st.bw, 0)
    fits = (w <= room[target]).all(axis=1)
    rows, target, gain, w = rows[fits], target[fits], gain[fits], w[fits]
    keys = priority_keys(-gain.astype(np.float64), ctx.tie[rows], ctx.gbits)
    movers = rows[within_room(comm, keys, target, w, room, ctx.nbits)]
    if int(allreduce_sum(comm, np.array([len(movers)]))[0]) == 0:
        return None
    new = st.ext[:ctx.g.nlocal].copy()
    new[movers] = target[np.searchsorted(rows, movers)]
    return ctx.evaluate(comm, new, prev=st)


def _apart(comm: "Intracomm", ctx: Refinement, rows: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """Which candidates go first (more gain, then the tie key) among every candidate within
    two hops: no two of them share a net. Two halo exchanges of a running minimum."""
    g = ctx.g
    key = np.full(g.nlocal, np.iinfo(np.int64).max, dtype=np.int64)
    key[rows] = priority_keys(-gain.astype(np.float64), ctx.tie[rows], ctx.gbits)
    low = key
    for _ in range(2):
        ext = ctx.halo.extend(comm, low)
        low = np.minimum(low, _segment_min(g.xadj, ext[ctx.halo.col], low))
    return low[rows] == key[rows]


def _segment_min(xadj: np.ndarray, values: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """Minimum of each row's adjacency values (`empty` for a row without neighbours)."""
    out = empty.copy()
    has = np.flatnonzero(np.diff(xadj) > 0)
    if len(has):
        out[has] = np.minimum.reduceat(values, xadj[has])
    return out


def total_volume(comm: "Intracomm", g: LevelGraph, halo: Halo, parts: np.ndarray, k: int) -> int:
    """The partition's total communication volume (each vertex once per other block among
    its neighbours). Collective."""
    ext = halo.extend(comm, np.asarray(parts, dtype=np.int64))
    return int(allreduce_sum(comm, np.array([net_bits(g, halo, ext, k)[2]]))[0])


def _nets(comm: "Intracomm", ctx: Refinement, st: State) -> Tuple[np.ndarray, np.ndarray, int]:
    """Extended packed bit rows of every net this rank sees, and the global volume."""
    zero, one, volume = net_bits(ctx.g, ctx.halo, st.ext, ctx.k)
    both = ctx.halo.extend(comm, np.concatenate([zero, one], axis=1))
    half = zero.shape[1]
    return (np.ascontiguousarray(both[:, :half]), np.ascontiguousarray(both[:, half:]),
            int(allreduce_sum(comm, np.array([volume]))[0]))

"""Exchanges for the overload single moves cannot lower (`swap_state`, `swap_moves`): a block
over in one constraint sends vertices to a block with room there and takes back vertices
that carry none of it. Jet calls it on the finest level. Every decision comes from
Allreduced integer sums, so the result is the same for any number of ranks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from ....mpi.exchange import allreduce_sum
from .balancer import all_connections, balance_state
from .select import first_reaching, priority_keys
from .state import EPS, Refinement, State, overload

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


def swap_state(comm: "Intracomm", ctx: Refinement, st: State) -> State:
    """One round of `swap_moves` from the infeasible `st`, then one rebalancer round if a
    block is still over a cap. `st` itself if no exchange lowers the overload. One round per
    call: more cut little more for twice the time (benchmarks/bench_assign.py, RMAT 2M, C3).
    Collective."""
    movers, targets = swap_moves(comm, ctx, st)
    parts = st.ext[:ctx.g.nlocal].copy()
    parts[movers] = targets
    new = ctx.evaluate(comm, parts, (len(movers),), prev=st)
    if new.extra[0] == 0:
        return st
    return balance_state(comm, ctx, new, 1)   # returns `new` itself if it is feasible


def swap_moves(comm: "Intracomm", ctx: Refinement, st: State) -> Tuple[np.ndarray, np.ndarray]:
    """Exchanges for the overload single moves cannot lower: (local vertices, new blocks).
    Collective; the same for any R.

    Seen with in-degree balance: a block over its in-degree cap, and every block with
    in-degree room full in node counts. Moving one node out raises the overload (a node is
    worth more of an average block than the few edges of excess), so `balance_moves` stops.
    Here, per block X over in constraint c (in a fixed order): the block Y with the most
    room in c takes U, X's cheapest vertices carrying c (cut loss per unit of c, up to the
    excess and within Y's room), and gives back V, Y's cheapest vertices carrying no c and
    nothing X is over in, enough to cover what U pushes Y over in the other constraints.
    An exchange is kept only if it lowers the total overload (computed from Allreduced
    sums, so every rank decides alike)."""
    g, caps = ctx.g, ctx.caps
    parts = st.ext[:g.nlocal]
    bw = st.bw.copy()
    taken = np.zeros(g.nlocal, dtype=bool)
    target = np.full(g.nlocal, -1, dtype=np.int64)
    one = np.zeros(0, dtype=np.int64)
    for x, c in np.argwhere(bw > caps):
        x, c = int(x), int(c)
        excess = int(bw[x, c] - caps[c])
        if excess <= 0:
            continue
        cand = np.flatnonzero((parts == x) & (g.vwgt[:, c] > 0) & ~taken)
        # The partner: among blocks with room for the whole excess in c (else the one with
        # the most room in c), the one whose least room (as a share of an average block) in
        # the constraints X's carriers of c carry is largest.
        carried = allreduce_sum(comm, (g.vwgt[cand] > 0).sum(axis=0)) > 0
        room_c = caps[c] - bw[:, c]
        room_c[x] = -1
        score = np.where(carried, (caps - bw) / ctx.avg, np.inf).min(axis=1)
        enough = room_c >= excess if (room_c >= excess).any() else room_c == room_c.max()
        score[~enough | (room_c <= 0)] = -np.inf
        y = int(score.argmax())
        if not np.isfinite(score[y]):
            continue
        room_y = np.maximum(caps - bw[y], 0)
        cand = cand[g.vwgt[cand, c] <= room_y[c]]
        # U: X's vertices carrying c, those that fit Y in every constraint first, then the
        # cheapest per unit of c, until the excess is covered.
        conn = all_connections(ctx, st, cand)
        wc = g.vwgt[cand, c]
        fits = (g.vwgt[cand] <= room_y).all(axis=1)
        keys = priority_keys((conn[:, x] - conn[:, y]) / wc, ctx.tie[cand], ctx.gbits)
        keys |= (~fits).astype(np.int64) << ctx.nbits
        _, upto = first_reaching(comm, keys, np.zeros(len(cand), dtype=np.int64), wc.reshape(-1, 1),
                                 np.array([[excess]]), ctx.nbits + 1)
        u = cand[keys < upto[0, 0]]
        wu = allreduce_sum(comm, g.vwgt[u].sum(axis=0))
        if wu[c] > room_y[c] or not wu.any():
            continue
        # V: what U pushes Y over in the other constraints, back to X.
        need = np.maximum(bw[y] + wu - caps, 0)
        need[c] = 0
        v = one
        if need.any():
            clean = (g.vwgt[:, c] == 0) & (g.vwgt[:, bw[x] > caps] == 0).all(axis=1)
            cand = np.flatnonzero((parts == y) & clean & ~taken)
            units = (g.vwgt[cand] * (need > 0) / ctx.avg).sum(axis=1)
            cand, units = cand[units > 0], units[units > 0]
            conn = all_connections(ctx, st, cand)
            keys = priority_keys((conn[:, y] - conn[:, x]) / units, ctx.tie[cand], ctx.gbits)
            _, upto = first_reaching(comm, keys, np.zeros(len(cand), dtype=np.int64), g.vwgt[cand],
                                     need.reshape(1, -1), ctx.nbits)
            v = cand[((g.vwgt[cand] > 0) & (keys[:, None] < upto[0])).any(axis=1)]
        wv = allreduce_sum(comm, g.vwgt[v].sum(axis=0))
        new = bw.copy()
        new[x] += wv - wu
        new[y] += wu - wv
        if overload(new, caps, ctx.avg) >= overload(bw, caps, ctx.avg) - EPS:
            continue
        bw = new
        taken[u] = taken[v] = True
        target[u], target[v] = y, x
    movers = np.flatnonzero(taken)
    return movers, target[movers]

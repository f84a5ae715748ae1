"""Jet refinement (Gilbert et al. 2024), distributed as dKaMinPar distributes it.

One iteration: every unlocked border vertex picks its best other block by connection and is a
candidate if the move loses less than a fraction of its connection to its own block
(`candidates`); the afterburner recomputes each candidate's gain as if every neighbouring
candidate of higher priority (gain, then tie key) had moved, and keeps the moves that still
gain (`afterburner`); movers are locked for the next iteration. Two halo exchanges (blocks,
then candidates' targets and gains) and one Allreduce of block weights and cut per
iteration; the rebalancer runs (REBALANCE_ROUNDS rounds) when the moves leave a block over
its cap, and on the finest level one round of exchanges (`balancer.swap_state`) when that
is not enough. An iteration the rebalancer cannot make feasible again is dropped (the next
starts from the best partition), and MAX_FAILED of them in a row end the level, except on
the finest level with several constraints: that level goes on in constrained mode, where
the candidates the afterburner would move stay put and the others move within each block's
room (`jet_moves`). The best partition seen is returned. Everything is integer or computed
per vertex from integers, and ties go by global ID, so the result does not depend on the
number of ranks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from ....mpi.exchange import allreduce_sum, concat_ranges
from ..graph import Halo, LevelGraph
from .balancer import (Refinement, State, balance_state, chunks, column_sums, connections,
                       priority_keys, swap_state, within_room)

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

__all__ = ["jet", "candidates", "afterburner"]

COARSE_FACTOR = 0.75   # a candidate may lose up to this share of its own-block connection
FINE_FACTOR = 0.25
MIN_GAIN = 0.001       # an iteration counts as progress if it betters the best by 0.1%
MAX_ITERATIONS = 1000  # a backstop only: the idle rule ends every run seen long before
EDGE_PIECE = 1 << 22   # edges the afterburner handles at once
MAX_FAILED = 2         # iterations in a row the rebalancer leaves infeasible before Jet stops
# Rebalancer rounds after one Jet iteration: most iterations it repairs take 2-3, one it
# cannot is dropped anyway, and a round costs about a second per 10M adjacency entries.
# Measured against the default 100: the same cuts on every 200k graph and the Debian graph
# (C3, 1.03 and 1.05); RMAT 200k C3 in 14 s of refinement instead of 35.
REBALANCE_ROUNDS = 3
# Exchanges (balancer.swap_state) after an iteration the rebalancer leaves at most this far
# over (`overload`, in average blocks). Their wins were all below it; above it they moved
# tens of thousands of vertices without repairing the iteration. RMAT 2M/20M with in-degree
# balance: 67.60% cut either way, refinement 107 s without the bound, 81 s with it.
SWAP_MAX_OVER = 0.02
# Constrained mode (see `jet`) ends a level after CONSTRAINED_IDLE iterations without
# MIN_GAIN progress or CONSTRAINED_ITERATIONS in all. An iteration there costs 2.5-4 s on
# RMAT 2M/20M with 2 ranks (10-12 s when it needs the rebalancer), and the cut creeps down
# by hundredths of a percent per iteration after the first ten (in-degree balance,
# constrained from the first failed iteration on, seed 1: 66.75% after 10, 66.43% after 48
# and 330 s; seed 2: 67.52% after 10, 66.60% after 27 and 222 s).
CONSTRAINED_IDLE = 3
CONSTRAINED_ITERATIONS = 10


def jet(comm: "Intracomm", g: LevelGraph, halo: Halo, parts: np.ndarray, k: int, caps: np.ndarray,
        seed: int = 0, finest: bool = False, max_idle: int = 12,
        max_iterations: int = MAX_ITERATIONS) -> np.ndarray:
    """Refined blocks of this rank's vertices: the least-cut partition within `caps` seen (the
    least overloaded one if none is). Collective; the same for any R given (g, parts, seed)."""
    ctx = Refinement(comm, g, halo, k, caps, seed)
    factor = FINE_FACTOR if finest else COARSE_FACTOR
    # Heavy coarse vertices overfill blocks the rebalancer then cannot empty, when several
    # constraints must fit at once: there, moves into a block are capped by its room.
    capped = not finest and g.ncon > 1
    constrained = False
    st = ctx.evaluate(comm, parts)
    best = mark = st
    locked = np.zeros(g.nlocal, dtype=bool)
    idle, moved, failed = 0, -1, 0
    idle_limit, left = max_idle, max_iterations   # both lowered in constrained mode
    while left > 0 and idle < idle_limit:
        left -= 1
        movers, targets = jet_moves(comm, ctx, st, locked, factor, capped, constrained)
        new = st.ext[:g.nlocal].copy()
        new[movers] = targets
        locked = np.zeros(g.nlocal, dtype=bool)
        locked[movers] = True
        st = ctx.evaluate(comm, new, (len(movers),))
        moved, before = int(st.extra[0]), moved
        if not st.feasible:
            st = balance_state(comm, ctx, st, REBALANCE_ROUNDS)
        if finest and not st.feasible and st.over <= SWAP_MAX_OVER:
            # What is left is often what single moves cannot lower (see swap_moves).
            st = swap_state(comm, ctx, st)
        if st.better_than(best):
            best = st
        if best.feasible and not st.feasible:
            # The rebalancer could not undo this iteration's moves (seen with in-degree
            # balance on power-law graphs, where every iteration of a level ended so): go on
            # from the best partition, and stop after a few such iterations in a row rather
            # than spend every remaining one on the rebalancer for nothing.
            failed += 1
            if failed >= MAX_FAILED:
                if not (finest and g.ncon > 1 and not constrained):
                    break
                # On the finest level with several constraints, where the level would end
                # here, go on from the best partition in constrained mode (`jet_moves`),
                # where most iterations need no repair. It keeps the best partition, so it
                # only adds time. RMAT 2M/20M with in-degree balance, seeds 1-3: 67.60%,
                # 68.15%, 69.58% (seed 3: not one iteration of the level kept, the cut
                # stayed METIS's) -> 66.80%, 67.09%, 67.03%. Not sooner: switching at the
                # first failure instead cut less on RMAT 2M but more on RMAT 200k and
                # Debian (64.6% and 20.0% -> 66.7% and 21.8%), where unconstrained
                # iterations that are kept follow failed ones. Nothing stays locked: the
                # failed moves were undone.
                constrained, idle, failed = True, 0, 0
                idle_limit, left = min(max_idle, CONSTRAINED_IDLE), min(left, CONSTRAINED_ITERATIONS)
                locked = np.zeros(g.nlocal, dtype=bool)
            st = best
        else:
            failed = 0
        if progressed(st, mark):
            mark, idle = st, 0
        else:
            idle += 1
        if moved == 0 and before == 0:   # nothing locked and nothing to move: a fixed point
            break
    return best.ext[:g.nlocal].copy()


def progressed(st: State, mark: State) -> bool:
    """Better than `mark` by at least MIN_GAIN (integer comparisons on the cut)."""
    if st.feasible != mark.feasible:
        return st.feasible
    if st.feasible:
        return st.cut * 1000 < mark.cut * (1000 - round(MIN_GAIN * 1000))
    return st.over < mark.over * (1 - MIN_GAIN)


def jet_moves(comm: "Intracomm", ctx: Refinement, st: State, locked: np.ndarray, factor: float,
              capped: bool, constrained: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """One Jet iteration's moves: (local vertices, their new blocks). `capped`: moves into
    a block are capped by its room (`cap_inflow`). `constrained`: the candidates the
    afterburner would move (the eager ones, whose moves broke the balance before) stay
    where they are, the afterburner runs again without them, and the rest is capped.
    Collective."""
    g = ctx.g
    own = st.ext[:g.nlocal]
    target, gain = candidates(g, ctx.halo, st.ext, np.flatnonzero(st.border & ~locked), ctx.k, factor, ctx.unit)
    cand = np.flatnonzero(target != own)
    for rnd in range(2 if constrained else 1):
        both = ctx.halo.extend(comm, np.stack([target, gain], axis=1))
        after = afterburner(g, ctx.halo, st.ext, both[:, 0], both[:, 1], ctx.tie, cand)
        move = after > 0
        if constrained and rnd == 0:
            eager = cand[move]
            target[eager], gain[eager] = own[eager], 0
            cand = cand[~move]
    movers, gains = cand[move], after[move]
    if capped or constrained:
        movers = cap_inflow(comm, ctx, st, movers, target[movers], gains)
    return movers, target[movers]


def candidates(g: LevelGraph, halo: Halo, ext: np.ndarray, rows: np.ndarray, k: int,
               factor: float, unit: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(nlocal,) target block and gain of every local vertex: for the given rows whose best
    other block (most connection; ties to the lower block) loses less than floor(factor *
    own-block connection), that block and the gain; for every other vertex its own block, 0.
    `unit`: every edge weighs 1."""
    target = ext[:g.nlocal].copy()
    gain = np.zeros(g.nlocal, dtype=np.int64)
    for s in chunks(len(rows), k):
        r = rows[s]
        conn = connections(g, halo, ext, r, k, unit)
        i = np.arange(len(r))
        own = conn[i, ext[r]]
        conn[i, ext[r]] = -1
        best = conn.argmax(axis=1)
        gn = conn[i, best] - own
        ok = gn > -np.floor(factor * own).astype(np.int64)
        target[r[ok]], gain[r[ok]] = best[ok], gn[ok]
    return target, gain


def afterburner(g: LevelGraph, halo: Halo, ext: np.ndarray, target: np.ndarray, gain: np.ndarray,
                tie: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Gain of each candidate's move (cand: local rows) assuming every neighbour with higher
    priority (more gain, then smaller tie key) has moved to its target; the others stay.
    target, gain, tie: extended (own vertices, then ghosts); a non-candidate's target is its
    block. Candidates go in pieces of about EDGE_PIECE edges: a handful of edge-length
    temporaries each, not a handful over all the edges at once."""
    out = np.zeros(len(cand), dtype=np.int64)
    deg = g.xadj[cand + 1] - g.xadj[cand]
    ends = np.searchsorted(np.cumsum(deg), np.arange(EDGE_PIECE, int(deg.sum()), EDGE_PIECE), side="right")
    for lo, hi in zip([0, *ends.tolist()], [*ends.tolist(), len(cand)]):
        c, d = cand[lo:hi], deg[lo:hi]
        idx = concat_ranges(g.xadj[c], d)
        row = np.repeat(np.arange(len(c), dtype=np.int64), d)
        v = halo.col[idx]
        u = c[row]
        first = (gain[v] > gain[u]) | ((gain[v] == gain[u]) & (tie[v] < tie[u]))
        block = np.where(first, target[v], ext[v])
        del first, v
        w = g.adjwgt[idx]
        contrib = np.where(block == target[u], w, 0) - np.where(block == ext[u], w, 0)
        out[lo:hi] = np.rint(np.bincount(row, weights=contrib, minlength=len(c)))
    return out


def cap_inflow(comm: "Intracomm", ctx: Refinement, st: State, movers: np.ndarray, targets: np.ndarray,
               gains: np.ndarray) -> np.ndarray:
    """The movers each target block can take, best gain first: its room under the cap plus
    what its own movers take out, in each constraint (`within_room`). A mover heavier than
    the room is dropped first: the first of a prefix, it would stop every lighter one behind
    it. Collective."""
    g, k = ctx.g, ctx.k
    w = g.vwgt[movers]
    out = allreduce_sum(comm, column_sums(st.ext[movers], w, k))
    room = np.maximum(ctx.caps - st.bw, 0) + out
    fits = (w <= room[targets]).all(axis=1)
    movers, targets, gains, w = movers[fits], targets[fits], gains[fits], w[fits]
    keys = priority_keys(-gains.astype(np.float64), ctx.tie[movers], ctx.gbits)
    return movers[within_room(comm, keys, targets, w, room, ctx.nbits)]

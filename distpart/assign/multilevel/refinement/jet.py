"""Jet refinement (Gilbert et al. 2024), distributed as dKaMinPar distributes it.

One iteration: every unlocked border vertex picks its best other block by connection and is a
candidate if the move loses less than a fraction of its connection to its own block
(`candidates`); the afterburner recomputes each candidate's gain as if every neighbouring
candidate of higher priority (gain, then tie key) had moved, and keeps the moves that still
gain (`afterburner`); movers are locked for the next iteration. Two halo exchanges (blocks,
then candidates' targets and gains) and one Allreduce of block weights and cut per
iteration; the rebalancer runs (REBALANCE_ROUNDS rounds) when the moves leave a block over
its cap, and on the finest level one round of exchanges (`swap.swap_state`) when that
is not enough. An iteration the rebalancer cannot make feasible again is dropped (the next
starts from the best partition), and MAX_FAILED of them in a row end the level, except on
the finest level with several constraints: that level goes on in constrained mode, where
the candidates the afterburner would move stay put and the others move within each block's
room (`jet_moves`). The best partition seen is returned. Everything is integer or computed
per vertex from integers, and ties go by global ID, so the result does not depend on the
number of ranks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Tuple

import numpy as np

from ....mpi.exchange import allreduce_sum, concat_ranges
from ..graph import AFTERBURNER_PIECE, Halo, LevelGraph, is_unit_view
from .balancer import balance_state
from .select import priority_keys, within_room
from .state import Refinement, State, chunks, column_sums, connections, narrow
from .swap import swap_state

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

__all__ = ["jet", "candidates", "afterburner"]

# Tuning values, chosen by benchmarks/bench_assign.py (see benchmarks/results/step1_history.md).
COARSE_FACTOR = 0.75   # a candidate may lose up to this share of its own-block connection
FINE_FACTOR = 0.25
MIN_GAIN = 0.001       # an iteration counts as progress if it betters the best by 0.1%
MAX_ITERATIONS = 1000  # a backstop only: the idle rule ends every run seen long before
MAX_FAILED = 2         # iterations in a row the rebalancer leaves infeasible before Jet stops
REBALANCE_ROUNDS = 3   # rebalancer rounds per iteration: more gave the same cut in more time
SWAP_MAX_OVER = 0.02   # exchanges only this close to feasible (`overload`): further off they do not pay
CONSTRAINED_IDLE = 3   # constrained mode: iterations without MIN_GAIN progress that end it
CONSTRAINED_ITERATIONS = 10   # ... or this many in all: later ones gain little for their time


@dataclass
class JetRun:
    """Jet's loop on one level: the partition it goes on from, the best seen, and its counters."""

    st: State                # where the next iteration starts
    best: State              # the best partition seen (`State.better_than`)
    mark: State              # the last partition that counted as progress (`progressed`)
    locked: np.ndarray       # (nlocal,) bool: the last iteration's movers
    left: int                # iterations left
    idle_limit: int          # iterations in a row without progress that end the level
    constrained: bool = False
    idle: int = 0
    failed: int = 0          # iterations in a row dropped (`keep`)
    moved: int = -1          # vertices the last iteration moved, over all ranks
    before: int = -1         # ... and the one before it

    @classmethod
    def start(cls, st: State, max_idle: int, max_iterations: int) -> "JetRun":
        return cls(st, st, st, np.zeros(len(st.border), dtype=bool), max_iterations, max_idle)

    @property
    def going(self) -> bool:
        return self.left > 0 and self.idle < self.idle_limit

    def keep(self, st: State) -> bool:
        """Take an iteration's result; True if it is dropped. An iteration the rebalancer
        could not make feasible again while a feasible partition is known (seen with
        in-degree balance on power-law graphs) is dropped: the next starts from the best."""
        if st.better_than(self.best):
            self.best = st
        dropped = self.best.feasible and not st.feasible
        self.failed = self.failed + 1 if dropped else 0
        self.st = self.best if dropped else st
        return dropped

    def constrain(self, max_idle: int) -> None:
        """Go on in constrained mode (`jet_moves`), where most iterations need no repair, from
        the best partition and with nothing locked (the failed moves were undone). Only after
        MAX_FAILED drops: unconstrained iterations that are kept often follow failed ones."""
        self.constrained, self.idle, self.failed = True, 0, 0
        self.idle_limit, self.left = min(max_idle, CONSTRAINED_IDLE), min(self.left, CONSTRAINED_ITERATIONS)
        self.locked = np.zeros_like(self.locked)

    def count_progress(self) -> None:
        if progressed(self.st, self.mark):
            self.mark, self.idle = self.st, 0
        else:
            self.idle += 1

    @property
    def at_fixed_point(self) -> bool:
        """Nothing locked and nothing to move."""
        return self.moved == 0 and self.before == 0


def jet(comm: "Intracomm", g: LevelGraph, halo: Halo, parts: np.ndarray, k: int, caps: np.ndarray,
        seed: int = 0, finest: bool = False, max_idle: int = 12,
        max_iterations: int = MAX_ITERATIONS) -> np.ndarray:
    """Refined blocks of this rank's vertices: the least-cut partition within `caps` seen (the
    least overloaded one if none is). Collective; the same for any R given (g, parts, seed).

    MAX_FAILED dropped iterations in a row end the level, except on the finest level with
    several constraints, which goes on in constrained mode (`JetRun.constrain`)."""
    ctx = Refinement(comm, g, halo, k, caps, seed)
    factor = FINE_FACTOR if finest else COARSE_FACTOR
    # Heavy coarse vertices overfill blocks the rebalancer then cannot empty, when several
    # constraints must fit at once: there, moves into a block are capped by its room.
    capped = not finest and g.ncon > 1
    may_constrain = finest and g.ncon > 1
    run = JetRun.start(ctx.evaluate(comm, parts), max_idle, max_iterations)
    while run.going:
        run.left -= 1
        dropped = run.keep(iteration(comm, ctx, run, factor, capped, finest))
        if dropped and run.failed >= MAX_FAILED:
            if not may_constrain or run.constrained:
                break
            run.constrain(max_idle)
        run.count_progress()
        if run.at_fixed_point:
            break
    return run.best.ext[:g.nlocal].copy()


def iteration(comm: "Intracomm", ctx: Refinement, run: JetRun, factor: float, capped: bool,
              finest: bool) -> State:
    """One Jet iteration from `run.st`: the moves (locked for the next iteration), then the
    rebalancer if they overfill a block, and on the finest level the exchanges if that is
    not enough. Collective."""
    g = ctx.g
    movers, targets = jet_moves(comm, ctx, run.st, run.locked, factor, capped, run.constrained)
    parts = run.st.ext[:g.nlocal].copy()
    parts[movers] = targets
    run.locked = np.zeros(g.nlocal, dtype=bool)
    run.locked[movers] = True
    st = ctx.evaluate(comm, parts, (len(movers),), prev=run.st)
    run.before, run.moved = run.moved, int(st.extra[0])
    if not st.feasible:
        st = balance_state(comm, ctx, st, REBALANCE_ROUNDS)
    if finest and not st.feasible and st.over <= SWAP_MAX_OVER:
        st = swap_state(comm, ctx, st)   # what is left is often what single moves cannot lower
    return st


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
        tbits = ctx.gbits
        if int(np.abs(both[:, 1]).max(initial=0)) < 1 << (61 - tbits):
            # (gain, then smaller tie) as one unique key, in place: one gather per entry.
            key = both[:, 1]
            key <<= tbits
            key += (1 << tbits) - 1
            key -= ctx.tie
            after = afterburner(g, ctx.halo, st.ext, both[:, 0], key, None, cand)
        else:
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
    small = narrow(ext, k)
    for s in chunks(len(rows), k):
        r = rows[s]
        conn = connections(g, halo, small, r, k, unit)
        i = np.arange(len(r))
        own = conn[i, ext[r]]
        conn[i, ext[r]] = -1
        best = conn.argmax(axis=1)
        gn = conn[i, best] - own
        ok = gn > -np.floor(factor * own).astype(np.int64)
        target[r[ok]], gain[r[ok]] = best[ok], gn[ok]
    return target, gain


def afterburner(g: LevelGraph, halo: Halo, ext: np.ndarray, target: np.ndarray, gain: np.ndarray,
                tie: "np.ndarray | None", cand: np.ndarray) -> np.ndarray:
    """Gain of each candidate's move (cand: local rows) assuming every neighbour with higher
    priority (more gain, then smaller tie key) has moved to its target; the others stay.
    target, gain, tie: extended (own vertices, then ghosts); a non-candidate's target is its
    block; tie None: `gain` is a unique priority key already (more first). Candidates go in pieces of about AFTERBURNER_PIECE edges: a handful of edge-length
    temporaries each, not a handful over all the edges at once."""
    out = np.zeros(len(cand), dtype=np.int64)
    if len(cand) == 0:
        return out
    k = int(max(ext.max(initial=0), target.max(initial=0))) + 1
    ext8, target8 = narrow(ext, k), narrow(target, k)
    unit = is_unit_view(g.adjwgt)
    deg = g.xadj[cand + 1] - g.xadj[cand]
    ends = np.searchsorted(np.cumsum(deg), np.arange(AFTERBURNER_PIECE, int(deg.sum()), AFTERBURNER_PIECE), side="right")
    for lo, hi in zip([0, *ends.tolist()], [*ends.tolist(), len(cand)]):
        c, d = cand[lo:hi], deg[lo:hi]
        idx = concat_ranges(g.xadj[c], d)
        v = halo.col[idx]
        # The candidate's own values repeated along its row, not gathered per entry.
        if tie is None:
            first = gain[v] > np.repeat(gain[c], d)
        else:
            gv, gu = gain[v], np.repeat(gain[c], d)
            first = (gv > gu) | ((gv == gu) & (tie[v] < np.repeat(tie[c], d)))
            del gv, gu
        block = np.where(first, target8[v], ext8[v])
        del first, v
        plus = block == np.repeat(target8[c], d)
        minus = block == np.repeat(ext8[c], d)
        del block
        if unit:
            contrib = plus.view(np.int8) - minus.view(np.int8)
        else:
            w = g.adjwgt[idx]
            contrib = np.where(plus, w, 0) - np.where(minus, w, 0)
        del plus, minus
        has = np.flatnonzero(d > 0)
        if len(has):
            starts = np.concatenate([[0], np.cumsum(d)[:-1]])[has]
            out[lo + has] = np.add.reduceat(contrib, starts, dtype=np.int64)
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

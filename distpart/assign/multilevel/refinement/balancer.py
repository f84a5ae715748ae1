"""The multi-constraint rebalancer (design note, step 3): vertices leave overloaded blocks,
cheapest per unit of overload first, until every constraint fits.

`rebalance` works in rounds (`balance_state`): one halo exchange and Allreduce to see the
partition (`Refinement.evaluate`), the connections of the overloaded blocks' vertices
(`Pool`), then steps of target choice (`best_targets`), the two selects (cover each block's
excess, cheapest first; fill each target within a hair of its cap) and one Allreduce of the
moved weight (`balance_moves`). Every decision is a function of global IDs, integer weights
and Allreduced integer sums, so the result is the same for any number of ranks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np

from ....mpi.exchange import allreduce_sum
from ..graph import Halo, LevelGraph
from .select import first_reaching, priority_keys, within_room
from .state import EPS, Refinement, State, chunks, column_sums

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

__all__ = ["rebalance", "balance_state", "balance_moves", "best_targets", "all_connections"]

STEPS = 8                      # select steps per rebalancer round
TABLE_ENTRIES = 1 << 18        # per-(weight class, block) tables up to this size
CACHE_ENTRIES = 1 << 24        # candidates x blocks kept (int32) between the steps of a round
PATIENCE = 3                   # rebalancer rounds without less overload before it gives up
MAX_ROUNDS = 100


def rebalance(comm: "Intracomm", g: LevelGraph, halo: Halo, parts: np.ndarray, k: int,
              caps: np.ndarray, seed: int = 0) -> np.ndarray:
    """A partition with no block above `caps` (per constraint) if the rebalancer finds one,
    else the one with the least overload seen (then least cut). Collective; the same for any R."""
    parts = np.asarray(parts, dtype=np.int64)
    local = column_sums(parts, g.vwgt, k)
    if not (allreduce_sum(comm, local) > np.asarray(caps)).any():
        return parts.copy()
    ctx = Refinement(comm, g, halo, k, caps, seed)
    return balance_state(comm, ctx, ctx.evaluate(comm, parts)).ext[:g.nlocal].copy()


def balance_state(comm: "Intracomm", ctx: Refinement, st: State, max_rounds: int = MAX_ROUNDS) -> State:
    """Rounds of `balance_moves` from `st` (at most `max_rounds`) until feasible or no
    progress; the best state seen."""
    best, stalled = st, 0
    for _ in range(max_rounds):
        if st.feasible:
            break
        movers, targets = balance_moves(comm, ctx, st, strict=stalled > 0)
        parts = st.ext[:ctx.g.nlocal].copy()
        parts[movers] = targets
        st = ctx.evaluate(comm, parts, (len(movers),), prev=st)
        if st.extra[0] == 0:   # nothing could move: the same round would repeat
            break
        stalled = 0 if st.over < best.over else stalled + 1
        if st.better_than(best):
            best = st
        if stalled >= PATIENCE:
            break
    return best


def balance_moves(comm: "Intracomm", ctx: Refinement, st: State, strict: bool = False
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """One round: (local vertices to move, their blocks). Collective.

    In steps: every candidate picks its best target for the block weights as they now
    stand, the two selects pick the moves, and one Allreduce updates the block weights. A
    candidate whose best target filled up picks another in the next step, and a block that
    a step pushes over its cap sheds in the next: a round does what many rounds of one step
    would, without their halo exchanges and edge passes. The candidates (the vertices of
    the blocks over a cap so far) and their connections are computed once per round."""
    k, caps = ctx.k, ctx.caps
    bw = st.bw.copy()
    pool = Pool(ctx, st)
    for _ in range(STEPS):
        excess = np.maximum(bw - caps, 0)
        pool.add_blocks(excess.any(axis=1))
        # Once stalled, a target may end a hair over its cap only where some block is over now
        # (by at most the worst excess there): elsewhere the next step moved it back, endlessly.
        # Before that the full hair: it is what lets heavy vertices leave a block at all.
        hair = np.minimum(ctx.hair, excess.max(axis=0)) if strict else ctx.hair
        # Only a vertex carrying a constraint its block is over in can lower the overload.
        live = np.flatnonzero(pool.todo & pool.carries(excess > 0))
        target = np.full(len(live), -1, dtype=np.int64)
        priority = np.zeros(len(live))
        for s in chunks(len(live), k):
            rows = live[s]
            target[s], priority[s] = best_targets(pool.cls[rows], ctx.classes, pool.src[rows],
                                                  pool.connections(rows), bw, caps, hair, ctx.avg)
        has = target >= 0
        live, target, priority = live[has], target[has], priority[has]
        w, src = pool.w[live], pool.src[live]
        keys = priority_keys(priority, pool.tie[live], ctx.gbits)
        # Per overloaded block and constraint it is over in, the cheapest moves carrying
        # that constraint until its excess there is covered.
        _, upto = first_reaching(comm, keys, src, w, excess, ctx.nbits)
        # Only keys below their block's highest cut-off can pass: the full test on those alone.
        near = np.flatnonzero(keys < upto.max(axis=1)[src])
        take = near[((w[near] > 0) & (keys[near, None] < upto[src[near]])).any(axis=1)]
        live, target, keys, w, src = live[take], target[take], keys[take], w[take], src[take]
        # Per target, the cheapest of those while it stays within a hair of its cap.
        take = within_room(comm, keys, target, w, np.maximum(caps + hair - bw, 0), ctx.nbits)
        live, target, w, src = live[take], target[take], w[take], src[take]
        pool.todo[live] = False
        pool.target[live] = target
        change = column_sums(target, w, k) - column_sums(src, w, k)
        red = allreduce_sum(comm, np.concatenate([change.reshape(-1), [len(live)]]))
        bw += red[:-1].reshape(bw.shape)
        if red[-1] == 0 or not (bw > caps).any():
            break
    moved = np.flatnonzero(~pool.todo)
    return pool.rows[moved], pool.target[moved]


class Pool:
    """The rebalancer's candidates in one round: the local vertices of every block found over
    a cap so far, with their connections to the blocks (computed when first asked for and
    kept as int32 while they fit in CACHE_ENTRIES, recomputed per step beyond that)."""

    def __init__(self, ctx: Refinement, st: State) -> None:
        self.ctx, self.st = ctx, st
        self.covered = np.zeros(ctx.k, dtype=bool)
        self.rows = np.zeros(0, dtype=np.int64)
        self.todo = np.zeros(0, dtype=bool)
        self.target = np.zeros(0, dtype=np.int64)
        self.w = np.zeros((0, ctx.g.ncon), dtype=np.int64)
        self.src = self.cls = self.tie = np.zeros(0, dtype=np.int64)
        self.cache: "Optional[np.ndarray]" = np.zeros((0, ctx.k), dtype=np.int32)
        self.done = np.zeros(0, dtype=bool)   # which cache rows are filled

    def add_blocks(self, blocks: np.ndarray) -> None:
        """Add the vertices (of some positive weight) of these blocks, once. Local."""
        new = blocks & ~self.covered
        if not new.any():
            return
        self.covered |= new
        g, parts = self.ctx.g, self.st.ext[:self.ctx.g.nlocal]
        rows = np.flatnonzero(new[parts] & (g.vwgt > 0).any(axis=1))
        self.rows = np.concatenate([self.rows, rows])
        self.todo = np.concatenate([self.todo, np.ones(len(rows), dtype=bool)])
        self.target = np.concatenate([self.target, np.full(len(rows), -1, dtype=np.int64)])
        if self.cache is not None and len(self.rows) * self.ctx.k <= CACHE_ENTRIES:
            # Filled on first use: the steps ask only for vertices carrying an over constraint.
            self.cache = np.concatenate([self.cache, np.zeros((len(rows), self.ctx.k), dtype=np.int32)])
            self.done = np.concatenate([self.done, np.zeros(len(rows), dtype=bool)])
        else:
            self.cache = None
        self.w, self.src, self.cls = g.vwgt[self.rows], parts[self.rows], self.ctx.cls[self.rows]
        self.tie = self.ctx.tie[self.rows]

    def carries(self, over: np.ndarray) -> np.ndarray:
        """Whether each entry carries weight in a constraint its block is over in (`over`:
        (k, ncon) bool), by a (class, block) table when the classes are few."""
        classes, k = self.ctx.classes, self.ctx.k
        if len(classes) * k > TABLE_ENTRIES:
            return ((self.w > 0) & over[self.src]).any(axis=1)
        table = ((classes[:, None, :] > 0) & over[None]).any(axis=2)   # (classes, k)
        return table[self.cls, self.src]

    def connections(self, idx: np.ndarray) -> np.ndarray:
        """Connections of pool entries `idx` to every block."""
        if self.cache is None:
            return self.ctx.connections(self.st, self.rows[idx])
        need = idx[~self.done[idx]]
        for s in chunks(len(need), self.ctx.k):
            self.cache[need[s]] = self.ctx.connections(self.st, self.rows[need[s]])
        self.done[need] = True
        return self.cache[idx]


def best_targets(cls: np.ndarray, classes: np.ndarray, src: np.ndarray, conn: np.ndarray, bw: np.ndarray,
                 caps: np.ndarray, hair: np.ndarray, avg: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """For each vertex (weights classes[cls], block src, connections conn to every block) of
    an overloaded block: the target with the best cut gain among moves that lower the total
    overload and leave the target within `hair` of its cap in every constraint the vertex
    carries (-1 if none), and the move's priority: cut loss per unit of overload removed.
    A target over cap in a constraint the vertex does not carry still takes it: that rule is
    what lets every start converge.

    Among targets of equal gain: the move that removes the most overload, then the block with
    the most room in the constraints the vertex carries (most vertices of a block see several
    empty-enough blocks alike: a per-vertex pick among them would scatter a region that leaves
    together, and the lowest block would take every one of them, one block per step)."""
    k = bw.shape[0]
    i = np.arange(len(src))
    excess = np.maximum(bw - caps, 0)
    # Overload change of leaving and of entering each block, per weight class present (a
    # coarse level may have one class per vertex; the finest has a handful).
    present, cls = present_classes(cls, len(classes))
    weights = classes[present][:, None, :]                                      # (P, 1, ncon)
    leave = ((np.maximum(bw - weights - caps, 0) - excess) / avg).sum(axis=2)   # (P, k)
    after = bw + weights
    enter = ((np.maximum(after - caps, 0) - excess) / avg).sum(axis=2)         # (P, k)
    fits = ((weights == 0) | (after <= caps + hair)).all(axis=2)                # (P, k)
    roomy = np.where(weights > 0, (caps - bw) / avg, np.inf).min(axis=2)        # (P, k)
    del after
    if len(present) * k * k <= TABLE_ENTRIES:
        # Few classes: for every (class, source) pair, the targets ranked once, so that a
        # vertex needs one pass over its blocks: score = connection * k + rank.
        delta = leave[:, :, None] + enter[:, None, :]                           # (P, k, k)
        valid = fits[:, None, :] & ~np.eye(k, dtype=bool) & (delta < -EPS)
        blocks = np.broadcast_to(np.arange(k), delta.shape)
        order = np.lexsort((blocks, -np.broadcast_to(roomy[:, None, :], delta.shape), delta), axis=-1)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(k - 1, -1, -1), axis=-1)     # best = k - 1
        delta = delta.reshape(-1, k)
        pair = cls * k + src
        top = int(conn.max()) if len(conn) else 0
        # An invalid target scores below every valid one, (conn - top - 1) * k < 0: no mask pass.
        rank = np.where(valid, rank, -(top + 1) * k).reshape(-1, k)
        # int32 scores where they fit: half the bytes of every (vertices x blocks) pass.
        score = np.multiply(conn, k, dtype=np.int64 if (top + 2) * k >= 2**31 - 1 else np.int32)
        score += rank.astype(score.dtype)[pair]
        tgt = score.argmax(axis=1)
        ok = score[i, tgt] >= 0
        gone = delta[pair, tgt]
    else:
        delta = leave[cls, src][:, None] + enter[cls]
        valid = fits[cls] & (delta < -EPS)
        valid[i, src] = False
        score = np.where(valid, conn, -1)
        top = score.max(axis=1)
        delta = np.where(score == top[:, None], delta, np.inf)
        room = np.where(delta == delta.min(axis=1)[:, None], roomy[cls], -np.inf)
        tgt = (room == room.max(axis=1)[:, None]).argmax(axis=1)
        ok = top >= 0
        gone = delta[i, tgt]
    loss = conn[i, src].astype(np.int64) - conn[i, tgt]
    priority = np.where(ok, loss / np.where(ok, -gone, 1.0), 0.0)
    return np.where(ok, tgt, -1), priority


def present_classes(cls: np.ndarray, nclasses: int) -> Tuple[np.ndarray, np.ndarray]:
    """`np.unique(cls, return_inverse=True)` of class ids in [0, nclasses), by a table
    instead of a sort where the classes are not many more than the entries."""
    if nclasses > 8 * len(cls) + 1024:
        present, inverse = np.unique(cls, return_inverse=True)
        return present, inverse.reshape(-1)
    seen = np.zeros(nclasses, dtype=bool)
    seen[cls] = True
    present = np.flatnonzero(seen)
    lut = np.zeros(nclasses, dtype=np.int64)
    lut[present] = np.arange(len(present), dtype=np.int64)
    return present, lut[cls]


def all_connections(ctx: Refinement, st: State, rows: np.ndarray) -> np.ndarray:
    """`ctx.connections` of any number of rows, DENSE_ENTRIES at a time."""
    if len(rows) == 0:
        return np.zeros((0, ctx.k), dtype=np.int64)
    return np.concatenate([ctx.connections(st, rows[s]) for s in chunks(len(rows), ctx.k)])

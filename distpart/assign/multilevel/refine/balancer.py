"""The multi-constraint rebalancer, and the pieces of refinement Jet (`jet.py`) shares with it.

Shared pieces, in reading order: `overload` (the quantity the rebalancer descends on),
`Refinement` (the fixed facts of one call: degrees, tie keys, caps, and `evaluate`,
which refreshes the ghosts' blocks and reduces block weights and the cut in one Allreduce),
`connections` (each vertex's edge weight to each block), `priority_keys` and
`first_reaching` (a distributed weighted select: the global prefix of a priority order, per
group, that reaches a weight, found by radix steps of Allreduced integer histograms instead
of a global sort).

`rebalance` moves vertices out of overloaded blocks (design note, step 3) in rounds: one halo
exchange and Allreduce to see the partition, the connections of the overloaded blocks'
vertices (`Pool`), then steps of target choice (`best_targets`), the two selects (cover each
block's excess, cheapest first; fill each target within a hair of its cap) and one
Allreduce of the moved weight. `swap_moves` makes the exchanges single moves cannot: a
block over in one constraint sends vertices to a block with room there and takes back
vertices that carry none of it (Jet calls it on the finest level, through `swap_state`).
Every decision is a function of global IDs, integer weights and Allreduced integer sums, so
the result is the same for any number of ranks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np

from ....arrays import keyed_permutation
from ....mpi.exchange import allreduce_sum, concat_ranges
from ..graph import Halo, LevelGraph

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

__all__ = ["rebalance", "overload", "Refinement", "State", "connections", "priority_keys", "first_reaching",
           "within_room", "swap_state", "swap_moves"]

HIST_ENTRIES = 1 << 15         # int64 entries of one select round's Allreduce (sets its radix)
QBITS = 16                     # bits of a float priority kept in a select key (float32's top 16)
DENSE_ENTRIES = 1 << 22        # entries of one dense (rows x blocks [x constraints]) block at a time
HAIR = 0.01                    # a target may end this fraction of an average block above its cap
EPS = 1e-12                    # below any real change of normalised overload (>= 1 / total)
STEPS = 8                      # select steps per rebalancer round
TABLE_ENTRIES = 1 << 18        # per-(weight class, block) tables up to this size
CACHE_ENTRIES = 1 << 24        # candidates x blocks kept (int32) between the steps of a round
HUB_DEGREE = 256               # the rebalancer prices moves of vertices above this degree
HUB_FACTOR = 8                 # (or this many times the average) by their degree alone
PATIENCE = 3                   # rebalancer rounds without less overload before it gives up
MAX_ROUNDS = 100


# ---------------------------------------------------------------- pure helpers

def overload(bw: np.ndarray, caps: np.ndarray, avg: np.ndarray) -> float:
    """Total weight above cap over blocks and constraints, each constraint in units of its
    average block weight (so a 0/1 train column counts as much as the node count)."""
    return float((np.maximum(np.asarray(bw) - caps, 0) / avg).sum())


def sortable(x: np.ndarray) -> np.ndarray:
    """An order-preserving map of floats to integers in [0, 2**QBITS): float32's bits with the
    sign folded so that integer order is float order, top QBITS kept. Ties this creates
    between close priorities are broken by the vertex tie key, like exact ties."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    key = np.where(bits >= 1 << 31, (~bits) & 0xFFFFFFFF, bits | (1 << 31))
    return key >> (32 - QBITS)


def priority_keys(priority: np.ndarray, tie: np.ndarray, gbits: int) -> np.ndarray:
    """Select keys, ascending = first taken: the quantized priority, then the vertex's tie key
    (a seeded permutation of its global ID, unique)."""
    return (sortable(priority) << gbits) | tie


def connections(g: LevelGraph, halo: Halo, ext: np.ndarray, rows: np.ndarray, k: int,
                unit: bool = False) -> np.ndarray:
    """(len(rows), k) int64 edge weight from each of the given local rows to each block
    (`ext`: extended block ids; `unit`: every edge weight is 1, so edges are counted).
    Sums of integer weights in float64 are exact below 2**53."""
    deg = g.xadj[rows + 1] - g.xadj[rows]
    if 2 * int(deg.sum()) > len(g.adjncy):
        # Most of the edges: one pass over all of them, other rows counted into a spare row,
        # beats gathering the rows' edges one range at a time.
        pos = np.full(g.nlocal, len(rows), dtype=np.int64)
        pos[rows] = np.arange(len(rows), dtype=np.int64)
        key = np.repeat(pos * k, np.diff(g.xadj))
        key += ext[halo.col]
        weights = None if unit else g.adjwgt
    else:
        idx = concat_ranges(g.xadj[rows], deg)
        key = np.repeat(np.arange(len(rows), dtype=np.int64) * k, deg) + ext[halo.col[idx]]
        weights = None if unit else g.adjwgt[idx]
    sums = np.bincount(key, weights=weights, minlength=(len(rows) + 1) * k)[:len(rows) * k]
    return (sums if unit else np.rint(sums)).astype(np.int64).reshape(len(rows), k)


def segment_sums(xadj: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(nlocal,) int64 sum of `values` over each row's adjacency entries."""
    out = np.zeros(len(xadj) - 1, dtype=np.int64)
    nonempty = np.flatnonzero(xadj[1:] > xadj[:-1])
    if len(nonempty):
        out[nonempty] = np.add.reduceat(np.asarray(values, dtype=np.int64), xadj[nonempty])
    return out


def border_rows(xadj: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """(nlocal,) bool: the rows with some True in `diff` (one flag per adjacency entry)."""
    nonempty = xadj[1:] > xadj[:-1]
    if len(diff) == 0:
        return nonempty
    # reduceat reads one element for an empty row: those rows are masked out after.
    return np.logical_or.reduceat(diff, np.minimum(xadj[:-1], len(diff) - 1)) & nonempty


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


# ---------------------------------------------------------------- distributed select

def first_reaching(comm: "Intracomm", keys: np.ndarray, groups: np.ndarray, weights: np.ndarray,
                   targets: np.ndarray, nbits: int) -> Tuple[np.ndarray, np.ndarray]:
    """Where, in each group g, the items in key order first weigh targets[g, c] in column c:
    (lo, hi), each (G, C), such that the items of g (over all ranks) with key < lo weigh less
    than the target and those with key < hi at least the target, and no item of positive
    weight in c has a key in [lo, hi) but the one that reaches it. lo = hi = 0 where
    targets[g, c] <= 0 (nothing needed); lo = hi = 2**nbits where the whole group falls short.

    keys: (m,) int64 in [0, 2**nbits), unique over all ranks; groups: (m,) in [0, G);
    weights: (m, C) int64 >= 0. Collective: an MSD radix select, one Allreduce of weight and
    count histograms per digit, ending early where one item is left in the bucket."""
    targets = np.asarray(targets, dtype=np.int64)
    ngroups, ncon = targets.shape
    bits = int(np.clip(np.log2(max(HIST_ENTRIES // (2 * ngroups * ncon), 1)), 4, 12))
    lo = np.zeros((ngroups, ncon), dtype=np.int64)
    hi = np.where(targets > 0, 1 << nbits, 0)
    open_ = targets > 0
    below = np.zeros((ngroups, ncon), dtype=np.int64)   # weight of the items under lo
    # Per constraint, the items still inside their problem's range: fewer every round.
    items = [np.flatnonzero(open_[groups, c] & (weights[:, c] > 0)) for c in range(ncon)]
    rem = nbits   # bits of the key below the common prefix [lo, lo + 2**rem)
    while open_.any() and rem > 0:   # open_ comes from Allreduced sums: the same on every rank
        step = min(bits, rem)
        rem -= step
        radix = 1 << step
        hist = np.zeros((2, ncon, ngroups * radix), dtype=np.int64)
        for c in range(ncon):
            i = items[c]
            grp = groups[i]
            keep = open_[grp, c] & (keys[i] >= lo[grp, c]) & (keys[i] < hi[grp, c])
            i, grp = i[keep], grp[keep]
            items[c] = i
            if len(i):
                at = grp * radix + ((keys[i] - lo[grp, c]) >> rem)
                hist[0, c] = np.rint(np.bincount(at, weights=weights[i, c], minlength=ngroups * radix))
                hist[1, c] = np.bincount(at, minlength=ngroups * radix)
        hist = allreduce_sum(comm, hist).reshape(2, ncon, ngroups, radix).transpose(0, 2, 1, 3)
        weight, count = hist[0], hist[1]
        cum = below[:, :, None] + np.cumsum(weight, axis=2)
        reach = cum >= targets[:, :, None]
        hit = reach.any(axis=2)
        d = reach.argmax(axis=2)
        short = open_ & ~hit   # only in the first round: the whole group falls short
        lo[short] = hi[short] = 1 << nbits
        open_ &= hit
        at = d[:, :, None]
        under = (np.take_along_axis(cum, at, 2) - np.take_along_axis(weight, at, 2))[:, :, 0]
        alone = np.take_along_axis(count, at, 2)[:, :, 0] == 1
        below = np.where(open_, under, below)
        start = lo + (d << rem)
        lo = np.where(open_, start, lo)
        hi = np.where(open_, start + (1 << rem), hi)
        open_ &= ~alone
    return lo, hi


# ---------------------------------------------------------------- one call's facts and states

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
        self.wdeg = segment_sums(g.xadj, g.adjwgt)
        self.unit = bool(np.all(g.adjwgt == 1))   # the finest level: edges are counted, not weighed
        arcs = int(allreduce_sum(comm, np.array([len(g.adjncy)]))[0])
        self.hub_degree = max(HUB_DEGREE, HUB_FACTOR * arcs // max(g.n, 1))
        # Ties go by a seeded permutation of global IDs: unique, and the same for any R.
        self.tie = keyed_permutation(halo.ext_ids(g, comm), max(g.n, 1), seed)
        self.cls, self.classes = weight_classes(g.vwgt)
        self.gbits = max(1, (max(g.n, 1) - 1).bit_length())
        self.nbits = QBITS + self.gbits

    def connections(self, st: "State", rows: np.ndarray) -> np.ndarray:
        """The rebalancer's `connections` of the given rows: summed over edges for border
        rows, the weighted degree to the own block for the others (most rows of a good
        partition) and for hubs. A hub's move would cut most of its edges whatever the
        target: taking its degree as its loss ranks it last, as it belongs, without passing
        over the edges that half of RMAT's adjacency lies in (KaMinPar's node balancer
        leaves hubs out altogether)."""
        conn = np.zeros((len(rows), self.k), dtype=np.int64)
        b = st.border[rows] & (self.deg[rows] <= self.hub_degree)
        conn[b] = connections(self.g, self.halo, st.ext, rows[b], self.k, self.unit)
        inner = rows[~b]
        conn[np.flatnonzero(~b), st.ext[inner]] = self.wdeg[inner]
        return conn

    def evaluate(self, comm: "Intracomm", parts: np.ndarray, extra: Tuple[int, ...] = ()) -> State:
        """Refresh the ghosts' blocks (one halo exchange), then block weights, cut and `extra`
        counters summed over ranks in one Allreduce. Collective."""
        g, k = self.g, self.k
        ext = self.halo.extend(comm, np.asarray(parts, dtype=np.int64))
        diff = ext[self.halo.col] != np.repeat(ext[:g.nlocal], self.deg)
        local = np.concatenate([column_sums(ext[:g.nlocal], g.vwgt, k).reshape(-1),
                                [np.count_nonzero(diff) if self.unit else int(g.adjwgt[diff].sum())],
                                np.asarray(extra, dtype=np.int64)])
        red = allreduce_sum(comm, local)
        bw = red[:k * g.ncon].reshape(k, g.ncon)
        border = border_rows(g.xadj, diff)
        # Each cut edge is seen once from each end, wherever the ends live.
        return State(ext, bw, int(red[k * g.ncon]) // 2, border, overload(bw, self.caps, self.avg),
                     red[k * g.ncon + 1:])


# ---------------------------------------------------------------- the rebalancer

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
        st = ctx.evaluate(comm, parts, (len(movers),))
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
        # Once the rebalancer stalls, a target may end a hair above its cap only in a
        # constraint some block is over in now, and by no more than the worst excess there:
        # a hair in a constraint every block meets made a new overload that the next step
        # moved back (seen: rounds without end at 1e-4 overload with in-degree balance).
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
        live, target, priority = live[target >= 0], target[target >= 0], priority[target >= 0]
        w, src = pool.w[live], pool.src[live]
        keys = priority_keys(priority, ctx.tie[pool.rows[live]], ctx.gbits)
        # Per overloaded block and constraint it is over in, the cheapest moves carrying
        # that constraint until its excess there is covered.
        _, upto = first_reaching(comm, keys, src, w, excess, ctx.nbits)
        take = ((w > 0) & (keys[:, None] < upto[src])).any(axis=1)
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
    a cap so far, with their connections to the blocks (kept as int32 while they fit in
    CACHE_ENTRIES, recomputed per step beyond that)."""

    def __init__(self, ctx: Refinement, st: State) -> None:
        self.ctx, self.st = ctx, st
        self.covered = np.zeros(ctx.k, dtype=bool)
        self.rows = np.zeros(0, dtype=np.int64)
        self.todo = np.zeros(0, dtype=bool)
        self.target = np.zeros(0, dtype=np.int64)
        self.w = np.zeros((0, ctx.g.ncon), dtype=np.int64)
        self.src = self.cls = np.zeros(0, dtype=np.int64)
        self.cache: "Optional[np.ndarray]" = np.zeros((0, ctx.k), dtype=np.int32)

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
            conn = [self.ctx.connections(self.st, rows[s]).astype(np.int32) for s in chunks(len(rows), self.ctx.k)]
            self.cache = np.concatenate([self.cache, *conn])
        else:
            self.cache = None
        self.w, self.src, self.cls = g.vwgt[self.rows], parts[self.rows], self.ctx.cls[self.rows]

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
        if self.cache is not None:
            return self.cache[idx]
        return self.ctx.connections(self.st, self.rows[idx])


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


def within_room(comm: "Intracomm", keys: np.ndarray, target: np.ndarray, w: np.ndarray, room: np.ndarray,
                nbits: int) -> np.ndarray:
    """Which moves into their target blocks to make, cheapest (smallest key) first: in each
    constraint, the moves carrying it while their sum stays within the target's room. A move
    is made if it fits in every constraint it carries; one that does not carry a constraint
    never waits for it. Collective."""
    limit, _ = first_reaching(comm, keys, target, w, room + 1, nbits)
    return ((w == 0) | (keys[:, None] < limit[target])).all(axis=1)


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
    present, cls = np.unique(cls, return_inverse=True)
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
        rank = np.where(valid, rank, -1).reshape(-1, k)
        delta = delta.reshape(-1, k)
        pair = cls * k + src
        mine = rank[pair]
        score = np.where(mine >= 0, conn.astype(np.int64) * k + mine, -1)
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


def swap_state(comm: "Intracomm", ctx: Refinement, st: State) -> State:
    """One round of `swap_moves` from the infeasible `st`, then one rebalancer round if a
    block is still over a cap. `st` itself if no exchange lowers the overload.

    Measured with in-degree balance (C3, k = 4, 2 ranks; Jet calls it only up to
    jet.SWAP_MAX_OVER): RMAT 2M/20M 68.19% -> 67.60% cut, RMAT 200k 64.77% -> 64.61%;
    no other row of the benchmark changed. More rounds per iteration cut RMAT 2M to
    67.1-67.6%, but took 150-210 s of refinement instead of about 80. Collective."""
    movers, targets = swap_moves(comm, ctx, st)
    parts = st.ext[:ctx.g.nlocal].copy()
    parts[movers] = targets
    new = ctx.evaluate(comm, parts, (len(movers),))
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


def all_connections(ctx: Refinement, st: State, rows: np.ndarray) -> np.ndarray:
    """`ctx.connections` of any number of rows, DENSE_ENTRIES at a time."""
    if len(rows) == 0:
        return np.zeros((0, ctx.k), dtype=np.int64)
    return np.concatenate([ctx.connections(st, rows[s]) for s in chunks(len(rows), ctx.k)])

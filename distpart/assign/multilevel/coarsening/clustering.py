"""Size-constrained label propagation: the clustering of one level (`cluster`).

`cluster` gives every vertex a cluster, named by a vertex ID (at first each vertex its own).
It runs rounds of synchronous label propagation over pseudo-random batches of vertices; a
vertex joins the neighbouring cluster it is most strongly connected to among those that
stay within the cap in every constraint, and the rank owning the cluster's name admits the
moves into it by gain, as a prefix that keeps it under the cap. Vertices still alone at the
end are grouped with other lonely vertices that wanted the same cluster (isolated vertices:
with the isolated vertices next to them in global ID order), again under the cap.

Every decision is a function of global vertex IDs, the seed and integer weights, never of
the rank count or of the order rows arrive in. Numpy only: connection weights are one sort
of packed (cluster, row, weight) integers per batch (`arrays.sum_pairs`) instead of a sparse
product (scipy is not a dependency).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import numpy as np

from ....arrays import GOLDEN64, runs, segment_starts, splitmix64, sum_pairs
from ....mpi.exchange import allreduce_max, allreduce_sum, exchange, lookup
from ..graph import LP_PIECE, Halo, LevelGraph, is_unit_view, row_pieces, share_of, unit_weights

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

# A cluster may weigh this share of a block (eps * total / k, KaMinPar's rule with its own eps):
# chosen by benchmarks/bench_assign.py, see benchmarks/results/step1_history.md.
CLUSTER_EPS = 0.1
ISOLATED_SPAN = 1 << 16     # isolated vertices are grouped within aligned spans of global IDs


# ---------------------------------------------------------------- pure helpers

def cluster_cap(total: np.ndarray, k: int, max_vertex: np.ndarray, eps: Optional[float] = None) -> np.ndarray:
    """Largest weight of one cluster in each constraint: eps (CLUSTER_EPS) / k of the total,
    at least the heaviest vertex (every vertex must fit in a cluster of its own)."""
    eps = CLUSTER_EPS if eps is None else eps
    total = np.asarray(total, dtype=np.int64)
    return np.maximum(share_of(total, eps, max(int(k), 1)), np.asarray(max_vertex, dtype=np.int64))


def round_key(seed: int, level: int, rnd: int) -> np.uint64:
    """The hash key of one LP round of one level (Python ints of any sign wrap into uint64)."""
    x = np.array([seed % 2**64], dtype=np.uint64)
    for part in (level, rnd):
        x = splitmix64((x + GOLDEN64) ^ np.uint64(part % 2**64))
    return x[0]


def batch_of(gids: np.ndarray, key: np.uint64, batches: int) -> np.ndarray:
    """Batch of each global vertex ID: a hash of (key, ID), so it never depends on the rank."""
    h = splitmix64(np.asarray(gids, dtype=np.int64).astype(np.uint64) ^ key)
    return (h % np.uint64(batches)).astype(np.int64)


def best_moves(row: np.ndarray, lab: np.ndarray, w: np.ndarray, own: np.ndarray, fits: np.ndarray
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's best move, from its connection weights to neighbouring clusters.

    (row, lab, w) hold one entry per (row, cluster), in any order; own[r] is row r's
    cluster, fits[i] whether entry i's cluster can take the row's vertex under the cap.
    A row moves to the heaviest cluster that fits if that is strictly heavier than its
    connection to its own cluster (ties favour staying, then the smaller label).
    Returns (rows that move, ascending; their target clusters; gains = target weight - own
    weight)."""
    is_own = lab == own[row]
    own_w = np.zeros(len(own), dtype=np.int64)
    own_w[row[is_own]] = w[is_own]
    score = np.where(fits & ~is_own, w, -1)
    best = np.full(len(own), -1, dtype=np.int64)
    np.maximum.at(best, row, score)
    win = (score == best[row]) & (score > own_w[row])
    target = np.full(len(own), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(target, row[win], lab[win])
    rows = np.flatnonzero(best > own_w)
    return rows, target[rows], best[rows] - own_w[rows]


def admit(to: np.ndarray, gain: np.ndarray, gid: np.ndarray, w: np.ndarray, current: np.ndarray,
          cap: np.ndarray, blocked: np.ndarray) -> np.ndarray:
    """Which requested moves a cluster's owner accepts (mask, in request order).

    Moves into one cluster `to` are ranked by gain (descending), then vertex ID; the
    accepted ones are the longest prefix after which the cluster (weight `current`, per
    request) is still at most `cap` in every constraint. `blocked` requests are refused."""
    if len(to) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((gid, -gain, to))
    st, sw = to[order], w[order]
    starts = segment_starts(st)
    sizes = np.diff(np.append(starts, len(st)))
    csum = np.cumsum(sw, axis=0)
    before = csum[starts] - sw[starts]
    within = csum - np.repeat(before, sizes, axis=0)
    ok = np.all(current[order] + within <= cap, axis=1) & ~blocked[order]
    bad = np.cumsum(~ok)
    bad_before = bad[starts] - (~ok[starts])
    accepted = np.empty(len(to), dtype=bool)
    accepted[order] = (bad - np.repeat(bad_before, sizes)) == 0
    return accepted


def pack_groups(group: np.ndarray, w: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Cut each run of equal `group` values into consecutive chunks of weight at most `cap`
    in every constraint, greedily (a chunk takes items while they fit). Returns the index of
    each item's chunk's first item.

    All groups advance together: one step finds the end of every group's current chunk by a
    binary search in the prefix sums, so the steps are as many as the chunks of the largest
    group, not the items. Weights are non-negative and no single item exceeds the cap."""
    n = len(group)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64).reshape(n, -1)
    csum = np.cumsum(w, axis=0)
    starts = segment_starts(np.asarray(group))
    ends = np.append(starts[1:], n)
    is_head = np.zeros(n, dtype=bool)
    cur, end = starts, ends
    while len(cur):
        is_head[cur] = True
        base = csum[cur] - w[cur]
        nxt = end.copy()
        for j in range(w.shape[1]):
            nxt = np.minimum(nxt, np.searchsorted(csum[:, j], base[:, j] + cap[j], side="right"))
        nxt = np.maximum(nxt, cur + 1)
        more = nxt < end
        cur, end = nxt[more], end[more]
    head = np.flatnonzero(is_head)
    return np.repeat(head, np.diff(np.append(head, n)))


# ---------------------------------------------------------------- label propagation

def _connections(g: LevelGraph, halo: Halo, ext_labels: np.ndarray, entries: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cluster, local row, connection weight) of the adjacency `entries` (ascending), one
    per (cluster, row), sorted by cluster: each cluster's entries are then one run, so
    candidate clusters need no search."""
    # Per batch: only the O(1) view test, not a scan of the level's weights.
    w = unit_weights(len(entries)) if is_unit_view(g.adjwgt) else g.adjwgt[entries]
    return sum_pairs(ext_labels[halo.col[entries]], entry_rows(g.xadj, entries), w, max(g.n - 1, 0),
                     max(g.nlocal - 1, 0))


def entry_rows(xadj: np.ndarray, entries: np.ndarray) -> np.ndarray:
    """The row of each adjacency entry, 32-bit where rows fit: found per batch, so a level
    holds no row-per-entry array."""
    rows = np.searchsorted(xadj, entries, side="right") - 1
    return rows.astype(np.int32) if len(xadj) <= 2**31 else rows


def _piece_moves(comm: "Intracomm", g: LevelGraph, halo: Halo, ext: np.ndarray, labels: np.ndarray,
                 table: np.ndarray, entries: np.ndarray, r0: int, r1: int, cap: np.ndarray,
                 blocks: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`best_moves` of rows r0..r1-1 from their adjacency `entries` (ascending, in those rows),
    the rows as local indices. `table`: each local cluster's weights (and block). Collective
    (one lookup of the candidate clusters' weights)."""
    ncon = g.ncon
    lab, row, w = _connections(g, halo, ext, entries)
    row = row - np.int32(r0) if row.dtype == np.int32 else row - r0
    own = labels[r0:r1]
    # Only a cluster heavier than the own one can win: look up just those clusters' weights.
    is_own = lab == own[row]
    own_w = np.zeros(r1 - r0, dtype=np.int64)
    own_w[row[is_own]] = w[is_own]
    keep = np.flatnonzero(is_own | (w > own_w[row]))
    lab, row, w, is_own = lab[keep], row[keep], w[keep], is_own[keep]
    del keep, own_w
    other = np.flatnonzero(~is_own)
    cands, idx = runs(lab[other])
    cand_w = lookup(comm, cands, g.vtxdist, table)
    fits = np.ones(len(lab), dtype=bool)
    fits[other] = np.all(cand_w[idx, :ncon] + g.vwgt[r0 + row[other]] <= cap, axis=1)
    if blocks is not None:
        fits[other] &= cand_w[idx, ncon] == blocks[r0 + row[other]]
    del cand_w, idx, other, is_own
    movers, target, gain = best_moves(row, lab, w, own, fits)
    return movers + r0, target, gain


def _lp_batch(comm: "Intracomm", g: LevelGraph, halo: Halo, labels: np.ndarray, cw: np.ndarray,
              entry_batch: np.ndarray, batch: int, pieces: list, cap: np.ndarray,
              blocks: Optional[np.ndarray] = None) -> int:
    """One synchronous LP step of the vertices whose adjacency entries are in `batch`
    (`entry_batch`: the batch of every entry): choose, request, admit, apply. Updates
    `labels` and `cw` (weights and member count of the clusters named by this rank's
    vertices) in place; returns the number of local vertices moved. `pieces`: (first, end)
    row ranges, as many on every rank, chosen in turn (a row's choice depends on its own
    entries only, so the pieces only bound the temporaries). `blocks` (block of each local
    vertex): a vertex only joins a cluster of its block (a cluster's block is that of the
    vertex naming it)."""
    lo, ncon = g.first(comm), g.ncon
    ext = halo.extend(comm, labels)
    table = cw[:, :ncon] if blocks is None else np.column_stack([cw[:, :ncon], blocks])
    chosen = []
    for r0, r1 in pieces:
        e0 = int(g.xadj[r0])
        entries = np.flatnonzero(entry_batch[e0:g.xadj[r1]] == batch) + e0
        chosen.append(_piece_moves(comm, g, halo, ext, labels, table, entries, r0, r1, cap, blocks))
    del ext, table
    movers, target, gain = (np.concatenate([c[i] for c in chosen]) for i in range(3))
    del chosen
    src = labels[movers]
    # A cluster whose only member leaves for a smaller label takes no one this step: of two
    # lone vertices that want each other, the larger joins the smaller instead of both swapping.
    leaving = np.zeros(g.nlocal, dtype=bool)
    alone_self = (src == movers + lo) & (cw[movers, ncon] == 1) & (target < src)
    leaving[movers[alone_self]] = True
    req = np.column_stack([movers + lo, src, target, gain, g.vwgt[movers]])
    (got,), _ = exchange(comm, g.owner(target), [np.ascontiguousarray(req, dtype=np.int64)])
    del req
    to_local = got[:, 2] - lo
    ok = admit(to_local, got[:, 3], got[:, 0], got[:, 4:], cw[to_local, :ncon], cap, leaving[to_local])
    got = got[ok]
    to_local = to_local[ok]
    np.add.at(cw, to_local, np.column_stack([got[:, 4:], np.ones(len(got), dtype=np.int64)]))
    # One message carries both the answers (to each mover's owner: kind 0, vertex, new
    # cluster) and the decrements (to each old cluster's owner: kind 1, cluster, weights).
    n_ok = len(got)
    kind = np.repeat(np.array([0, 1], dtype=np.int64), n_ok)
    ids = np.concatenate([got[:, 0], got[:, 1]])
    to_col = np.concatenate([got[:, 2], got[:, 2]])
    wts = np.concatenate([np.zeros((n_ok, ncon), np.int64), got[:, 4:]])
    msg = np.column_stack([kind, ids, to_col, wts]).astype(np.int64, copy=False)
    (back,), _ = exchange(comm, g.owner(ids), [np.ascontiguousarray(msg)])
    answers, decs = back[back[:, 0] == 0], back[back[:, 0] == 1]
    labels[answers[:, 1] - lo] = answers[:, 2]
    np.subtract.at(cw, decs[:, 1] - lo, np.column_stack([decs[:, 3:], np.ones(len(decs), dtype=np.int64)]))
    return len(answers)


_NO_FAVOURITE = np.iinfo(np.int64).max
# Rows whose entries the grouping of lonely vertices handles at once: a batch's share of an
# LP piece, so its connections are no larger than a batch's (a coarse level's vertices may
# nearly all be lonely).
LONELY_PIECE = LP_PIECE // 4


def _pieces_everywhere(comm: "Intracomm", g: LevelGraph, piece: int) -> list:
    """`row_pieces` of about `piece` entries, padded with empty ones to as many on every rank
    (at least one), so each may run a collective. Collective."""
    pieces = list(row_pieces(g.xadj, piece))
    count = max(int(allreduce_max(comm, np.array([len(pieces)]))[0]), 1)
    return pieces + [(g.nlocal, g.nlocal)] * (count - len(pieces))


def _favourites(comm: "Intracomm", g: LevelGraph, halo: Halo, labels: np.ndarray, lonely: np.ndarray,
                blocks: Optional[np.ndarray]) -> np.ndarray:
    """Each lonely local vertex's favourite: the heaviest neighbouring cluster, ties to the
    smaller label (a lonely vertex has no neighbour in its own cluster, so every entry is
    another cluster); with `blocks`, among those of its block; _NO_FAVOURITE where there is
    none. Rows in pieces of about LONELY_PIECE entries, as many on every rank (a row's
    favourite depends on its own entries only). Collective."""
    ext = halo.extend(comm, labels)
    best = np.full(g.nlocal, -1, dtype=np.int64)
    favourite = np.full(g.nlocal, _NO_FAVOURITE, dtype=np.int64)
    for r0, r1 in _pieces_everywhere(comm, g, LONELY_PIECE):
        e0 = int(g.xadj[r0])
        entries = np.flatnonzero(np.repeat(lonely[r0:r1], np.diff(g.xadj[r0:r1 + 1]))) + e0
        lab, row, w = _connections(g, halo, ext, entries)
        del entries
        if blocks is not None:
            same = lookup(comm, lab, g.vtxdist, blocks) == blocks[row]
            lab, row, w = lab[same], row[same], w[same]
        np.maximum.at(best, row, w)
        top = w == best[row]
        np.minimum.at(favourite, row[top], lab[top])
    return favourite


def _merge_lonely(comm: "Intracomm", g: LevelGraph, halo: Halo, labels: np.ndarray, cw: np.ndarray,
                  cap: np.ndarray, budget: int, key: np.uint64,
                  blocks: Optional[np.ndarray] = None) -> int:
    """Group vertices still alone in their cluster: those that most want the same cluster
    (two-hop neighbours), and isolated vertices within aligned spans of global IDs, in
    chunks under the cap. A chunk takes the (unshared) label of its smallest vertex.

    At most about `budget` clusters may disappear (the level must not fall far below the
    coarsening target): if the chunks would remove more, each vertex joins its chunk with
    probability budget / removed, by a hash of its ID and `key` (a part of a chunk is under
    the cap too). `blocks`: only vertices of one block are grouped (a lonely vertex whose
    neighbours are all in other blocks stays alone). Returns the number of local vertices
    relabelled."""
    lo, ncon = g.first(comm), g.ncon
    size = lookup(comm, labels, g.vtxdist, cw[:, ncon])
    lonely = size == 1
    deg = np.diff(g.xadj)
    linked, isolated = np.flatnonzero(lonely & (deg > 0)), np.flatnonzero(lonely & (deg == 0))
    favourite = _favourites(comm, g, halo, labels, lonely, blocks)
    if blocks is not None:   # a vertex with no neighbour in its block has no favourite
        linked = linked[favourite[linked] != _NO_FAVOURITE]
    favourite = favourite[linked]
    iso_gid = isolated + lo
    span = iso_gid // ISOLATED_SPAN
    if blocks is not None:   # one chunk key per (span, block)
        span = span * (int(allreduce_max(comm, np.array([blocks.max(initial=0)]))[0]) + 1) + blocks[isolated]
    keys = np.concatenate([favourite, -1 - span])
    dest = np.concatenate([g.owner(favourite), g.owner(iso_gid - iso_gid % ISOLATED_SPAN)])
    who = np.concatenate([linked, isolated])
    req = np.column_stack([keys, who + lo, labels[who], g.vwgt[who]]).astype(np.int64, copy=False)
    (got,), _ = exchange(comm, dest, [np.ascontiguousarray(req)])
    order = np.lexsort((got[:, 1], got[:, 0]))
    got = got[order]
    head = pack_groups(got[:, 0], got[:, 3:], cap)
    new = got[head, 2]
    change = new != got[:, 2]
    removed = int(allreduce_sum(comm, np.array([np.count_nonzero(change)]))[0])
    if removed > budget:
        # An integer threshold on 32 hash bits: every rank draws the same chunks.
        threshold = np.uint64(max(budget, 0) * 2**32 // removed)
        draw = splitmix64(got[:, 1].astype(np.uint64) ^ key) >> np.uint64(32)
        change &= draw < threshold
    (back,), _ = exchange(comm, g.owner(got[change, 1]),
                          [np.ascontiguousarray(np.column_stack([got[change, 1], new[change]]))])
    labels[back[:, 0] - lo] = back[:, 1]
    return len(back)


def cluster(comm: "Intracomm", g: LevelGraph, halo: Halo, max_weight: np.ndarray, seed: int,
            level: int, rounds: int = 3, batches: int = 4, stop_at: int = 0,
            blocks: Optional[np.ndarray] = None) -> np.ndarray:
    """Size-constrained label propagation. Returns, for each local vertex, the global ID of
    the vertex that names its cluster. No cluster weighs more than `max_weight` (per
    constraint) unless a single vertex does. Collective; the same for any number of ranks.

    Once there are at most `stop_at` clusters (checked after every batch) it stops, and the
    grouping of lonely vertices removes only about as many clusters as are left above it, so
    the last level lands near the coarsening target instead of far below it. (LP moves are
    not thinned that way: on a graph of 100 communities, thinning them to land at the target
    raised the projected cut from 8.7% to 12.7%; a level may end below the target by what
    one batch of LP removes.) `blocks` (block of each local vertex): clusters stay inside
    blocks."""
    lo = g.first(comm)
    gids = np.arange(lo, lo + g.nlocal, dtype=np.int64)
    labels = gids.copy()
    cap = np.asarray(max_weight, dtype=np.int64).reshape(g.ncon)
    # Weight and member count of the cluster named by each local vertex.
    cw = np.column_stack([g.vwgt, np.ones(g.nlocal, dtype=np.int64)])
    deg = np.diff(g.xadj)
    left = g.n
    # Rows in pieces of about LP_PIECE entries, as many on every rank (one lookup each).
    pieces = _pieces_everywhere(comm, g, LP_PIECE)
    for rnd in range(rounds):
        batch = batch_of(gids, round_key(seed, level, rnd), batches).astype(np.int8 if batches < 128 else np.int64)
        entry_batch = np.repeat(batch, deg)
        moved = 0
        for b in range(batches):
            moved += _lp_batch(comm, g, halo, labels, cw, entry_batch, b, pieces, cap, blocks)
            left, moves = allreduce_sum(comm, np.array([np.count_nonzero(cw[:, -1]), moved]))
            if left <= stop_at:
                return labels
        del entry_batch
        if moves == 0:
            break
    _merge_lonely(comm, g, halo, labels, cw, cap, int(left) - stop_at, round_key(seed, level, rounds), blocks)
    return labels

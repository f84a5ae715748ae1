"""Coarsening for `--method multilevel`: size-constrained label propagation, then contraction.

`cluster` gives every vertex a cluster, named by a vertex ID (at first each vertex its own).
It runs rounds of synchronous label propagation over pseudo-random batches of vertices; a
vertex joins the neighbouring cluster it is most strongly connected to among those that
stay within the cap in every constraint, and the rank owning the cluster's name admits the
moves into it by gain, as a prefix that keeps it under the cap. Vertices still alone at the
end are grouped with other lonely vertices that wanted the same cluster (isolated vertices:
with the isolated vertices next to them in global ID order), again under the cap. `contract` turns the
clusters into the next, coarser `LevelGraph`; `coarsen` repeats both until the graph is small.

Mesh-like levels (no hubs: top degree at most PAIR_SKEW times the average; meshes, road
networks) are clustered in pairs: no cluster weighs more than twice the level's heaviest
vertex, so a level about halves the graph, as METIS's matching does. Label propagation's
large clusters on a mesh are ragged blobs whose boundaries the cut must then follow (torus
200k, k = 4: 2354 cut edges against 2282 in pairs). On graphs with hubs pairs barely shrink the
edges (a hub takes one leaf per level: RMAT 200k, 3% fewer edges per level, 5x the time) and
the cut gains nothing or loses (the Debian graph, all four constraints: 19.96% -> 23.24%), so
there the size cap alone bounds clusters, as in KaHIP's presets for social networks.
`coarsen_within` builds a hierarchy whose clusters stay inside the blocks of a given partition,
for a V-cycle (`multilevel_partition`).

Every decision is a function of global vertex IDs, the seed and integer weights, never of
the rank count or of the order rows arrive in: the hierarchy is the same on any number of
ranks (mpi_tests/test_mpi_ml_coarsen.py checks it on 1, 2 and 4). Numpy only: connection
weights are one sort of packed (cluster, row, weight) integers per batch instead of a sparse
product (scipy is not a dependency), and contraction is the same on (coarse u, coarse v,
weight).

Design: ../shared/design/step1-multilevel.md, section "Coarsening".
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Optional, Tuple

import numpy as np

from ...arrays import GOLDEN64, sorted_unique, splitmix64
from ...chunked.readers import block_bounds
from ...mpi.exchange import allreduce_max, allreduce_sum, exchange, exscan_sum, lookup
from ...run.heap import reused_heap
from .graph import Halo, LevelGraph

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ...run.progress import Progress

# A cluster may weigh CLUSTER_EPS / k of the total in each constraint, never less than the
# heaviest vertex: KaMinPar's rule (eps * total / k), with eps = 0.1 rather than KaMinPar's
# 0.03, so a cluster is at most a tenth of a block. Measured, k = 4, coarsest graph partitioned
# (KaMinPar; METIS ncon via initial.py) and projected without refinement, cut % for eps
# 0.03 / 0.1 / 0.2: RMAT 2M 37.6 / 28.3 / 28.7, RMAT 200k 44.3 / 35.6 / 36.9 (1.0: 32.5
# but 1.31 imbalance), 100 communities 200k 9.3 / 8.7 / 8.7, torus 0.6 for all; RMAT 200k
# with 3 and 4 constraints 65.3 / 59.9 and 67.4 / 67.3, every constraint as balanced.
CLUSTER_EPS = 0.1
TARGET_PER_BLOCK = 2000     # stop at about 2000 * k coarse vertices (design note)
MIN_SHRINK_PERCENT = 5      # ... or when a level removes fewer than 5% of the vertices
MAX_LEVELS = 64
ISOLATED_SPAN = 1 << 16     # isolated vertices are grouped within aligned spans of global IDs
PAIR_SKEW = 8               # levels whose top degree is at most this many times the average
PAIR_FACTOR = 2             # ... are clustered in clusters of at most twice the heaviest vertex
EDGE_PIECE = 1 << 20        # adjacency entries contracted at a time


# ---------------------------------------------------------------- pure helpers

def cluster_cap(total: np.ndarray, k: int, max_vertex: np.ndarray, eps: Optional[float] = None) -> np.ndarray:
    """Largest weight of one cluster in each constraint: eps (CLUSTER_EPS) / k of the total,
    at least the heaviest vertex (every vertex must fit in a cluster of its own)."""
    eps = CLUSTER_EPS if eps is None else eps
    total = np.asarray(total, dtype=np.int64)
    cap = np.floor(eps * total / max(int(k), 1) + 1e-9).astype(np.int64)
    return np.maximum(cap, np.asarray(max_vertex, dtype=np.int64))


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


def _bits(x: int) -> int:
    return max(int(x), 1).bit_length()


def sum_pairs(a: np.ndarray, b: np.ndarray, w: np.ndarray, a_max: int, b_max: int
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (a, b) pairs in ascending order with the summed weight of each; a, b are
    non-negative ints at most a_max, b_max.

    When a, b and the weights fit in 63 bits together they are packed into one int64 and
    sorted by value (several times faster than an argsort); otherwise the pairs are argsorted
    by a packed key, or lexsorted. All three give the same result."""
    w = np.asarray(w, dtype=np.int64)
    if len(w) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), w[:0].copy()
    ab, bb = _bits(a_max), _bits(b_max)
    wb = _bits(int(w.max()))
    if ab + bb + wb <= 63 and int(w.min()) >= 0:
        # In place, and a or b may be 32-bit: these are a batch's or a level's adjacency entries.
        key = np.left_shift(a, bb + wb, dtype=np.int64)
        key |= np.left_shift(b, wb, dtype=np.int64)
        key |= w
        del a, b
        key.sort()
        ws = key & np.int64((1 << wb) - 1)
        key >>= wb
    elif ab + bb <= 63:
        key = np.left_shift(a, bb, dtype=np.int64)
        key |= np.asarray(b, dtype=np.int64)
        order = np.argsort(key)
        key, ws = key[order], w[order]
        del order
    else:
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        order = np.lexsort((b, a))
        sa, sb, ws = a[order], b[order], w[order]
        new = np.empty(len(sa), dtype=bool)
        new[0] = True
        new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
        starts = np.flatnonzero(new)
        return sa[starts], sb[starts], np.add.reduceat(ws, starts)
    starts = segment_starts(key)
    sums = np.add.reduceat(ws, starts)
    del ws
    key = key[starts]
    return key >> bb, key & np.int64((1 << bb) - 1), sums


def segment_starts(sorted_ids: np.ndarray) -> np.ndarray:
    """Index of the first element of each run of equal values in a sorted array."""
    if len(sorted_ids) == 0:
        return np.empty(0, dtype=np.int64)
    new = np.empty(len(sorted_ids), dtype=bool)
    new[0] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=new[1:])
    return np.flatnonzero(new)


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

def _connections(g: LevelGraph, halo: Halo, ext_labels: np.ndarray, rows: np.ndarray, entries: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cluster, local row, connection weight) of the adjacency `entries` (rows[i] is entry
    i's row), one per (cluster, row), sorted by cluster: each cluster's entries are then
    one run, so candidate clusters need no search."""
    return sum_pairs(ext_labels[halo.col[entries]], rows[entries], g.adjwgt[entries], max(g.n - 1, 0),
                     max(g.nlocal - 1, 0))


def _runs(sorted_ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(distinct values, index of each element's value among them) of a sorted array."""
    starts = segment_starts(sorted_ids)
    first = np.zeros(len(sorted_ids), dtype=np.int64)
    first[starts[1:]] = 1
    return sorted_ids[starts], np.cumsum(first)


def _lp_batch(comm: "Intracomm", g: LevelGraph, halo: Halo, labels: np.ndarray, cw: np.ndarray,
              rows: np.ndarray, entries: np.ndarray, cap: np.ndarray, blocks: Optional[np.ndarray] = None) -> int:
    """One synchronous LP step of the vertices whose adjacency `entries` are given: choose,
    request, admit, apply. Updates `labels` and `cw` (weights and member count of the
    clusters named by this rank's vertices) in place; returns the number of local vertices
    moved. `blocks` (block of each local vertex): a vertex only joins a cluster of its block
    (a cluster's block is that of the vertex naming it)."""
    lo, ncon = g.first(comm), g.ncon
    ext = halo.extend(comm, labels)
    lab, row, w = _connections(g, halo, ext, rows, entries)
    del ext
    # Only a cluster heavier than the own one can win: look up just those clusters' weights.
    is_own = lab == labels[row]
    own_w = np.zeros(g.nlocal, dtype=np.int64)
    own_w[row[is_own]] = w[is_own]
    keep = np.flatnonzero(is_own | (w > own_w[row]))
    lab, row, w, is_own = lab[keep], row[keep], w[keep], is_own[keep]
    del keep, own_w
    other = np.flatnonzero(~is_own)
    cands, idx = _runs(lab[other])
    table = cw[:, :ncon] if blocks is None else np.column_stack([cw[:, :ncon], blocks])
    cand_w = lookup(comm, cands, g.vtxdist, table)
    fits = np.ones(len(lab), dtype=bool)
    fits[other] = np.all(cand_w[idx, :ncon] + g.vwgt[row[other]] <= cap, axis=1)
    if blocks is not None:
        fits[other] &= cand_w[idx, ncon] == blocks[row[other]]
    del cand_w, idx, other, is_own
    movers, target, gain = best_moves(row, lab, w, labels, fits)
    del lab, row, w, fits
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


def _merge_lonely(comm: "Intracomm", g: LevelGraph, halo: Halo, labels: np.ndarray, cw: np.ndarray,
                  cap: np.ndarray, rows: np.ndarray, budget: int, key: np.uint64,
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
    ext = halo.extend(comm, labels)
    lab, row, w = _connections(g, halo, ext, rows, np.flatnonzero(lonely[rows]))
    del ext
    if blocks is not None:
        same = lookup(comm, lab, g.vtxdist, blocks) == blocks[row]
        lab, row, w = lab[same], row[same], w[same]
        linked = linked[np.isin(linked, row)]
    # The favourite: the heaviest neighbouring cluster, ties to the smaller label (a lonely
    # vertex has no neighbour in its own cluster, so every entry is another cluster).
    best = np.full(g.nlocal, -1, dtype=np.int64)
    np.maximum.at(best, row, w)
    top = w == best[row]
    favourite = np.full(g.nlocal, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(favourite, row[top], lab[top])
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
    # The row of every adjacency entry, 32-bit where it fits: with the halo's columns this is
    # what label propagation adds to the graph's own memory.
    rows = np.repeat(np.arange(g.nlocal, dtype=np.int32 if g.nlocal < 2**31 else np.int64), np.diff(g.xadj))
    left = g.n
    for rnd in range(rounds):
        batch = batch_of(gids, round_key(seed, level, rnd), batches).astype(np.int8 if batches < 128 else np.int64)
        entry_batch = batch[rows]
        moved = 0
        for b in range(batches):
            moved += _lp_batch(comm, g, halo, labels, cw, rows, np.flatnonzero(entry_batch == b), cap, blocks)
            left, moves = allreduce_sum(comm, np.array([np.count_nonzero(cw[:, -1]), moved]))
            if left <= stop_at:
                return labels
        del entry_batch
        if moves == 0:
            break
    _merge_lonely(comm, g, halo, labels, cw, cap, rows, int(left) - stop_at, round_key(seed, level, rounds), blocks)
    return labels


# ---------------------------------------------------------------- contraction

def contract(comm: "Intracomm", g: LevelGraph, halo: Halo, labels: np.ndarray, piece: int = EDGE_PIECE
             ) -> Tuple[LevelGraph, np.ndarray]:
    """The graph of the clusters: one coarse vertex per distinct label, numbered by the
    label's rank among all labels (ascending), its weight the sum of its members', an edge
    between two clusters weighing the sum of the fine edges between them (edges inside a
    cluster vanish). Returns (coarse graph, fine-to-coarse global IDs of the local
    vertices). Collective."""
    nranks, rank, lo = comm.Get_size(), comm.Get_rank(), g.first(comm)
    mine = sorted_unique(labels)
    (named,), _ = exchange(comm, g.owner(mine), [mine])
    used = np.zeros(g.nlocal, dtype=bool)
    used[named - lo] = True
    count = int(used.sum())
    base = int(exscan_sum(comm, np.array([count]))[0])
    nc = int(allreduce_sum(comm, np.array([count]))[0])
    coarse_id = np.full(g.nlocal, -1, dtype=np.int64)
    coarse_id[used] = base + np.arange(count, dtype=np.int64)
    fine_to_coarse = lookup(comm, labels, g.vtxdist, coarse_id)
    cdist = block_bounds(nc, nranks)
    clo, cn = int(cdist[rank]), int(cdist[rank + 1] - cdist[rank])

    def owner(ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(cdist, ids, side="right") - 1

    # Vertex weights: summed here per coarse vertex, then at its owner.
    order = np.argsort(fine_to_coarse, kind="stable")
    fc = fine_to_coarse[order]
    st = segment_starts(fc)
    part = np.add.reduceat(g.vwgt[order], st, axis=0) if len(st) else g.vwgt[:0]
    (ids, wts), _ = exchange(comm, owner(fc[st]), [fc[st], np.ascontiguousarray(part)])
    vwgt = np.zeros((cn, g.ncon), dtype=np.int64)
    np.add.at(vwgt, ids - clo, wts)
    del order, fc, part

    # Edges: both ends mapped, inside-cluster edges dropped, duplicates summed here and at
    # the owner of the row (every rank sent its rows sorted; the owner merges them).
    # The local rows go in pieces of about `piece` entries, each reduced at once, so the
    # temporaries stay small next to the graph (coarse rows are far fewer than fine ones).
    ext = halo.extend(comm, fine_to_coarse)
    cuts = np.searchsorted(g.xadj, np.arange(1, -(-len(g.adjncy) // piece)) * piece)
    bounds = sorted_unique(np.concatenate([[0], cuts, [g.nlocal]]))
    pieces = []
    for r0, r1 in zip(bounds[:-1], bounds[1:]):
        e0, e1 = g.xadj[r0], g.xadj[r1]
        cu = np.repeat(fine_to_coarse[r0:r1], np.diff(g.xadj[r0:r1 + 1]))
        cv = ext[halo.col[e0:e1]]
        keep = cu != cv
        pieces.append(sum_pairs(cu[keep], cv[keep], g.adjwgt[e0:e1][keep], max(nc - 1, 0), max(nc - 1, 0)))
        del cu, cv, keep
    del ext
    cu, cv, w = (np.concatenate([p[i] for p in pieces]) if pieces else np.empty(0, np.int64) for i in range(3))
    if len(pieces) > 1:
        cu, cv, w = sum_pairs(cu, cv, w, max(nc - 1, 0), max(nc - 1, 0))
    del pieces
    (ru, rv, rw), counts = exchange(comm, owner(cu), [cu, cv, w])
    del cu, cv, w
    if np.count_nonzero(counts) > 1:
        ru, rv, rw = sum_pairs(ru, rv, rw, max(nc - 1, 0), max(nc - 1, 0))
    xadj = np.zeros(cn + 1, dtype=np.int64)
    np.cumsum(np.bincount(ru - clo, minlength=cn), out=xadj[1:])
    coarse = LevelGraph(cdist, xadj, rv, rw, vwgt).with_totals(comm)
    return coarse, fine_to_coarse


# ---------------------------------------------------------------- the hierarchy

def coarsen(comm: "Intracomm", g: LevelGraph, k: int, seed: int,
            progress: "Optional[Progress]" = None, target: Optional[int] = None
            ) -> Tuple[List[LevelGraph], List[np.ndarray]]:
    """Cluster and contract until about `target` (default 2000 * k) vertices remain or a
    level shrinks by less than 5%. Returns (levels, maps): levels[0] is `g`; maps[i] gives
    the global ID in levels[i + 1] of each local vertex of levels[i]. Collective.

    The cluster cap depends on k only (CLUSTER_EPS / k of the total, a tenth of a block),
    not on --imbalance: the partition's slack does not limit how coarse a cluster may be, the
    initial partitioner and the rebalancer handle it. Mesh-like levels are clustered in pairs
    (module docstring)."""
    levels, maps, _ = _hierarchy(comm, g, k, seed, progress, target, None, 0)
    return levels, maps


def coarsen_within(comm: "Intracomm", g: LevelGraph, k: int, seed: int, parts: np.ndarray, cycle: int,
                   progress: "Optional[Progress]" = None, target: Optional[int] = None
                   ) -> Tuple[List[LevelGraph], List[np.ndarray], np.ndarray]:
    """`coarsen` with every cluster inside one block of `parts` (this rank's vertices' blocks):
    the partition carries over to every level unchanged, cut included. Returns (levels, maps,
    the blocks of the coarsest level's local vertices). `cycle` > 0 numbers the V-cycle, so
    its label propagation draws other batches than the first hierarchy's. Collective."""
    return _hierarchy(comm, g, k, seed, progress, target, np.asarray(parts, dtype=np.int64), cycle)


def mesh_like(comm: "Intracomm", g: LevelGraph) -> bool:
    """Whether `g` has no hubs: its top degree (neighbours, not edge weight) is at most
    PAIR_SKEW times its average degree. Collective."""
    arcs = int(allreduce_sum(comm, np.array([len(g.adjncy)]))[0])
    top = int(allreduce_max(comm, np.array([np.diff(g.xadj).max(initial=0)]))[0])
    return top * g.n <= PAIR_SKEW * arcs


def heaviest(comm: "Intracomm", g: LevelGraph) -> np.ndarray:
    """(ncon,) the largest vertex weight of `g` in each constraint. Collective."""
    return allreduce_max(comm, g.vwgt.max(axis=0) if g.nlocal else np.zeros(g.ncon, dtype=np.int64))


def carry_blocks(comm: "Intracomm", coarse: LevelGraph, fine_to_coarse: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Blocks of the coarse level's local vertices, from the fine vertices' blocks (every
    cluster lies in one block). Collective."""
    (ids, got), _ = exchange(comm, coarse.owner(fine_to_coarse), [fine_to_coarse, blocks])
    out = np.zeros(coarse.nlocal, dtype=np.int64)
    out[ids - coarse.first(comm)] = got
    return out


def _hierarchy(comm: "Intracomm", g: LevelGraph, k: int, seed: int, progress: "Optional[Progress]",
               target: Optional[int], blocks: Optional[np.ndarray], cycle: int
               ) -> Tuple[List[LevelGraph], List[np.ndarray], Optional[np.ndarray]]:
    if g.total is None:
        g.with_totals(comm)
    target = TARGET_PER_BLOCK * k if target is None else int(target)
    cap = cluster_cap(g.total, k, heaviest(comm, g))
    levels, maps = [g], []
    pairs = True   # until a level is dense; the levels above it are clustered by the cap alone
    while levels[-1].n > target and len(levels) < MAX_LEVELS:
        fine = levels[-1]
        t0 = time.perf_counter()
        pairs = pairs and mesh_like(comm, fine)
        level_cap = cap
        if pairs:
            level_cap = np.minimum(cap, PAIR_FACTOR * heaviest(comm, fine))
        halo = Halo.build(comm, fine)
        with reused_heap():   # label propagation's rounds; not contraction (see run.heap)
            labels = cluster(comm, fine, halo, level_cap, seed, cycle * MAX_LEVELS + len(levels) - 1,
                             stop_at=target, blocks=blocks)
        coarse, fine_to_coarse = contract(comm, fine, halo, labels)
        del halo, labels
        if coarse.n >= fine.n:
            break
        if blocks is not None:
            blocks = carry_blocks(comm, coarse, fine_to_coarse, blocks)
        levels.append(coarse)
        maps.append(fine_to_coarse)
        if progress is not None:
            m = int(allreduce_sum(comm, np.array([len(coarse.adjncy)]))[0])
            progress.say(f"coarsening level {len(levels) - 1}{'' if cycle == 0 else f' (V-cycle {cycle})'}: "
                         f"{fine.n:,} -> {coarse.n:,} vertices, {m // 2:,} edges"
                         f"{' in pairs' if pairs else ''} ({time.perf_counter() - t0:.1f} s)")
        if coarse.n * 100 > (100 - MIN_SHRINK_PERCENT) * fine.n:
            break
    return levels, maps, blocks

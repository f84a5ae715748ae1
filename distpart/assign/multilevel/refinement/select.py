"""A distributed weighted select: the global prefix of a priority order, per group, that
reaches a weight (`first_reaching`), found by radix steps of Allreduced integer histograms
instead of a global sort; its keys (`priority_keys`) and its use for filling blocks within
their room (`within_room`). The rebalancer, the exchanges and Jet's capped moves select with it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from ....mpi.exchange import allreduce_sum

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

HIST_ENTRIES = 1 << 15         # int64 entries of one select round's Allreduce (sets its radix)
QBITS = 16                     # bits of a float priority kept in a select key (float32's top 16)


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
    live = open_[groups] & (weights > 0)   # one (m, C) gather, not one per constraint
    items = [np.flatnonzero(live[:, c]) for c in range(ncon)]
    del live
    rem = nbits   # bits of the key below the common prefix [lo, lo + 2**rem)
    while open_.any() and rem > 0:   # open_ comes from Allreduced sums: the same on every rank
        step = min(bits, rem)
        rem -= step
        radix = 1 << step
        hist = np.zeros((2, ncon, ngroups * radix), dtype=np.int64)
        for c in range(ncon):
            i = items[c]
            grp, key = groups[i], keys[i]
            # Per-column copies of the (G,) bounds: 1-D gathers, each key gathered once.
            base = lo[:, c][grp]
            keep = open_[:, c][grp] & (key >= base) & (key < hi[:, c][grp])
            i, grp, key, base = i[keep], grp[keep], key[keep], base[keep]
            items[c] = i
            if len(i):
                at = grp * radix + ((key - base) >> rem)
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


def within_room(comm: "Intracomm", keys: np.ndarray, target: np.ndarray, w: np.ndarray, room: np.ndarray,
                nbits: int) -> np.ndarray:
    """Which moves into their target blocks to make, cheapest (smallest key) first: in each
    constraint, the moves carrying it while their sum stays within the target's room. A move
    is made if it fits in every constraint it carries; one that does not carry a constraint
    never waits for it. Collective."""
    limit, _ = first_reaching(comm, keys, target, w, room + 1, nbits)
    return ((w == 0) | (keys[:, None] < limit[target])).all(axis=1)

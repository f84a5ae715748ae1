"""Small array primitives every stage needs, in one place so they cannot drift apart:
prefix sums (offsets of consecutive blocks), the splitmix64 finaliser (seeded hashing for
random assignment and synthetic data), a keyed pseudo-random permutation of [0, n) that
needs no table (random assignment, relabelling synthetic graphs), the search for the
first out-of-range ID, the narrowest ID dtype (`id_dtype`); the stable grouping by a small key (owner rank, partition)
that numbers rows within their group, which Step 1's vertex order and Step 2's new IDs share;
`owner_of` (which block of contiguous ID ranges holds an ID); and the sort/segment helpers
of Step 1's multilevel method (runs of a sorted array, sums per row or per distinct pair).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
# Largest count of IDs [0, n) that int32 holds; a module constant so tests can force int64.
INT32_IDS = 2**31
GOLDEN64 = np.uint64(0x9E3779B97F4A7C15)


def exclusive_cumsum(counts: np.ndarray) -> np.ndarray:
    """int64 start of each block of `counts` (same shape, flattened in C order): [0, c0, c0+c1, ...]."""
    flat = np.asarray(counts, dtype=np.int64).reshape(-1)
    out = np.zeros_like(flat)
    np.cumsum(flat[:-1], out=out[1:])
    return out.reshape(np.shape(counts))


def offsets(counts) -> np.ndarray:
    """Block boundaries of 1-D `counts`, length n + 1: [0, c0, c0+c1, ..., total]."""
    flat = np.asarray(counts, dtype=np.int64).reshape(-1)
    out = np.zeros(len(flat) + 1, dtype=np.int64)
    np.cumsum(flat, out=out[1:])
    return out


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a vectorised, well-distributed uint64 -> uint64 hash
    (numpy's uint64 arithmetic wraps, as the algorithm requires)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX1
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX2
    return x ^ (x >> np.uint64(31))


def id_dtype(count: int) -> np.dtype:
    """int32 when every ID in [0, count) fits it, else int64: what Step 2 and verify hold IDs
    in (half the bytes per held ID on every graph below 2**31 nodes or edges of a type)."""
    return np.dtype(np.int32) if count <= INT32_IDS else np.dtype(np.int64)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique without its inverse machinery: one sort and a mask."""
    if len(values) == 0:
        return values.copy()
    s = np.sort(values)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def first_outside(ids: np.ndarray, n: int) -> Optional[int]:
    """Index of the first ID outside [0, n), or None. (min/max first: the common all-good
    case costs two passes and no temporary boolean array.)"""
    if len(ids) == 0:
        return None
    if int(ids.min()) >= 0 and int(ids.max()) < n:
        return None
    return int(np.flatnonzero((ids < 0) | (ids >= n))[0])


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 step: add the golden gamma, then the finaliser."""
    return splitmix64(x + GOLDEN64)


def keyed_permutation(ids: np.ndarray, n: int, key: int, rounds: int = 4) -> np.ndarray:
    """perm(ids) for a pseudo-random permutation of [0, n) selected by `key`."""
    ids = np.asarray(ids, dtype=np.uint64)
    if n <= 1:
        return ids.astype(np.int64)
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask = np.uint64((1 << half) - 1)
    # Any Python int seed (negative, huge) maps into uint64 by wrapping, like the hash itself.
    keys = [_mix(np.array([(key * 1000003 + r) % 2**64], dtype=np.uint64))[0] for r in range(rounds)]

    def feistel(x: np.ndarray) -> np.ndarray:
        left, right = x >> np.uint64(half), x & mask
        for k in keys:
            left, right = right, left ^ (_mix(right ^ k) & mask)
        return (left << np.uint64(half)) | right

    out = feistel(ids)
    # Cycle walking: the Feistel domain is [0, 4**half) >= n; re-apply to values outside
    # [0, n) until they land inside, which keeps the map a bijection of [0, n).
    todo = np.flatnonzero(out >= np.uint64(n))
    while len(todo):
        out[todo] = feistel(out[todo])
        todo = todo[out[todo] >= np.uint64(n)]
    return out.astype(np.int64)


def group_by_owner(owner: np.ndarray, nranks: int) -> Tuple[np.ndarray, np.ndarray]:
    """Stable grouping of row indices by owner rank: (order, counts per rank).

    Owners are small integers, so the stable sort runs on the narrowest integer type,
    where numpy uses a radix sort instead of a comparison sort.
    """
    narrow = owner.astype(np.min_scalar_type(max(nranks - 1, 0)), copy=False)
    order = np.argsort(narrow, kind="stable")
    counts = np.bincount(owner, minlength=nranks).astype(np.int64)
    return order, counts


def rank_within_group(groups: np.ndarray, num_groups: int) -> np.ndarray:
    """For each element, how many earlier elements share its group (order-preserving)."""
    order, counts = group_by_owner(groups, num_groups)
    group_start = exclusive_cumsum(counts)
    pos = np.empty(len(groups), dtype=np.int64)
    pos[order] = np.arange(len(groups), dtype=np.int64) - np.repeat(group_start, counts)
    return pos


def new_node_ids(parts: np.ndarray, base: np.ndarray) -> np.ndarray:
    """New IDs of a block of nodes of one type, ascending by original ID within a partition.

    `base[p]` is the new ID of this block's first node in partition p: the (p, type) range
    start plus the nodes of that group held by lower ranks.
    """
    return base[parts] + rank_within_group(parts, len(base))


def owner_of(bounds: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Block (rank, type, partition) holding each ID, blocks being [bounds[i], bounds[i+1])."""
    return np.searchsorted(bounds, ids, side="right") - 1


def segment_starts(sorted_ids: np.ndarray) -> np.ndarray:
    """Index of the first element of each run of equal values in a sorted array."""
    if len(sorted_ids) == 0:
        return np.empty(0, dtype=np.int64)
    new = np.empty(len(sorted_ids), dtype=bool)
    new[0] = True
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=new[1:])
    return np.flatnonzero(new)


def runs(sorted_ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(distinct values, index of each element's value among them) of a sorted array."""
    starts = segment_starts(sorted_ids)
    first = np.zeros(len(sorted_ids), dtype=np.int64)
    first[starts[1:]] = 1
    return sorted_ids[starts], np.cumsum(first)


def segment_sums(xadj: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(len(xadj) - 1,) int64 sum of `values` over each CSR row."""
    out = np.zeros(len(xadj) - 1, dtype=np.int64)
    nonempty = np.flatnonzero(xadj[1:] > xadj[:-1])
    if len(nonempty):
        out[nonempty] = np.add.reduceat(np.asarray(values, dtype=np.int64), xadj[nonempty])
    return out


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
    if ab + bb <= 63:
        # a or b may be 32-bit: these are a batch's or a level's adjacency entries.
        key = np.left_shift(a, bb, dtype=np.int64)
        key |= b
        del a, b
        key, sums = sum_keys(key, w, (int(a_max) << bb) | int(b_max), in_place=True)
        return key >> bb, key & np.int64((1 << bb) - 1), sums
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    order = np.lexsort((b, a))
    sa, sb, ws = a[order], b[order], w[order]
    new = np.empty(len(sa), dtype=bool)
    new[0] = True
    new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    starts = np.flatnonzero(new)
    return sa[starts], sb[starts], np.add.reduceat(ws, starts)


def sum_keys(key: np.ndarray, w: np.ndarray, key_max: int, in_place: bool = False
             ) -> Tuple[np.ndarray, np.ndarray]:
    """Distinct keys (non-negative ints at most key_max) in ascending order with the summed
    weight of each: `sum_pairs` for pairs already packed into one int64 key. When the keys
    and the weights fit 63 bits together they are packed into one int64 and sorted by value
    (several times faster than an argsort); otherwise the keys are argsorted. `in_place`:
    `key` (int64) may be overwritten."""
    w = np.asarray(w, dtype=np.int64)
    if len(w) == 0:
        return np.empty(0, np.int64), w[:0].copy()
    kb, wb = _bits(key_max), _bits(int(w.max()))
    if kb + wb <= 63 and int(w.min()) >= 0:
        packed = key if in_place and key.dtype == np.int64 else np.array(key, dtype=np.int64)
        del key
        packed <<= wb
        packed |= w
        packed.sort()
        ws = packed & np.int64((1 << wb) - 1)
        packed >>= wb
    else:
        order = np.argsort(key)
        packed, ws = np.asarray(key, dtype=np.int64)[order], w[order]
        del order
    return _run_sums(packed, ws)


def sum_sorted_runs(keys: Sequence[np.ndarray], ws: Sequence[np.ndarray], key_max: int, piece: int
                    ) -> Tuple[np.ndarray, np.ndarray]:
    """`sum_keys` of the concatenated runs, each already sorted, one slice of the key range at
    a time (about `piece` keys each: every run is cut at as many evenly spaced keys as there
    are slices), written into one output that is shrunk in place at the end: the temporaries
    are a slice's, not the whole input's."""
    total = sum(len(k) for k in keys)
    out_k, out_w = np.empty(total, np.int64), np.empty(total, np.int64)
    if total == 0:
        return out_k, out_w
    slices = -(-total // max(int(piece), 1))
    cuts = sorted_unique(np.concatenate([np.asarray(k[::max(1, -(-len(k) // slices))], np.int64)
                                         for k in keys if len(k)]))
    n = 0
    for v0, v1 in zip(cuts, np.append(cuts[1:], np.int64(key_max) + 1)):
        spans = [(np.searchsorted(k, v0), np.searchsorted(k, v1)) for k in keys]
        k, w = sum_keys(np.concatenate([k[a:b] for k, (a, b) in zip(keys, spans)]),
                        np.concatenate([w[a:b] for w, (a, b) in zip(ws, spans)]), key_max)
        out_k[n:n + len(k)], out_w[n:n + len(k)] = k, w
        n += len(k)
    # realloc: a large block shrinks where it lies (mremap), no second copy.
    out_k.resize(n, refcheck=False)
    out_w.resize(n, refcheck=False)
    return out_k, out_w


def _run_sums(key: np.ndarray, ws: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(distinct values, summed weights) of a sorted key array and its weights."""
    starts = segment_starts(key)
    sums = np.add.reduceat(ws, starts)
    del ws
    return key[starts], sums


def pair_bits(a_max: int, b_max: int) -> Optional[int]:
    """Bits of b in the int64 key a << bits | b of pairs up to (a_max, b_max), or None if
    such keys do not fit 63 bits."""
    bb = _bits(b_max)
    return bb if _bits(a_max) + bb <= 63 else None

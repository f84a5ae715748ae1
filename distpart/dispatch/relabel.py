"""New ("shuffled") IDs and the local graph of a partition: pure array functions, no MPI.

New node IDs put partition 0's nodes first, then partition 1's, and so on; inside a
partition they are grouped by type, and inside a (partition, type) group they follow the
original per-type ID. Edges are numbered the same way by (partition, edge type, original
edge ID). Because the order is a function of the input and the assignment only, the
output does not depend on how many ranks computed it.

Step 2 holds IDs as int32 when every ID of their range fits (`arrays.id_dtype`), int64 otherwise.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from ..arrays import group_by_owner, offsets, sorted_unique

# Edges converted to local IDs at a time: bounds the conversion's temporaries.
_LOCAL_ROWS = 1 << 20


def local_graph(first: int, stop: int, src: np.ndarray,
                dst: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(halo new IDs ascending, local src, local dst) of a partition owning new IDs [first, stop).

    Local node IDs: owned nodes first (new ID - first), then halo nodes in ascending new ID.
    Every dst must be owned: the destination's owner keeps the edge.
    """
    local_src, local_dst = src.astype(np.int64), dst.astype(np.int64)
    halo = to_local(first, stop, [local_src], [local_dst])
    return halo, local_src, local_dst


def to_local(first: int, stop: int, srcs: Sequence[np.ndarray], dsts: Sequence[np.ndarray]) -> np.ndarray:
    """`local_graph` for a partition's edges held in pieces, converted in place (so no
    second copy of the edges exists); returns the halo (new IDs, ascending). Each piece's
    dtype must hold every local ID, which int32 does whenever it held the new IDs."""
    halo = sorted_unique(np.concatenate([sorted_unique(src[(src < first) | (src >= stop)]) for src in srcs])
                         if srcs else np.empty(0, np.int64))
    for src in srcs:
        for lo in range(0, len(src), _LOCAL_ROWS):
            s = src[lo:lo + _LOCAL_ROWS]
            inner = (s >= first) & (s < stop)
            s[...] = np.where(inner, s - first, (stop - first) + np.searchsorted(halo, s))
    for dst in dsts:
        dst -= dst.dtype.type(first)
    return halo


def by_partition(local_part: np.ndarray, nparts: int) -> List[np.ndarray]:
    """Row indices of each of a rank's `nparts` partitions, arrival order kept.

    One counting sort instead of a scan per partition: a rank owning P/R partitions would
    otherwise read every received row P/R times.
    """
    order, counts = group_by_owner(local_part, nparts)
    bounds = offsets(counts)
    return [order[bounds[i]:bounds[i + 1]] for i in range(nparts)]


def node_groups(new_ids: np.ndarray, starts: np.ndarray) -> List[np.ndarray]:
    """Rows of each own partition, from new node IDs of one type (`starts`: that type's first
    new ID in each own partition, ascending)."""
    if len(starts) == 1:
        return [np.arange(len(new_ids))]
    return by_partition(np.searchsorted(starts, new_ids, side="right") - 1, len(starts))

"""New ("shuffled") IDs and the local graph of a partition: pure array functions, no MPI.

New node IDs put partition 0's nodes first, then partition 1's, and so on; inside a
partition they are grouped by type, and inside a (partition, type) group they follow the
original per-type ID. Edges are numbered the same way by (partition, edge type, original
edge ID). Because the order is a function of the input and the assignment only, the
output does not depend on how many ranks computed it.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ..arrays import group_by_owner, offsets, sorted_unique


def local_graph(first: int, stop: int, src: np.ndarray,
                dst: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(halo new IDs ascending, local src, local dst) of a partition owning new IDs [first, stop).

    Local node IDs: owned nodes first (new ID - first), then halo nodes in ascending new ID.
    Every dst must be owned: the destination's owner keeps the edge.
    """
    inner = (src >= first) & (src < stop)
    outside = src[~inner]
    halo = sorted_unique(outside)
    local_src = np.empty(len(src), dtype=np.int64)
    local_src[inner] = src[inner] - first
    local_src[~inner] = (stop - first) + np.searchsorted(halo, outside)
    return halo, local_src, dst - first


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

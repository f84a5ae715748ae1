"""No empty partition where the graph has enough nodes: the last step of every Step 1 method.

A partitioner balancing node counts may still leave a block without a node (a path of 10
nodes in 8 parts), or without any node of one type (the dense core of one type in one
block). DGL's servers then fail to start: a node type with features gets a zero-byte
shared-memory tensor in that partition ("Failed to map shared memory"). So, for every node
type with at least P nodes, each partition without one of its nodes gets one: the
highest-ID node of that type in the partition holding most of them. Then, when the graph
has at least P nodes, a partition still without any node gets one the same way. A type
with fewer nodes than partitions cannot reach every partition: the run says so.

The moves depend only on the global assignment, never on the number of ranks; a partition
that already has what it needs is never touched, so the methods' results stay as they were
wherever nothing was empty.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import numpy as np

from ..mpi.exchange import allreduce_max, allreduce_sum

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ..chunked.metadata import GraphMeta
    from ..run.progress import Progress
    from .assignment import Assignment, NodeBlock


def _counts(comm: "Intracomm", parts: np.ndarray, k: int) -> np.ndarray:
    return allreduce_sum(comm, np.bincount(parts, minlength=k)[:k])


def _move_highest(comm: "Intracomm", block: "NodeBlock", donor: int, to: int) -> None:
    """Move the highest-ID node of `block`'s type in partition `donor` to partition `to`."""
    mine = np.flatnonzero(block.parts == donor)
    local = np.array([block.start + int(mine[-1]) if len(mine) else -1], dtype=np.int64)
    node = int(allreduce_max(comm, local)[0])
    if block.start <= node < block.start + len(block.parts):
        block.parts[node - block.start] = to


def _fill(comm: "Intracomm", blocks: "List[NodeBlock]", counts: np.ndarray) -> List[int]:
    """Give each empty partition one node (per `counts`, of `blocks`' nodes); the filled ones."""
    filled = []
    for empty in np.flatnonzero(counts == 0).tolist():
        donor = int(np.argmax(counts))   # the lowest of the fullest: the same on every rank
        per_block = [int(_counts(comm, b.parts, len(counts))[donor]) for b in blocks]
        _move_highest(comm, blocks[int(np.argmax(per_block))], donor, empty)
        counts[donor] -= 1
        counts[empty] += 1
        filled.append(empty)
    return filled


def _names(parts: List[int]) -> str:
    shown = ", ".join(map(str, parts[:8])) + (", ..." if len(parts) > 8 else "")
    return f"partition{'s' if len(parts) > 1 else ''} {shown}"


def fill_empty_partitions(comm: "Intracomm", meta: "GraphMeta", assignment: "Assignment",
                          progress: "Optional[Progress]" = None) -> "Assignment":
    """Make every partition hold a node of every type that has at least P nodes, and a node
    at all when the graph has at least P; say what was moved and what cannot be. Collective."""
    k = assignment.num_parts
    notes = []
    per_type = {}
    for ntype in meta.node_types:
        block = assignment.blocks[ntype]
        counts = _counts(comm, block.parts, k)
        n = int(counts.sum())
        if n >= k:
            filled = _fill(comm, [block], counts)
            if filled:
                notes.append(f"{_names(filled)} had no node of type '{ntype}': each got the highest-ID "
                             f"'{ntype}' node of the partition holding most of them")
        elif n > 0:
            missing = np.flatnonzero(counts == 0).tolist()
            featured = " and DGL's servers cannot start when a node type with features has no node in a " \
                       "partition" if meta.node_features(ntype) else ""
            notes.append(f"node type '{ntype}' has {n} nodes, fewer than the {k} partitions: {_names(missing)} "
                         f"hold{'s' if len(missing) == 1 else ''} none of them{featured}")
        per_type[ntype] = counts
    total = sum(per_type.values(), np.zeros(k, dtype=np.int64))
    if int(total.sum()) >= k and not total.all():
        filled = _fill(comm, [assignment.blocks[t] for t in meta.node_types], total)
        notes.append(f"{_names(filled)} had no node: each got a node of the partition holding most")
    if progress is not None and comm.Get_rank() == 0:
        for note in notes:
            progress.note(note)
    return assignment

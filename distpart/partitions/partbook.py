"""The partition book: which partition owns a node or edge, and how IDs map between spaces.

distpart numbers nodes (edges) with new "shuffled" homogeneous IDs: all of partition 0
first, then partition 1, ...; inside a partition, grouped by type ID. So every
(partition, type) pair owns one contiguous range, and the whole book is the table of
those ranges (`node_map` / `edge_map` of the partition config). `PartitionBook` answers
the queries of DGL's RangePartitionBook (python/dgl/distributed/graph_partition_book.py,
dmlc/dgl 2.x) on that table, vectorised with numpy on int64.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike

from ..arrays import exclusive_cumsum
from ..errors import OutputError

EdgeType = Union[str, tuple[str, str, str]]

_DEFAULT_NTYPES = {"_N": 0}
_DEFAULT_ETYPES = {"_N:_E:_N": 0}


def ranges_from_counts(counts: np.ndarray, names: Sequence[str]) -> dict[str, list[list[int]]]:
    """The node_map (edge_map) of a partition config from per-partition type counts.

    `counts[p, t]` is the number of items of type `names[t]` in partition p. Returns
    `{name: [[start, end] for each partition]}` in the new homogeneous ID space, with
    Python ints so it can go straight into JSON; a type absent from a partition gets an
    empty `[x, x]` range.
    """
    counts = np.asarray(counts)
    if (
        counts.ndim != 2
        or counts.shape[1] != len(names)
        or (counts.size and counts.dtype.kind not in "iu")
    ):
        raise ValueError(f"counts must be an integer array of shape (num_parts, {len(names)})")
    counts = counts.astype(np.int64)
    if (counts < 0).any():
        raise ValueError("counts must be non-negative")
    ends = np.cumsum(counts.reshape(-1)).reshape(counts.shape)  # partition-major order
    starts = ends - counts
    return {
        name: np.stack([starts[:, t], ends[:, t]], axis=1).tolist() for t, name in enumerate(names)
    }


def range_starts(counts: np.ndarray) -> np.ndarray:
    """Start of each (partition, type) ID range, for counts of shape (P, T), row-major order."""
    return exclusive_cumsum(counts)


def type_of(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Type index of new IDs given the (P, T) counts (empty ranges are skipped)."""
    starts = range_starts(counts).reshape(-1)
    idx = np.searchsorted(starts, ids, side="right") - 1
    return idx % counts.shape[1]


def _owner(ends: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Index of the range holding each ID, given the ranges' sorted, contiguous ends.

    side="right" steps over empty ranges, whose end equals the previous range's end.
    """
    return np.searchsorted(ends, ids, side="right").astype(np.int64, copy=False)


class _Ranges:
    """The ranges of one ID kind (nodes or edges); arrays of shape (num_parts, num_types)."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.starts = starts
        self.counts = ends - starts
        self.num_types = starts.shape[1]
        # Ends in ID order, for one binary search over every (partition, type) range.
        self.flat_ends = ends.reshape(-1)
        self.part_starts = starts[:, 0]
        self.part_ends = ends[:, -1]
        # Per-type IDs number a type's items partition by partition.
        typed_ends = np.cumsum(self.counts, axis=0)
        self.typed_starts = typed_ends - self.counts
        self.typed_ends_by_type = np.ascontiguousarray(typed_ends.T)

    def check(self, ids: ArrayLike, type_id: Optional[int]) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.size and ids.dtype.kind not in "iu":
            raise ValueError(f"IDs must be integers, got {ids.dtype}")
        ids = ids.astype(np.int64, copy=False)
        limit = self.part_ends[-1] if type_id is None else self.typed_ends_by_type[type_id, -1]
        if ids.size and (ids.min() < 0 or ids.max() >= limit):
            raise ValueError(f"IDs outside [0, {limit})")
        return ids

    def partid(self, ids: ArrayLike, type_id: Optional[int]) -> np.ndarray:
        ids = self.check(ids, type_id)
        bounds = self.part_ends if type_id is None else self.typed_ends_by_type[type_id]
        return _owner(bounds, ids)

    def to_per_type(self, ids: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        ids = self.check(ids, None)
        part, type_ids = np.divmod(_owner(self.flat_ends, ids), self.num_types)
        per_type = ids - self.starts[part, type_ids] + self.typed_starts[part, type_ids]
        return type_ids, per_type

    def to_homo(self, ids: ArrayLike, type_id: int) -> np.ndarray:
        ids = self.check(ids, type_id)
        part = _owner(self.typed_ends_by_type[type_id], ids)
        return ids - self.typed_starts[part, type_id] + self.starts[part, type_id]

    def part_range(self, part: int, type_id: Optional[int]) -> tuple[int, int]:
        if type_id is None:
            return int(self.part_starts[part]), int(self.part_ends[part])
        start = int(self.typed_starts[part, type_id])
        return start, start + int(self.counts[part, type_id])


class PartitionBook:
    """Range partition book of one partition, as DGL's RangePartitionBook.

    IDs are int64 numpy arrays. Node (edge) IDs are homogeneous new IDs when the type
    argument is None, else per-type IDs of that type. Edge types are given as canonical
    'src:rel:dst' strings, (src, rel, dst) tuples, or an unambiguous relation name.
    """

    def __init__(
        self,
        part_id: int,
        ntypes: Sequence[str],
        etypes: Sequence[str],
        node_ranges: np.ndarray,
        edge_ranges: np.ndarray,
    ) -> None:
        """`node_ranges[p, t] = [start, end)` of node type ntypes[t] in partition p (edges
        likewise); the ranges are assumed validated, as `from_config` does."""
        self._part_id = part_id
        self._ntypes = list(ntypes)
        self._etypes = list(etypes)
        self._ntype_ids = {name: i for i, name in enumerate(self._ntypes)}
        self._etype_ids = {name: i for i, name in enumerate(self._etypes)}
        self._nodes = _Ranges(node_ranges[..., 0], node_ranges[..., 1])
        self._edges = _Ranges(edge_ranges[..., 0], edge_ranges[..., 1])

    @classmethod
    def from_config(
        cls, cfg: Mapping[str, Any], part_id: int, source: str = "partition config"
    ) -> PartitionBook:
        """Build the book of partition `part_id` from a parsed partition-config JSON.

        `source` (normally the JSON's path) prefixes the key named in OutputErrors.
        """
        num_parts = cfg.get("num_parts")
        if not isinstance(num_parts, int) or num_parts < 1:
            raise OutputError(
                f"{source}: num_parts", f"must be a positive integer, got {num_parts!r}"
            )
        if not 0 <= part_id < num_parts:
            raise ValueError(
                f"partition {part_id} requested, but {source} has {num_parts} partitions"
            )
        ntypes = _names_by_id(cfg.get("ntypes", _DEFAULT_NTYPES), f"{source}: ntypes")
        etypes = _names_by_id(cfg.get("etypes", _DEFAULT_ETYPES), f"{source}: etypes")
        for etype in etypes:
            parts = etype.split(":")
            if len(parts) != 3 or parts[0] not in ntypes or parts[2] not in ntypes:
                raise OutputError(
                    f"{source}: etypes",
                    f"{etype!r} is not a canonical 'src:rel:dst' type over the node types",
                )
        node_ranges = _ranges(cfg, "node_map", "num_nodes", ntypes, num_parts, source)
        edge_ranges = _ranges(cfg, "edge_map", "num_edges", etypes, num_parts, source)
        return cls(part_id, ntypes, etypes, node_ranges, edge_ranges)

    def num_partitions(self) -> int:
        return len(self._nodes.part_ends)

    @property
    def partid(self) -> int:
        """The partition this book was loaded for."""
        return self._part_id

    @property
    def ntypes(self) -> list[str]:
        """Node types in type-ID order."""
        return list(self._ntypes)

    @property
    def etypes(self) -> list[str]:
        """Canonical 'src:rel:dst' edge types in type-ID order."""
        return list(self._etypes)

    def metadata(self) -> list[dict[str, int]]:
        """Per partition: machine_id, num_nodes, num_edges."""
        nodes = self._nodes.part_ends - self._nodes.part_starts
        edges = self._edges.part_ends - self._edges.part_starts
        return [
            {"machine_id": p, "num_nodes": int(n), "num_edges": int(e)}
            for p, (n, e) in enumerate(zip(nodes, edges))
        ]

    def nid2partid(self, nids: ArrayLike, ntype: Optional[str] = None) -> np.ndarray:
        return self._nodes.partid(nids, self._ntype_id(ntype))

    def eid2partid(self, eids: ArrayLike, etype: Optional[EdgeType] = None) -> np.ndarray:
        return self._edges.partid(eids, self._etype_id(etype))

    def map_to_per_ntype(self, ids: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous node IDs -> (node type IDs, per-type node IDs)."""
        return self._nodes.to_per_type(ids)

    def map_to_per_etype(self, ids: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Homogeneous edge IDs -> (edge type IDs, per-type edge IDs)."""
        return self._edges.to_per_type(ids)

    def map_to_homo_nid(self, ids: ArrayLike, ntype: str) -> np.ndarray:
        """Per-type node IDs of `ntype` -> homogeneous node IDs."""
        return self._nodes.to_homo(ids, self._ntype_ids_or_raise(ntype))

    def map_to_homo_eid(self, ids: ArrayLike, etype: EdgeType) -> np.ndarray:
        """Per-type edge IDs of `etype` -> homogeneous edge IDs."""
        return self._edges.to_homo(ids, self._etype_id_or_raise(etype))

    def partid2nids(self, partid: int, ntype: Optional[str] = None) -> np.ndarray:
        """All node IDs (homogeneous, or per-type of `ntype`) owned by `partid`."""
        return np.arange(*self._nodes.part_range(self._check_part(partid), self._ntype_id(ntype)))

    def partid2eids(self, partid: int, etype: Optional[EdgeType] = None) -> np.ndarray:
        """All edge IDs (homogeneous, or per-type of `etype`) owned by `partid`."""
        return np.arange(*self._edges.part_range(self._check_part(partid), self._etype_id(etype)))

    def nid2localnid(self, nids: ArrayLike, partid: int, ntype: Optional[str] = None) -> np.ndarray:
        """Node IDs owned by this partition -> their offsets in its node range."""
        type_id = self._ntype_id(ntype)
        start = self._nodes.part_range(self._check_local(partid), type_id)[0]
        return self._nodes.check(nids, type_id) - start

    def eid2localeid(
        self, eids: ArrayLike, partid: int, etype: Optional[EdgeType] = None
    ) -> np.ndarray:
        """Edge IDs owned by this partition -> their offsets in its edge range."""
        type_id = self._etype_id(etype)
        start = self._edges.part_range(self._check_local(partid), type_id)[0]
        return self._edges.check(eids, type_id) - start

    def _check_part(self, partid: int) -> int:
        if not 0 <= partid < self.num_partitions():
            raise ValueError(f"partition {partid} out of range [0, {self.num_partitions()})")
        return partid

    def _check_local(self, partid: int) -> int:
        # As in DGL: local IDs are only defined for the partition the book was loaded for.
        if partid != self._part_id:
            raise ValueError(
                f"local IDs of partition {partid} asked from the book of partition {self._part_id}"
            )
        return partid

    def _ntype_id(self, ntype: Optional[str]) -> Optional[int]:
        return None if ntype is None else self._ntype_ids_or_raise(ntype)

    def _ntype_ids_or_raise(self, ntype: str) -> int:
        try:
            return self._ntype_ids[ntype]
        except KeyError:
            raise ValueError(f"unknown node type {ntype!r}; known: {self._ntypes}") from None

    def _etype_id(self, etype: Optional[EdgeType]) -> Optional[int]:
        return None if etype is None else self._etype_id_or_raise(etype)

    def _etype_id_or_raise(self, etype: EdgeType) -> int:
        name = ":".join(etype) if isinstance(etype, tuple) else etype
        if name in self._etype_ids:
            return self._etype_ids[name]
        matches = [i for i, c in enumerate(self._etypes) if c.split(":")[1] == name]
        if len(matches) == 1:
            return matches[0]
        problem = "ambiguous" if matches else "unknown"
        raise ValueError(f"{problem} edge type {etype!r}; known: {self._etypes}")


def _names_by_id(value: Any, where: str) -> list[str]:
    """Type names ordered by type ID from a {name: id} mapping with IDs 0..n-1."""
    if not isinstance(value, Mapping) or not value:
        raise OutputError(where, "must be a non-empty {name: type ID} object")
    ids = list(value.values())
    if not all(type(i) is int for i in ids) or sorted(ids) != list(range(len(ids))):
        raise OutputError(where, f"type IDs must be 0..{len(ids) - 1}, got {ids}")
    return sorted(value, key=value.__getitem__)


def _ranges(
    cfg: Mapping[str, Any], key: str, total_key: str, names: list[str], num_parts: int, source: str
) -> np.ndarray:
    """Validated ranges of `cfg[key]` as an int64 array of shape (num_parts, num_types, 2)."""
    where = f"{source}: {key}"
    value = cfg.get(key)
    if isinstance(value, list) and len(names) == 1:  # DGL's form for homogeneous graphs
        value = {names[0]: value}
    if not isinstance(value, Mapping):
        raise OutputError(where, "missing, or not a {type: [[start, end], ...]} object")
    if set(value) != set(names):
        raise OutputError(where, f"types {sorted(value)} differ from the declared {sorted(names)}")
    ranges = np.empty((num_parts, len(names), 2), dtype=np.int64)
    for t, name in enumerate(names):
        arr = np.asarray(value[name])
        if arr.shape != (num_parts, 2) or arr.dtype.kind not in "iu":
            raise OutputError(where, f"{name!r} must be {num_parts} [start, end] integer pairs")
        ranges[:, t] = arr

    flat = ranges.reshape(-1, 2)  # partition by partition, type by type: ID order
    bad = np.flatnonzero(flat[:, 1] < flat[:, 0])
    if bad.size:
        part, t = divmod(int(bad[0]), len(names))
        raise OutputError(where, f"range of {names[t]!r} in partition {part} ends before it starts")
    expected_starts = np.concatenate([[0], flat[:-1, 1]])
    bad = np.flatnonzero(flat[:, 0] != expected_starts)
    if bad.size:
        part, t = divmod(int(bad[0]), len(names))
        raise OutputError(
            where,
            f"range of {names[t]!r} in partition {part} starts at {flat[bad[0], 0]}, expected "
            f"{expected_starts[bad[0]]}: ranges must be contiguous from 0, partition by "
            "partition, type by type",
        )
    total = cfg.get(total_key)
    if total != int(flat[-1, 1]):
        raise OutputError(where, f"ranges cover [0, {flat[-1, 1]}), but {total_key} is {total!r}")
    return ranges

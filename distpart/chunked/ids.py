"""Converting node and edge IDs between heterogeneous and homogeneous form.

This module owns the ID arithmetic of DGL's guide, section 7.5 ("Heterogeneous Graph Under
The Hood"): a node (edge) of a heterogeneous graph is named by (type, per-type ID); its
homogeneous ID is the per-type ID plus the number of nodes (edges) of every type before it,
in the type order of the chunked graph's metadata.json (`node_type`, `edge_type`). Node
type 0's nodes are [0, |V_0|), type 1's [|V_0|, |V_0| + |V_1|), and so on. This is the
numbering of the *input* graph, the one distpart's Step 1 (ParMETIS) works in; the shuffled
IDs of a partition output are converted by its partition book instead
(`PartitionBook.map_to_per_ntype`, as DGL's).

`IdConverter` does what the guide's `IDConverter` does, vectorised: every method takes a
scalar or an array of any shape and returns int64 arrays of that shape (0-d for a scalar;
`[]` gives an empty one). IDs outside their range raise `IdRangeError`, naming the type, the
bad ID, its position in the array and the valid range; an unknown type raises one that is
also the KeyError the guide's dict lookup raises, naming the known types. IDs and counts
are integers: a float (1.5, or even 2.0 as an ID), a bool or a string is refused, never
truncated, and the counts must add up to what int64 IDs can number. Pure numpy; nothing is
read but the metadata.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, List, Mapping, Sequence, Tuple, Union

import numpy as np

from ..errors import InputError
from .metadata import UnknownTypeError

if TYPE_CHECKING:
    from .metadata import GraphMeta

__all__ = ["IdConverter", "IdRangeError", "UnknownIdTypeError"]

TypeKey = Union[str, int, Tuple[str, str, str]]
_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


class IdRangeError(InputError, ValueError):
    """An ID outside the range of its type (or of all homogeneous IDs), or an unknown type.

    A ValueError, as in the guide's converter, and an InputError, so the command line
    reports it as one line naming the problem.
    """

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)


class UnknownIdTypeError(IdRangeError, UnknownTypeError):
    """A type name the converter does not know: an IdRangeError (a ValueError) and the KeyError
    the guide's `ntype2id_map[ntype]` raises, with a message naming the known types."""

    def __init__(self, problem: str) -> None:
        InputError.__init__(self, None, problem)

    __str__ = Exception.__str__


class IdConverter:
    """Heterogeneous (type, per-type ID) <-> homogeneous IDs for the nodes and edges of a graph.

    Node types and canonical edge types ("src:rel:dst") are in type-ID order, with their
    counts. Build one from a chunked graph with `from_metadata`.
    """

    def __init__(self, node_types: Sequence[str], num_nodes: Sequence[int],
                 edge_types: Sequence[str] = (), num_edges: Sequence[int] = ()) -> None:
        self.node_types: List[str] = [str(t) for t in node_types]
        self.edge_types: List[str] = [_canonical(e) for e in edge_types]
        if len(self.node_types) != len(num_nodes) or len(self.edge_types) != len(num_edges):
            raise ValueError("each node type and each edge type needs exactly one count")
        for names, kind in ((self.node_types, "node"), (self.edge_types, "edge")):
            if len(set(names)) != len(names):
                raise ValueError(f"{kind} type names must be unique, got {names}")
        self.num_nodes = _counts(num_nodes, self.node_types, "node")
        self.num_edges = _counts(num_edges, self.edge_types, "edge")
        # offsets[t] is the first homogeneous ID of type t; offsets[-1] the total.
        self.nid_offset = np.concatenate([[0], np.cumsum(self.num_nodes)]).astype(np.int64)
        self.eid_offset = np.concatenate([[0], np.cumsum(self.num_edges)]).astype(np.int64)
        self._ntype_ids = {t: i for i, t in enumerate(self.node_types)}
        self._etype_ids = {t: i for i, t in enumerate(self.edge_types)}
        relations: dict = {}
        for i, name in enumerate(self.edge_types):
            relations.setdefault(name.split(":")[1], []).append(i)
        self._relation_ids = relations

    @classmethod
    def from_metadata(cls, meta: "Union[GraphMeta, Mapping[str, Any], str, os.PathLike[str]]") -> "IdConverter":
        """From a chunked graph: a parsed `GraphMeta`, the decoded metadata.json object (as
        the guide's converter takes), or the path of metadata.json or of its folder."""
        if isinstance(meta, (str, os.PathLike)):
            from .counts import count_rows
            from .metadata import load_metadata
            meta = count_rows(load_metadata(Path(meta)))   # counts the JSON leaves out, from the files
        if isinstance(meta, Mapping):
            edge_types = meta.get("edge_type") or []
            return cls(_key(meta, "node_type"), _type_counts(meta, "nodes", _key(meta, "node_type")),
                       edge_types, _type_counts(meta, "edges", edge_types) if edge_types else [])
        return cls(meta.node_types, meta.node_counts, [e.name for e in meta.edge_types], meta.edge_counts)

    # ------------------------------------------------------------ names and type IDs

    @property
    def total_nodes(self) -> int:
        return int(self.nid_offset[-1])

    @property
    def total_edges(self) -> int:
        return int(self.eid_offset[-1])

    def ntype2id(self, ntype: TypeKey) -> int:
        """Node type name (or type ID, checked) -> node type ID."""
        if isinstance(ntype, (int, np.integer)) and not isinstance(ntype, bool):
            return _checked_type_id(int(ntype), len(self.node_types), "node")
        if not isinstance(ntype, str) or ntype not in self._ntype_ids:
            raise UnknownIdTypeError(f"unknown node type {ntype!r}; the node types are {self.node_types}")
        return self._ntype_ids[ntype]

    def etype2id(self, etype: TypeKey) -> int:
        """Edge type -> edge type ID. `etype` is "src:rel:dst", a (src, rel, dst) tuple, a
        relation name that only one edge type has (as DGL accepts), or a type ID (checked)."""
        if isinstance(etype, (int, np.integer)) and not isinstance(etype, bool):
            return _checked_type_id(int(etype), len(self.edge_types), "edge")
        if isinstance(etype, tuple) and all(isinstance(p, str) for p in etype):
            name = ":".join(etype)
        elif isinstance(etype, str):
            name = etype
        else:
            raise UnknownIdTypeError(f"unknown edge type {etype!r}; the edge types are {self.edge_types}")
        if name in self._etype_ids:
            return self._etype_ids[name]
        matches = self._relation_ids.get(name, [])
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise IdRangeError(f"relation {name!r} is ambiguous: it is the relation of "
                               f"{[self.edge_types[i] for i in matches]}; give the canonical edge type")
        raise UnknownIdTypeError(f"unknown edge type {etype!r}; the edge types are {self.edge_types}")

    def id2ntype(self, type_id: int) -> str:
        return self.node_types[_checked_type_id(_type_id(type_id, "node"), len(self.node_types), "node")]

    def id2etype(self, type_id: int) -> str:
        return self.edge_types[_checked_type_id(_type_id(type_id, "edge"), len(self.edge_types), "edge")]

    # ------------------------------------------------------------ conversions

    def nid_het2hom(self, ntype: "TypeKey | np.ndarray", ids: Any) -> np.ndarray:
        """Per-type node IDs of `ntype` -> homogeneous node IDs (int64, the shape of `ids`).

        `ntype` is one node type (name or ID) or an array of node type IDs broadcast
        against `ids`, e.g. the type column of `nid_hom2het`'s result.
        """
        return _het2hom(self, ntype, ids, "node")

    def nid_hom2het(self, ids: Any) -> Tuple[np.ndarray, np.ndarray]:
        """Homogeneous node IDs -> (node type IDs, per-type node IDs), int64, the shape of `ids`."""
        return _hom2het(self.nid_offset, ids, "node")

    def eid_het2hom(self, etype: "TypeKey | np.ndarray", ids: Any) -> np.ndarray:
        """Per-type edge IDs of `etype` -> homogeneous edge IDs (see `nid_het2hom`)."""
        return _het2hom(self, etype, ids, "edge")

    def eid_hom2het(self, ids: Any) -> Tuple[np.ndarray, np.ndarray]:
        """Homogeneous edge IDs -> (edge type IDs, per-type edge IDs), int64, the shape of `ids`."""
        return _hom2het(self.eid_offset, ids, "edge")

    def __repr__(self) -> str:
        return (f"IdConverter({dict(zip(self.node_types, self.num_nodes.tolist()))}, "
                f"{dict(zip(self.edge_types, self.num_edges.tolist()))})")


# ---------------------------------------------------------------- helpers

def _canonical(etype: Union[str, Tuple[str, str, str]]) -> str:
    name = ":".join(etype) if isinstance(etype, tuple) else str(etype)
    if len(name.split(":")) != 3:
        raise ValueError(f"edge type {etype!r} is not a canonical 'src:rel:dst' edge type")
    return name


def _count(c: Any, what: str) -> int:
    """A count as an int: an integer, or a float with an integral value (2.0); nothing else."""
    if isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_)):
        return int(c)
    if isinstance(c, (float, np.floating)) and np.isfinite(c) and float(c).is_integer():
        return int(c)
    raise ValueError(f"{what} must be a whole number, got {c!r}")


def _counts(counts: Iterable[Any], names: Sequence[str], kind: str) -> np.ndarray:
    values = [_count(c, f"the count of {kind} type {name!r}") for c, name in zip(counts, names)]
    for c, name in zip(values, names):
        if c < 0:
            raise ValueError(f"{kind} type {name!r} has a negative count {c}")
        if c > _INT64_MAX:
            raise ValueError(f"{kind} type {name!r} has a count of {c}, more than int64 IDs can number")
    if sum(values) > _INT64_MAX:
        raise ValueError(f"the {kind} counts add up to {sum(values)}, more than int64 IDs can number "
                         f"({_INT64_MAX})")
    return np.array(values, dtype=np.int64)


def _key(meta: Mapping[str, Any], key: str) -> Any:
    if key not in meta:
        raise ValueError(f"the metadata has no {key!r} (DGL's chunked metadata.json keys are needed)")
    return meta[key]


def _type_counts(meta: Mapping[str, Any], kind: str, names: Sequence[str]) -> List[Any]:
    """Each type's count from a decoded metadata object, in any dialect the format's writers
    use: per chunk (`num_nodes_per_chunk`, DGL's guide), per type (`num_nodes_per_type`, DGL's
    tools and GSProcessing), or, for edges, the sum of each file list's `row_counts`."""
    per_chunk, per_type = f"num_{kind}_per_chunk", f"num_{kind}_per_type"
    if per_chunk in meta:
        return [_total(c, per_chunk) for c in meta[per_chunk]]
    if per_type in meta:
        if not isinstance(meta[per_type], (list, tuple)):
            raise ValueError(f"{per_type}: must be a list of one count per type, got {meta[per_type]!r}")
        return list(meta[per_type])
    if kind == "edges" and isinstance(meta.get("edges"), Mapping) and all(
            isinstance(meta["edges"].get(n), Mapping) and "row_counts" in meta["edges"][n] for n in names):
        return [_total(meta["edges"][n]["row_counts"], f"edges.{n}.row_counts") for n in names]
    raise ValueError(f"the metadata has neither {per_chunk!r} nor {per_type!r}"
                     + (" nor row_counts for every edge type" if kind == "edges" else "")
                     + " (give the metadata file's path to count rows from the files)")


def _total(chunks: Any, key: str) -> int:
    """One type's count: the sum of its per-chunk counts in metadata.json."""
    if not isinstance(chunks, (list, tuple)):
        raise ValueError(f"{key}: each entry must be a list of per-chunk counts, got {chunks!r}")
    return sum(_count(c, f"{key}: a chunk's count") for c in chunks)


def _type_id(t: Any, kind: str) -> int:
    """A type ID as an int; a float (1.5), a bool or a string is refused, as for IDs."""
    if isinstance(t, np.ndarray) and t.ndim == 0:
        t = t[()]
    if isinstance(t, (int, np.integer)) and not isinstance(t, (bool, np.bool_)):
        return int(t)
    raise TypeError(f"{kind} type IDs must be integers, got {t!r}")


def _checked_type_id(t: int, n: int, kind: str) -> int:
    if not 0 <= t < n:
        raise IdRangeError(f"{kind} type ID {t} is outside [0, {n})")
    return t


def _as_ids(ids: Any, what: str) -> np.ndarray:
    """`ids` as int64, refusing what is not an integer (a float ID is a bug upstream); an
    empty list or array of any type is an empty int64 array."""
    arr = np.asarray(ids)
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=np.int64)
    if arr.dtype == object and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                                   for v in arr.reshape(-1)):
        big = next((int(v) for v in arr.reshape(-1) if not _INT64_MIN <= int(v) <= _INT64_MAX), None)
        if big is not None:     # Python ints beyond int64 (numpy keeps them as objects)
            raise IdRangeError(f"{what} {big} does not fit in int64")
        return arr.astype(np.int64)
    if arr.dtype.kind == "u":
        if arr.size and int(arr.max()) > _INT64_MAX:
            raise IdRangeError(f"{what} {int(arr.max())} does not fit in int64")
    elif arr.dtype.kind != "i":
        raise TypeError(f"{what}s must be integers, got an array of {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _where(bad: np.ndarray, shape: Tuple[int, ...]) -> str:
    """' (at index i)' for an array, '' for a scalar: which element was wrong."""
    if not shape:
        return ""
    index = np.unravel_index(int(bad[0]), shape)
    return f" (at index {index[0] if len(index) == 1 else tuple(int(i) for i in index)})"


def _het2hom(conv: IdConverter, types: Any, ids: Any, kind: str) -> np.ndarray:
    names = conv.node_types if kind == "node" else conv.edge_types
    counts = conv.num_nodes if kind == "node" else conv.num_edges
    offsets = conv.nid_offset if kind == "node" else conv.eid_offset
    to_id = conv.ntype2id if kind == "node" else conv.etype2id
    ids = _as_ids(ids, f"{kind} ID")
    if isinstance(types, (str, tuple, int, np.integer)):
        t = to_id(types)
        bad = np.flatnonzero((ids.reshape(-1) < 0) | (ids.reshape(-1) >= counts[t]))
        if len(bad):
            raise IdRangeError(f"{kind} ID {int(ids.reshape(-1)[bad[0]])}{_where(bad, ids.shape)} of type "
                               f"{names[t]!r} is outside [0, {int(counts[t])})")
        return ids + offsets[t]
    type_ids = _as_ids(types, f"{kind} type ID")
    type_ids, ids = np.broadcast_arrays(type_ids, ids)
    flat_t = type_ids.reshape(-1)
    bad = np.flatnonzero((flat_t < 0) | (flat_t >= len(names)))
    if len(bad):
        raise IdRangeError(f"{kind} type ID {int(flat_t[bad[0]])}{_where(bad, type_ids.shape)} is "
                           f"outside [0, {len(names)})")
    flat = ids.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= counts[flat_t]))
    if len(bad):
        t = int(flat_t[bad[0]])
        raise IdRangeError(f"{kind} ID {int(flat[bad[0]])}{_where(bad, ids.shape)} of type {names[t]!r} "
                           f"is outside [0, {int(counts[t])})")
    return ids + offsets[type_ids]


def _hom2het(offsets: np.ndarray, ids: Any, kind: str) -> Tuple[np.ndarray, np.ndarray]:
    ids = _as_ids(ids, f"homogeneous {kind} ID")
    flat = ids.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= offsets[-1]))
    if len(bad):
        raise IdRangeError(f"homogeneous {kind} ID {int(flat[bad[0]])}{_where(bad, ids.shape)} is outside "
                           f"[0, {int(offsets[-1])})")
    # side="right" skips empty types: their offset equals the next type's.
    types = np.searchsorted(offsets, ids, side="right").astype(np.int64) - 1
    return types, ids - offsets[types]

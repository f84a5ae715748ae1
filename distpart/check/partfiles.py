"""What `verify` checks file by file, before any rank talks to another: the partition config
and each partition's own files, against the input's types and counts and the partition book.

This module owns the checks of every array DGL's loader and `DistGraph` read from a
partition's graph.dgl (ndata `_ID`, `_TYPE`, `inner_node`, `part_id` when written; edata
`_ID`, `_TYPE`, `inner_edge`: presence, dtype, values), of its halo set (exactly the sources
of its edges owned elsewhere, once each, ascending), of orig_nids.dgl / orig_eids.dgl
(int64, within each type's count), of the tensor dicts' keys, dtypes and row counts, and of
the config (types, node_map/edge_map ranges against the input's counts and the
assignment). It reduces a partition to the claims `verify` sends to the ranks holding the
matching input (`Part`). Every error names the file and the problem. No MPI here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np

from ..arrays import first_outside, id_dtype, sorted_unique
from ..chunked.metadata import GraphMeta
from ..chunked.readers import FeatureSource
from ..errors import OutputError
from ..partitions.dglformat import PartitionGraph, read_graph, read_tensor_dict, release_pages, storable_dtype
from ..partitions.partbook import PartitionBook, range_starts, type_of
from ..paths import CONFIG_FILE

# The dtypes accepted for the arrays DGL reads from graph.dgl: those of DGL's own writer
# (dgl/distributed/partition.py, RESERVED_FIELD_DTYPE: IDs int64, flags uint8, node _TYPE
# int16, edge _TYPE int32 because "sort_csr_by_tag and sort_csc_by_tag work on int32/64
# only") and of distpart's (node _TYPE int32, shared/spec/dgl-partition-format.md).
_INT64 = (np.dtype("<i8"),)
_FLAG = (np.dtype("u1"),)
_SIGNED = tuple(np.dtype(t).newbyteorder("<") for t in ("i1", "i2", "i4", "i8"))
_ID_TYPES = tuple(np.dtype(t).newbyteorder("<") for t in ("i4", "i8"))
NODE_DATA = {"_ID": (_INT64, "int64"), "_TYPE": (_SIGNED, "a signed integer type"),
             "inner_node": (_FLAG, "uint8")}
EDGE_DATA = {"_ID": (_INT64, "int64"), "_TYPE": (_ID_TYPES, "int32 or int64"),
             "inner_edge": (_FLAG, "uint8")}
PART_ID = (_SIGNED, "a signed integer type")
# Edges checked at a time where a check would otherwise make whole-partition temporaries
# (about 60 bytes of mapped pages and temporaries per edge of a piece).
_ROWS = 1 << 18


@dataclass
class Part:
    """One partition as loaded for checking."""

    # Per edge type, made when that type is checked: (orig edge ID, new source ID, new
    # destination ID) of each kept edge. Only one type's claims are held at a time, 12 bytes
    # per edge while IDs fit int32, instead of the whole graph.
    edge_claims: "EdgeClaims"
    orig_nids: Dict[str, np.ndarray]
    orig_eids: Dict[str, np.ndarray]
    node_feats: Dict[str, np.ndarray]
    edge_feats: Dict[str, np.ndarray]


# ---------------------------------------------------------------- config

def check_config(path: Path, config: dict, meta: GraphMeta, num_parts: int,
                 assigned: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(node counts (P, T), edge counts (P, E)) from the maps, checked against the input;
    `assigned[p, t]` is the number of type-t nodes the assignment puts in partition p."""
    if config.get("num_parts") != num_parts:
        raise OutputError(path, f"num_parts is {config.get('num_parts')} but the assignment has {num_parts}")
    if config.get("ntypes") != {n: i for i, n in enumerate(meta.node_types)}:
        raise OutputError(path, "ntypes do not match the input's node types")
    if config.get("etypes") != {e.name: i for i, e in enumerate(meta.edge_types)}:
        raise OutputError(path, "etypes do not match the input's edge types")
    PartitionBook.from_config(config, 0, source=str(path))  # contiguity and coverage of the maps
    node_counts = _counts(path, config, "node_map", list(meta.node_types), meta.node_counts)
    edge_counts = _counts(path, config, "edge_map", [e.name for e in meta.edge_types], meta.edge_counts)
    for key, counts in (("num_nodes", node_counts), ("num_edges", edge_counts)):
        if config.get(key) != int(counts.sum()):
            raise OutputError(path, f"{key} is {config.get(key)} but the maps cover {int(counts.sum())}")
    wrong = np.argwhere(node_counts != assigned)
    if len(wrong):
        p, t = (int(x) for x in wrong[0])
        raise OutputError(path, f"node_map gives partition {p} {int(node_counts[p, t])} nodes of type "
                                f"'{meta.node_types[t]}', but the assignment puts {int(assigned[p, t])} there")
    return node_counts, edge_counts


def _counts(path: Path, config: dict, key: str, names, totals) -> np.ndarray:
    ranges = config[key]
    num_parts = config["num_parts"]
    counts = np.zeros((num_parts, len(names)), dtype=np.int64)
    starts = np.zeros_like(counts)
    for t, name in enumerate(names):
        r = np.asarray(ranges.get(name, []), dtype=np.int64).reshape(-1, 2)
        if len(r) != num_parts:
            raise OutputError(path, f"{key}['{name}'] has {len(r)} ranges for {num_parts} partitions")
        counts[:, t], starts[:, t] = r[:, 1] - r[:, 0], r[:, 0]
        if counts[:, t].sum() != totals[t]:
            raise OutputError(path, f"{key}['{name}'] covers {counts[:, t].sum()} IDs but the input has {totals[t]}")
    if not np.array_equal(starts, range_starts(counts)):
        raise OutputError(path, f"{key} ranges are not laid out partition by partition, type by type")
    return counts


# ---------------------------------------------------------------- one partition

def load_part(out_dir: Path, config: dict, p: int, meta: GraphMeta, node_counts: np.ndarray,
              edge_counts: np.ndarray, advance: Callable[[float], None] = lambda share: None) -> Part:
    """Load and check partition p. After each step, `advance(share)` gets that step's share of
    the partition's load time (shares measured on an 8M-edge graph, summing to 1): progress."""
    files = config.get(f"part-{p}")
    if not isinstance(files, dict):
        raise OutputError(out_dir / CONFIG_FILE, f"no entry 'part-{p}'")
    gpath = out_dir / files["part_graph"]
    g = read_graph(gpath, mmap=True)   # walked piece by piece below: never whole in memory
    advance(0.25)
    nid, eid, etype = check_graph(gpath, g, p, node_counts, edge_counts)
    advance(0.45)
    part_dir = gpath.parent
    ntypes, etypes = list(meta.node_types), [et.name for et in meta.edge_types]
    orig_nids = read_tensor_dict(part_dir / "orig_nids.dgl")
    orig_eids = read_tensor_dict(part_dir / "orig_eids.dgl", mmap=True)   # read per piece of claims
    _expect_keys(part_dir / "orig_nids.dgl", orig_nids, ntypes)
    _expect_keys(part_dir / "orig_eids.dgl", orig_eids, etypes)
    for t, ntype in enumerate(ntypes):
        _expect_orig(part_dir / "orig_nids.dgl", orig_nids, ntype, node_counts[p, t], meta.num_nodes(ntype))
    for e, et in enumerate(meta.edge_types):
        _expect_orig(part_dir / "orig_eids.dgl", orig_eids, et.name, edge_counts[p, e], et.count)
        release_pages(orig_eids[et.name])
    node_feats = read_tensor_dict(out_dir / files["node_feats"], mmap=True)
    edge_feats = read_tensor_dict(out_dir / files["edge_feats"], mmap=True)
    _expect_keys(out_dir / files["node_feats"], node_feats,
                 [f"{n}/{f}" for n in ntypes for f in meta.node_features(n)])
    _expect_keys(out_dir / files["edge_feats"], edge_feats,
                 [f"{e}/{f}" for e in etypes for f in meta.edge_features(e)])
    for t, ntype in enumerate(ntypes):
        for f, cf in meta.node_features(ntype).items():
            _expect_rows(out_dir / files["node_feats"], node_feats, f"{ntype}/{f}", node_counts[p, t],
                         _stored_form(cf))
    for e, et in enumerate(meta.edge_types):
        for f, cf in meta.edge_features(et.name).items():
            _expect_rows(out_dir / files["edge_feats"], edge_feats, f"{et.name}/{f}", edge_counts[p, e],
                         _stored_form(cf))
    advance(0.05)
    claims = EdgeClaims(gpath, nid.astype(id_dtype(int(node_counts.sum()))), orig_eids, meta,
                        range_starts(edge_counts)[p], edge_counts[p])
    del g, nid, eid, etype
    advance(0.25)
    # orig_eids orders the edge feature rows; types without features need only the claims.
    kept = {et.name: orig_eids[et.name] for et in meta.edge_types if meta.edge_features(et.name)}
    return Part(claims, orig_nids, kept, node_feats, edge_feats)


def check_graph(gpath: Path, g: PartitionGraph, p: int, node_counts: np.ndarray,
                edge_counts: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check every array of graph.dgl against the partition book; (node _ID, edge _ID, edge _TYPE)."""
    for key, (dtypes, name) in NODE_DATA.items():
        _expect_data(gpath, g.ndata, "node", key, dtypes, name)
    for key, (dtypes, name) in EDGE_DATA.items():
        _expect_data(gpath, g.edata, "edge", key, dtypes, name)
    num_nodes = int(node_counts.sum())
    first = int(range_starts(node_counts)[p, 0])
    n_inner = int(node_counts[p].sum())
    nid, inner = np.asarray(g.ndata["_ID"]), np.asarray(g.ndata["inner_node"])
    bad = first_outside(nid, num_nodes)
    if bad is not None:
        raise OutputError(gpath, f"node _ID {int(nid[bad])} (local node {bad}) is outside [0, {num_nodes}), "
                                 f"the number of nodes")
    if len(nid) < n_inner or not np.array_equal(nid[:n_inner], np.arange(first, first + n_inner)):
        raise OutputError(gpath, f"owned nodes' _ID are not the node_map range [{first}, {first + n_inner})")
    if not (inner[:n_inner] == 1).all() or (inner[n_inner:] != 0).any():
        raise OutputError(gpath, f"inner_node flags disagree with node_map (expected {n_inner} owned "
                                 f"nodes first, found {int((inner != 0).sum())} flagged)")
    _check_halo(gpath, g, nid, n_inner, first)
    if not np.array_equal(np.asarray(g.ndata["_TYPE"]), type_of(nid, node_counts)):
        raise OutputError(gpath, "node _TYPE disagrees with node_map")
    if "part_id" in g.ndata:
        _expect_data(gpath, g.ndata, "node", "part_id", *PART_ID)
        owner = np.searchsorted(np.cumsum(node_counts.sum(axis=1)), nid, side="right")
        wrong = np.flatnonzero(np.asarray(g.ndata["part_id"]) != owner)
        if len(wrong):
            i = int(wrong[0])
            raise OutputError(gpath, f"part_id of node _ID {int(nid[i])} is {int(g.ndata['part_id'][i])}, "
                                     f"but node_map puts it in partition {int(owner[i])}")
    if any((d >= n_inner).any() for (d,) in mapped_pieces(g.dst)):
        raise OutputError(gpath, "an edge's destination is not owned by this partition")
    eid, etype = g.edata["_ID"], g.edata["_TYPE"]
    e_first = int(range_starts(edge_counts)[p, 0]) if edge_counts.size else 0
    n_edges = int(edge_counts[p].sum())
    if len(eid) != n_edges or not _is_range(eid, e_first):
        raise OutputError(gpath, f"edge _ID are not the edge_map range [{e_first}, {e_first + n_edges})")
    if n_edges and not all(np.array_equal(t, type_of(i, edge_counts)) for t, i in mapped_pieces(etype, eid)):
        raise OutputError(gpath, "edge _TYPE disagrees with edge_map")
    for lo, (flags,) in zip(range(0, n_edges, _ROWS), mapped_pieces(g.edata["inner_edge"])):
        cleared = np.flatnonzero(flags != 1)
        if len(cleared):
            i = lo + int(cleared[0])
            raise OutputError(gpath, f"inner_edge of edge _ID {int(eid[i])} is {int(g.edata['inner_edge'][i])}, "
                                     f"but every edge of a partition is its own (1)")
    return nid, eid, etype


def mapped_pieces(*arrays: np.ndarray) -> Iterator[Tuple[np.ndarray, ...]]:
    """Aligned pieces of `_ROWS` rows of equally long arrays; the pages of memory-mapped ones
    are released after each piece, so a check holds one piece of a mapped graph, not all of it."""
    for lo in range(0, len(arrays[0]), _ROWS):
        piece = tuple(a[lo:lo + _ROWS] for a in arrays)
        yield piece
        for a in piece:
            release_pages(a)


def _is_range(ids: np.ndarray, first: int) -> bool:
    """Whether `ids` holds exactly [first, first + len(ids)), in any order. Strictly rising IDs
    from `first` to `first + len - 1` are that range, checked without a sorted copy."""
    n = len(ids)
    if n and int(ids[0]) == first and int(ids[-1]) == first + n - 1 and _rising(ids):
        return True
    return np.array_equal(np.sort(ids), np.arange(first, first + n))


def _rising(ids: np.ndarray) -> bool:
    """Strictly rising; pieces overlap by one ID so that every neighbouring pair is compared."""
    for lo in range(0, len(ids) - 1, _ROWS):
        w = ids[lo:lo + _ROWS + 1]
        ok = bool((w[1:] > w[:-1]).all())
        release_pages(w)
        if not ok:
            return False
    return True


def _check_halo(gpath: Path, g: PartitionGraph, nid: np.ndarray, n_inner: int, first: int) -> None:
    """The halo nodes are exactly the sources of this partition's edges that it does not own,
    each once, in ascending _ID."""
    halo = nid[n_inner:]
    if ((halo >= first) & (halo < first + n_inner)).any():
        raise OutputError(gpath, "a halo node's _ID lies in this partition's own range")
    if len(halo) != len(sorted_unique(halo)):
        raise OutputError(gpath, "a halo node appears more than once")
    if (np.diff(halo) < 0).any():
        raise OutputError(gpath, "halo nodes are not in ascending _ID order")
    used = np.zeros(len(halo), dtype=bool)
    for (src,) in mapped_pieces(g.src):
        used[src[src >= n_inner] - n_inner] = True
    if not used.all():
        i = int(np.flatnonzero(~used)[0])
        raise OutputError(gpath, f"halo node _ID {int(halo[i])} (local node {n_inner + i}) is the source "
                                 f"of no edge of this partition (halo nodes are exactly those sources)")


def _expect_data(path: Path, data: dict, what: str, key: str, dtypes: Sequence[np.dtype], name: str) -> None:
    if key not in data:
        raise OutputError(path, f"has no {what} data '{key}'")
    arr = data[key]
    if arr.ndim != 1 or np.dtype(arr.dtype).newbyteorder("<") not in dtypes:
        raise OutputError(path, f"{what} data '{key}' is {np.dtype(arr.dtype).name} of shape {arr.shape}; "
                                f"DGL needs {name}, one value per {what}")


class EdgeClaims:
    """A checked partition's claims of one edge type at a time, made from its graph.dgl,
    memory-mapped again and walked piece by piece: (orig ID, new src, new dst) of each edge,
    in the narrowest dtypes holding their IDs (`id_dtype` of global counts, so every rank
    exchanges the same columns)."""

    def __init__(self, gpath: Path, new: np.ndarray, orig_eids: Dict[str, np.ndarray], meta: GraphMeta,
                 starts: np.ndarray, counts: np.ndarray) -> None:
        self.gpath, self.new, self.orig_eids, self.meta = gpath, new, orig_eids, meta
        self.starts, self.counts = starts, counts

    def take(self, e: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Edge type e's claims (`counts[e]` edges, in local edge-ID order)."""
        et, n, new = self.meta.edge_types[e], int(self.counts[e]), self.new
        orig, src, dst = np.empty(n, id_dtype(et.count)), np.empty(n, new.dtype), np.empty(n, new.dtype)
        g = read_graph(self.gpath, mmap=True)   # checked whole by load_part
        ids_of_type = self.orig_eids[et.name]
        at = 0
        for s, d, ids, types in mapped_pieces(g.src, g.dst, g.edata["_ID"], g.edata["_TYPE"]):
            sel = slice(None) if len(self.meta.edge_types) == 1 else np.flatnonzero(types == e)
            k = len(ids) if isinstance(sel, slice) else len(sel)
            orig[at:at + k] = ids_of_type[ids[sel] - self.starts[e]]
            np.take(new, s[sel], out=src[at:at + k])
            np.take(new, d[sel], out=dst[at:at + k])
            release_pages(ids_of_type)
            at += k
        return orig, src, dst


# ---------------------------------------------------------------- tensor dicts

def _stored_form(files) -> Tuple[np.dtype, Tuple[int, ...]]:
    """(dtype, row shape) a feature must have in the output: the input's, made storable."""
    source = FeatureSource(files)
    return storable_dtype(source.dtype), tuple(source.tail_shape)


def _expect_keys(path: Path, tensors: dict, keys: Sequence[str]) -> None:
    """No tensor beyond `keys` (a missing one is reported by the row checks)."""
    extra = sorted(set(tensors) - set(keys))
    if extra:
        raise OutputError(path, f"has tensor '{extra[0]}', which the input does not have")


def _expect_orig(path: Path, tensors: dict, key: str, rows: int, count: int) -> None:
    """Original IDs of one type: int64, one per owned item, each within [0, count)."""
    _expect_rows(path, tensors, key, rows)
    arr = tensors[key]
    if arr.ndim != 1 or np.dtype(arr.dtype).newbyteorder("<") != np.dtype("<i8"):
        raise OutputError(path, f"'{key}' is {np.dtype(arr.dtype).name} of shape {arr.shape}, "
                                f"expected int64, one ID per row")
    bad = first_outside(arr, count)
    if bad is not None:
        raise OutputError(path, f"'{key}' holds ID {int(arr[bad])}, outside [0, {count})")


def _expect_rows(path: Path, tensors: dict, key: str, rows: int,
                 form: Optional[Tuple[np.dtype, Tuple[int, ...]]] = None) -> None:
    """Tensor `key` exists with `rows` rows (and, for features, the input's dtype and row shape).

    Checked before any row is compared or sent: a converting copy would hide a dtype change,
    and ranks sending different dtypes would disagree on message sizes.
    """
    if key not in tensors:
        raise OutputError(path, f"has no tensor '{key}'")
    arr = tensors[key]
    if form is not None:
        dtype, tail = form
        if np.dtype(arr.dtype).newbyteorder("<") != dtype or tuple(arr.shape[1:]) != tail:
            raise OutputError(path, f"'{key}' has dtype {np.dtype(arr.dtype).name} and row shape "
                                    f"{tuple(arr.shape[1:])}, but the input gives {dtype.name} and {tail}")
    if len(arr) != rows:
        raise OutputError(path, f"'{key}' has {len(arr)} rows, expected {rows}")

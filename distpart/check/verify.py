"""Checking a partition output against its input and assignment, in parallel.

Each rank loads only its own partitions and checks their internal structure. Claims are
then sent to the rank that holds the matching slice of the input: every (type, orig node
ID) goes to the rank holding that node's assignment block, which checks that it is owned
exactly once and by the partition the assignment names, and records its new ID; every
(type, orig edge ID) goes to the rank that reads that edge from the input, which checks
that it is kept exactly once and that its endpoints' new IDs are the input endpoints' new
IDs; feature rows travel the same way and are compared byte for byte. Nothing is ever
gathered on one rank.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import numpy as np

from ..arrays import first_outside
from ..assign.assignment import Assignment
from ..chunked.blocks import rank_bounds, read_edge_block
from ..mpi.collective import agreed
from ..partitions.dglformat import read_graph, read_tensor_dict, storable_dtype, to_storable
from ..partitions.layout import PartitionLayout, check_layout
from ..paths import CONFIG_FILE
from ..errors import OutputError
from ..mpi.exchange import exchange, lookup
from ..chunked.metadata import GraphMeta, read_json
from ..partitions.partbook import PartitionBook
from ..run.progress import Progress
from ..chunked.readers import FeatureSource
from ..partitions.partbook import range_starts, type_of

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


@dataclass
class _Part:
    """One partition as loaded for checking."""

    # Per edge type: (orig edge ID, new source ID, new destination ID) of each kept edge.
    # Only these claims are kept from graph.dgl, and each is dropped once checked, so the
    # check holds 24 bytes per edge instead of the whole graph.
    edge_claims: Dict[int, Tuple[np.ndarray, np.ndarray, np.ndarray]]
    orig_nids: Dict[str, np.ndarray]
    orig_eids: Dict[str, np.ndarray]
    node_feats: Dict[str, np.ndarray]
    edge_feats: Dict[str, np.ndarray]


def verify(comm: Intracomm, meta: GraphMeta, assignment: Assignment, out_dir: Path, *,
           max_bytes: int, progress: Optional[Progress] = None) -> str:
    """Raise OutputError on every rank if the output disagrees with the input. Collective."""
    progress = progress or Progress.off()
    out_dir = Path(out_dir)
    with agreed(comm):
        if not (out_dir / CONFIG_FILE).exists():
            raise OutputError(out_dir / CONFIG_FILE, "does not exist (the output is missing or incomplete)")
        config = read_json(out_dir / CONFIG_FILE, OutputError)
        node_counts, edge_counts = _check_config(out_dir / CONFIG_FILE, config, meta, assignment)
    layout = PartitionLayout(assignment.num_parts, comm.Get_size())
    check_layout(layout.num_parts, layout.nranks)
    mine = layout.parts_of(comm.Get_rank())
    with agreed(comm):
        parts = {p: _load_part(out_dir, config, p, meta, node_counts, edge_counts) for p in mine}

    new_of_orig: Dict[str, np.ndarray] = {}
    node_starts = range_starts(node_counts)
    size = comm.Get_size()
    # Progress counts input items checked on rank 0: each node or edge, and each feature row.
    node_items = [len(assignment.blocks[n].parts) * (1 + len(meta.node_features(n))) for n in meta.node_types]
    edge_items = [-(-et.count // size) * (1 + len(meta.edge_features(et.name))) for et in meta.edge_types]
    with progress.task("checks", sum(node_items) + sum(edge_items), "items"):
        for t, ntype in enumerate(meta.node_types):
            new_of_orig[ntype] = _check_nodes(comm, meta, assignment, parts, t, node_starts, node_counts,
                                              max_bytes)
            progress.advance(node_items[t])
        for e, etype in enumerate(meta.edge_types):
            _check_edges(comm, meta, assignment, parts, e, new_of_orig, max_bytes, progress)
            progress.advance(edge_items[e] - -(-etype.count // size) * 0.5)
    nfeat = sum(len(f) for f in meta.node_data.values()) + sum(len(f) for f in meta.edge_data.values())
    return (f"{assignment.num_parts} partitions, {int(node_counts.sum())} nodes, "
            f"{int(edge_counts.sum())} edges, {nfeat} features match the input")


# ---------------------------------------------------------------- config and structure

def _check_config(path: Path, config: dict, meta: GraphMeta, assignment: Assignment):
    """(node counts (P, T), edge counts (P, E)) from the maps, checked against the input."""
    if config.get("num_parts") != assignment.num_parts:
        raise OutputError(path, f"num_parts is {config.get('num_parts')} but the assignment has "
                                f"{assignment.num_parts}")
    if config.get("ntypes") != {n: i for i, n in enumerate(meta.node_types)}:
        raise OutputError(path, "ntypes do not match the input's node types")
    if config.get("etypes") != {e.name: i for i, e in enumerate(meta.edge_types)}:
        raise OutputError(path, "etypes do not match the input's edge types")
    PartitionBook.from_config(config, 0)  # contiguity and coverage of node_map/edge_map
    node_counts = _counts(path, config, "node_map", list(meta.node_types), meta.node_counts)
    edge_counts = _counts(path, config, "edge_map", [e.name for e in meta.edge_types], meta.edge_counts)
    for key, counts in (("num_nodes", node_counts), ("num_edges", edge_counts)):
        if config.get(key) != int(counts.sum()):
            raise OutputError(path, f"{key} is {config.get(key)} but the maps cover {int(counts.sum())}")
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


def _load_part(out_dir: Path, config: dict, p: int, meta: GraphMeta,
               node_counts: np.ndarray, edge_counts: np.ndarray) -> _Part:
    files = config.get(f"part-{p}")
    if not isinstance(files, dict):
        raise OutputError(out_dir / CONFIG_FILE, f"no entry 'part-{p}'")
    gpath = out_dir / files["part_graph"]
    g = read_graph(gpath)
    first = int(range_starts(node_counts)[p, 0])
    n_inner = int(node_counts[p].sum())
    nid, inner = np.asarray(g.ndata["_ID"]), np.asarray(g.ndata["inner_node"])
    if len(nid) < n_inner or not np.array_equal(nid[:n_inner], np.arange(first, first + n_inner)):
        raise OutputError(gpath, f"owned nodes' _ID are not the node_map range [{first}, {first + n_inner})")
    if not (inner[:n_inner] == 1).all() or (inner[n_inner:] != 0).any():
        raise OutputError(gpath, f"inner_node flags disagree with node_map (expected {n_inner} owned "
                                 f"nodes first, found {int((inner != 0).sum())} flagged)")
    halo = nid[n_inner:]
    if ((halo >= first) & (halo < first + n_inner)).any():
        raise OutputError(gpath, "a halo node's _ID lies in this partition's own range")
    if len(halo) > 1 and (np.diff(np.sort(halo)) == 0).any():
        raise OutputError(gpath, "a halo node appears more than once")
    if not np.array_equal(np.asarray(g.ndata["_TYPE"]), type_of(nid, node_counts)):
        raise OutputError(gpath, "node _TYPE disagrees with node_map")
    if (g.dst >= n_inner).any():
        raise OutputError(gpath, "an edge's destination is not owned by this partition")
    eid, etype = np.asarray(g.edata["_ID"]), np.asarray(g.edata["_TYPE"])
    e_first = int(range_starts(edge_counts)[p, 0]) if edge_counts.size else 0
    n_edges = int(edge_counts[p].sum())
    if len(eid) != n_edges or not np.array_equal(np.sort(eid), np.arange(e_first, e_first + n_edges)):
        raise OutputError(gpath, f"edge _ID are not the edge_map range [{e_first}, {e_first + n_edges})")
    if n_edges and not np.array_equal(etype, type_of(eid, edge_counts)):
        raise OutputError(gpath, "edge _TYPE disagrees with edge_map")
    part_dir = gpath.parent
    orig_nids = read_tensor_dict(part_dir / "orig_nids.dgl")
    orig_eids = read_tensor_dict(part_dir / "orig_eids.dgl")
    for t, ntype in enumerate(meta.node_types):
        _expect_rows(part_dir / "orig_nids.dgl", orig_nids, ntype, node_counts[p, t])
    for e, et in enumerate(meta.edge_types):
        _expect_rows(part_dir / "orig_eids.dgl", orig_eids, et.name, edge_counts[p, e])
    node_feats = read_tensor_dict(out_dir / files["node_feats"], mmap=True)
    edge_feats = read_tensor_dict(out_dir / files["edge_feats"], mmap=True)
    for t, ntype in enumerate(meta.node_types):
        for f, cf in meta.node_features(ntype).items():
            _expect_rows(out_dir / files["node_feats"], node_feats, f"{ntype}/{f}", node_counts[p, t],
                         _stored_form(cf))
    for e, et in enumerate(meta.edge_types):
        for f, cf in meta.edge_features(et.name).items():
            _expect_rows(out_dir / files["edge_feats"], edge_feats, f"{et.name}/{f}", edge_counts[p, e],
                         _stored_form(cf))
    claims = _edge_claims(g, nid, eid, etype, orig_eids, meta, range_starts(edge_counts)[p])
    # orig_eids orders the edge feature rows; types without features need only the claims.
    kept = {et.name: orig_eids[et.name] for et in meta.edge_types if meta.edge_features(et.name)}
    return _Part(claims, orig_nids, kept, node_feats, edge_feats)


def _edge_claims(g, nid: np.ndarray, eid: np.ndarray, etype: np.ndarray, orig_eids: Dict[str, np.ndarray],
                 meta: GraphMeta, starts: np.ndarray) -> Dict[int, Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(orig ID, new src, new dst) per edge type, from a checked partition graph."""
    src, dst = nid[g.src], nid[g.dst]
    claims = {}
    for e, et in enumerate(meta.edge_types):
        if len(etype) and (etype == e).all():   # one edge type: no copies
            claims[e] = (orig_eids[et.name][eid - starts[e]], src, dst)
            continue
        sel = np.flatnonzero(etype == e)
        claims[e] = (orig_eids[et.name][eid[sel] - starts[e]], src[sel], dst[sel])
    return claims


def _stored_form(files) -> Tuple[np.dtype, Tuple[int, ...]]:
    """(dtype, row shape) a feature must have in the output: the input's, made storable."""
    source = FeatureSource(files)
    return storable_dtype(source.dtype), tuple(source.tail_shape)


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


# ---------------------------------------------------------------- nodes

def _check_nodes(comm: Intracomm, meta: GraphMeta, assignment: Assignment, parts: Dict[int, _Part], t: int,
                 node_starts: np.ndarray, node_counts: np.ndarray, max_bytes: int) -> np.ndarray:
    """Check ownership of type t's nodes; returns the new ID of each node of this rank's block."""
    ntype = meta.node_types[t]
    block = assignment.blocks[ntype]
    n = meta.num_nodes(ntype)
    orig = _concat([parts[p].orig_nids[ntype] for p in parts])
    part = _concat([np.full(node_counts[p, t], p, dtype=np.int64) for p in parts])
    new = _concat([node_starts[p, t] + np.arange(node_counts[p, t], dtype=np.int64) for p in parts])
    with agreed(comm):
        _in_range(orig, n, f"orig_nids['{ntype}']")
    owner = np.searchsorted(block.bounds, orig, side="right") - 1
    (orig_r, part_r, new_r), _ = exchange(comm, owner, [orig, part, new], max_bytes)
    table = np.empty(len(block.parts), dtype=np.int64)
    with agreed(comm):
        local = orig_r - block.start
        _exactly_once(local, len(block.parts), block.start, f"node {{}} of type '{ntype}' is owned by {{}} partitions")
        wrong = np.flatnonzero(block.parts[local] != part_r)
        if len(wrong):
            i = int(wrong[0])
            raise OutputError(None, f"node {int(orig_r[i])} of type '{ntype}' is in partition "
                                    f"{int(part_r[i])} but the assignment says {int(block.parts[local[i]])}")
        table[local] = new_r
    for fname, files in meta.node_features(ntype).items():
        key = f"{ntype}/{fname}"
        # Popped: the memory-mapped rows leave RSS once checked (unmapped with the array).
        rows = _concat_rows([parts[p].node_feats.pop(key) for p in parts])
        _compare_feature(comm, FeatureSource(files), block.start, len(block.parts), block.bounds,
                         orig, rows, key, max_bytes)
    return table


# ---------------------------------------------------------------- edges

def _check_edges(comm: Intracomm, meta: GraphMeta, assignment: Assignment, parts: Dict[int, _Part], e: int,
                 new_of_orig: Dict[str, np.ndarray], max_bytes: int,
                 progress: Progress) -> None:
    etype = meta.edge_types[e]
    block = read_edge_block(comm, meta, etype, progress, 0.5)
    bounds = rank_bounds(comm, block.start, etype.count)
    orig, src, dst = _take_claims(parts, e)
    with agreed(comm):
        _in_range(orig, etype.count, f"orig_eids['{etype.name}']")
    owner = np.searchsorted(bounds, orig, side="right") - 1
    columns = [orig, src, dst]
    del orig, src, dst  # the exchange frees each column once sent
    (local, src_r, dst_r), _ = exchange(comm, owner, columns, max_bytes)
    del owner
    local -= block.start
    with agreed(comm):
        _exactly_once(local, len(block.src), block.start, f"edge {{}} of type '{etype.name}' is kept {{}} times")
    # One endpoint at a time, each lookup freed before the next.
    want = lookup(comm, block.dst, assignment.blocks[etype.dst].bounds, new_of_orig[etype.dst], max_bytes)
    bad = want[local] != dst_r
    del want, dst_r
    want = lookup(comm, block.src, assignment.blocks[etype.src].bounds, new_of_orig[etype.src], max_bytes)
    bad |= want[local] != src_r
    del want, src_r
    with agreed(comm):
        wrong = np.flatnonzero(bad)
        if len(wrong):
            i = int(local[wrong[0]]) + block.start
            raise OutputError(None, f"edge {i} of type '{etype.name}' connects the wrong nodes "
                                    f"(input {int(block.src[i - block.start])} -> {int(block.dst[i - block.start])})")
    for fname, files in meta.edge_features(etype.name).items():
        key = f"{etype.name}/{fname}"
        rows = _concat_rows([parts[p].edge_feats.pop(key) for p in parts])
        orig_all = _concat([parts[p].orig_eids[etype.name] for p in parts])
        _compare_feature(comm, FeatureSource(files), block.start, len(block.src), bounds,
                         orig_all, rows, key, max_bytes)
    for part in parts.values():
        part.orig_eids.pop(etype.name, None)


def _take_claims(parts: Dict[int, "_Part"], e: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This rank's claims for edge type e as three columns, removed from the partitions
    (a column's pieces are released as soon as it is concatenated)."""
    pieces = [list(part.edge_claims.pop(e)) for part in parts.values()]
    columns = []
    for j in range(3):
        columns.append(_concat([piece[j] for piece in pieces]))
        for piece in pieces:
            piece[j] = None
    return columns[0], columns[1], columns[2]


# ---------------------------------------------------------------- features

def _compare_feature(comm: Intracomm, source: FeatureSource, start: int, n: int, bounds: np.ndarray,
                     orig: np.ndarray, rows: np.ndarray, key: str, max_bytes: int) -> None:
    """Send output rows to the rank reading their input rows; compare bytes there."""
    owner = np.searchsorted(bounds, orig, side="right") - 1
    (orig_r, rows_r), _ = exchange(comm, owner, [orig, np.ascontiguousarray(rows)], max_bytes)
    with agreed(comm):
        want = to_storable(source.read(start, start + n), key)
        got = np.empty_like(want)
        got[orig_r - start] = rows_r
        if got.shape != want.shape:
            raise OutputError(None, f"feature '{key}' has row shape {got.shape[1:]}, input {want.shape[1:]}")
        same = (got.reshape(n, -1).view(np.uint8) == want.reshape(n, -1).view(np.uint8)).all(axis=1) \
            if n else np.ones(0, bool)
        if not same.all():
            bad = int(np.flatnonzero(~same)[0])
            raise OutputError(None, f"feature '{key}' of item {start + bad} differs from the input")


def _exactly_once(local: np.ndarray, n: int, first: int, message: str) -> None:
    """Every item of this rank's input block [first, first + n) is claimed exactly once."""
    times = np.bincount(local, minlength=n)
    if (times != 1).any():
        bad = int(np.flatnonzero(times != 1)[0])
        raise OutputError(None, message.format(first + bad, int(times[bad])) + " (expected exactly 1)")


def _in_range(ids: np.ndarray, n: int, what: str) -> None:
    bad = first_outside(ids, n)
    if bad is not None:
        raise OutputError(None, f"{what} holds ID {int(ids[bad])}, outside [0, {n})")


def _concat(arrays) -> np.ndarray:
    arrays = list(arrays)
    return np.concatenate(arrays).astype(np.int64, copy=False) if arrays else np.empty(0, np.int64)


def _concat_rows(arrays) -> np.ndarray:
    return np.concatenate([np.asarray(a) for a in arrays]) if len(arrays) > 1 else np.asarray(arrays[0])


def verify_quick(comm: Intracomm, out_dir: Path) -> str:
    """Check every file of an output against its manifest (sizes and checksums), without
    the input; ranks share the files. Collective."""
    from ..partitions.manifest import check_files, read_manifest
    out_dir = Path(out_dir)
    with agreed(comm):
        files = sorted(read_manifest(out_dir)["files"].items())
    rank, size = comm.Get_rank(), comm.Get_size()
    with agreed(comm):
        check_files(out_dir, files[rank::size])
    total = sum(entry["size"] for _, entry in files)
    return f"{len(files)} files, {total} bytes match the manifest"

"""Checking a partition output against its input and assignment, in parallel.

This module owns the collective part: which rank checks what, and the checks that need
the input. Each rank loads only its own partitions; `partfiles` checks the config and each
partition's files on their own (every array DGL reads, the halo set, ID ranges, the
partition book against the assignment's counts). Claims are
then sent to the rank that holds the matching slice of the input: every (type, orig node
ID) goes to the rank holding that node's assignment block, which checks that it is owned
exactly once and by the partition the assignment names, and records its new ID; every
(type, orig edge ID) goes to the rank that reads that edge from the input, which checks
that it is kept exactly once and that its endpoints' new IDs are the input endpoints' new
IDs; feature rows travel the same way and are compared byte for byte. Nothing is ever
gathered on one rank.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import numpy as np

from ..assign.assignment import Assignment
from ..arrays import id_dtype
from ..chunked.blocks import rank_bounds, read_block_pieces
from ..chunked.metadata import GraphMeta, read_json
from ..chunked.readers import FeatureSource
from ..errors import OutputError
from ..mpi.collective import agreed
from ..mpi.exchange import allreduce_max, allreduce_sum, exchange, lookup
from ..partitions.dglformat import to_storable
from ..partitions.layout import PartitionLayout, check_layout
from ..partitions.manifest import check_files, read_manifest
from ..partitions.partbook import range_starts
from ..paths import CONFIG_FILE
from .dglstart import empty_type_warnings
from ..run.progress import Progress
from .partfiles import Part, check_config, load_part

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


def verify(comm: Intracomm, meta: GraphMeta, assignment: Assignment, out_dir: Path, *,
           max_bytes: int, progress: Optional[Progress] = None) -> str:
    """Raise OutputError on every rank if the output disagrees with the input. Collective."""
    progress = progress or Progress.off()
    out_dir = Path(out_dir)
    assigned = _assigned_counts(comm, assignment, meta)
    with agreed(comm):
        if not (out_dir / CONFIG_FILE).exists():
            raise OutputError(out_dir / CONFIG_FILE, "does not exist (the output is missing or incomplete)")
        config = read_json(out_dir / CONFIG_FILE, OutputError)
        node_counts, edge_counts = check_config(out_dir / CONFIG_FILE, config, meta, assignment.num_parts,
                                                assigned)
    if comm.Get_rank() == 0:
        featured = [t for t in meta.node_types if meta.node_features(t)] + \
                   [et.name for et in meta.edge_types if meta.edge_features(et.name)]
        for line in empty_type_warnings({t: node_counts[:, i] for i, t in enumerate(meta.node_types)},
                                        {et.name: edge_counts[:, e] for e, et in enumerate(meta.edge_types)},
                                        featured):
            progress.note(f"WARNING: {line}")
    layout = PartitionLayout(assignment.num_parts, comm.Get_size())
    check_layout(layout.num_parts, layout.nranks)
    mine = layout.parts_of(comm.Get_rank())
    # Progress in rank 0's items (its share is the job's): its partitions' nodes and edges as loaded, then checks.
    load_items = {p: int(node_counts[p].sum() + edge_counts[p].sum()) for p in mine}
    node_items = [len(assignment.blocks[n].parts) * (1 + len(meta.node_features(n))) for n in meta.node_types]
    # Rank 0's edge block is a type's first count // R rows (block_bounds); a guess for CSV (byte ranges).
    edge_items = [et.count // comm.Get_size() * (1 + len(meta.edge_features(et.name))) for et in meta.edge_types]
    new_of_orig: Dict[str, np.ndarray] = {}
    node_starts = range_starts(node_counts)
    with progress.task("checks", sum(load_items.values()) + sum(node_items) + sum(edge_items), "items"):
        with agreed(comm):
            parts = {p: load_part(out_dir, config, p, meta, node_counts, edge_counts,
                                  lambda share, n=n: progress.advance(share * n))
                     for p, n in load_items.items()}
        for t, ntype in enumerate(meta.node_types):
            new_of_orig[ntype] = _check_nodes(comm, meta, assignment, parts, t, node_starts, node_counts,
                                              max_bytes, progress)
        for e in range(len(meta.edge_types)):
            done = _check_edges(comm, meta, assignment, parts, e, new_of_orig, max_bytes, progress)
            progress.advance(edge_items[e] - done)   # exact again where the share was a guess (CSV)
    nfeat = sum(len(f) for f in meta.node_data.values()) + sum(len(f) for f in meta.edge_data.values())
    return (f"{assignment.num_parts} partitions, {int(node_counts.sum())} nodes, "
            f"{int(edge_counts.sum())} edges, {nfeat} features match the input")


def _assigned_counts(comm: Intracomm, assignment: Assignment, meta: GraphMeta) -> np.ndarray:
    """(P, T): how many nodes of each type the assignment puts in each partition. Collective."""
    local = np.zeros((assignment.num_parts, len(meta.node_types)), dtype=np.int64)
    for t, ntype in enumerate(meta.node_types):
        local[:, t] = np.bincount(assignment.blocks[ntype].parts, minlength=assignment.num_parts)
    return allreduce_sum(comm, local)


# ---------------------------------------------------------------- nodes

def _check_nodes(comm: Intracomm, meta: GraphMeta, assignment: Assignment, parts: Dict[int, Part], t: int,
                 node_starts: np.ndarray, node_counts: np.ndarray, max_bytes: int,
                 progress: Progress) -> np.ndarray:
    """Check ownership of type t's nodes; returns the new ID of each node of this rank's block.
    Advances `progress` by one per node of the block, and one per feature row."""
    ntype = meta.node_types[t]
    block = assignment.blocks[ntype]
    orig = _concat([parts[p].orig_nids[ntype] for p in parts])
    part = _concat([np.full(node_counts[p, t], p, dtype=np.int64) for p in parts])
    new = _concat([node_starts[p, t] + np.arange(node_counts[p, t], dtype=np.int64) for p in parts])
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
    progress.advance(len(block.parts))
    for fname, files in meta.node_features(ntype).items():
        key = f"{ntype}/{fname}"
        # Popped: the memory-mapped rows leave RSS once checked (unmapped with the array).
        rows = _concat_rows([parts[p].node_feats.pop(key) for p in parts])
        _compare_feature(comm, FeatureSource(files), block.start, len(block.parts), block.bounds,
                         orig, rows, key, max_bytes)
        progress.advance(len(block.parts))
    return table


# ---------------------------------------------------------------- edges

def _check_edges(comm: Intracomm, meta: GraphMeta, assignment: Assignment, parts: Dict[int, Part], e: int,
                 new_of_orig: Dict[str, np.ndarray], max_bytes: int,
                 progress: Progress) -> float:
    """Check edge type e's edges and features. Advances `progress` by one per edge of this
    rank's input block (in steps: its reading, claims and two lookups) and one per feature
    row; returns that amount.

    The claims are placed by edge into two tables (claimed new source and destination of each
    edge of the block); the block's endpoints are then looked up chunk by chunk and compared
    with them, so the lookups' temporaries stay bounded whatever the block's size."""
    etype = meta.edge_types[e]
    pieces, start = read_block_pieces(comm, meta, etype, _chunk_rows(max_bytes), progress, 0.1)
    n = sum(len(src) for src, _ in pieces)
    bounds = rank_bounds(comm, start, etype.count)
    claimed_src, claimed_dst = _placed_claims(comm, meta, parts, e, start, n, bounds, max_bytes)
    progress.advance(0.3 * n)
    first_bad = None   # (edge ID, input src, input dst) of the first edge that connects the wrong nodes
    at = 0
    for c in range(int(allreduce_max(comm, np.array([len(pieces)]))[0])):
        src, dst = pieces[c] if c < len(pieces) else (np.empty(0, np.int64), np.empty(0, np.int64))
        m = len(src)
        bad = lookup(comm, dst, assignment.blocks[etype.dst].bounds, new_of_orig[etype.dst], max_bytes) \
            != claimed_dst[at:at + m]
        bad |= lookup(comm, src, assignment.blocks[etype.src].bounds, new_of_orig[etype.src], max_bytes) \
            != claimed_src[at:at + m]
        wrong = np.flatnonzero(bad)
        if first_bad is None and len(wrong):
            i = int(wrong[0])
            first_bad = (start + at + i, int(src[i]), int(dst[i]))
        if c < len(pieces):
            pieces[c] = None
        at += m
        progress.advance(0.6 * m)
    del claimed_src, claimed_dst
    with agreed(comm):
        if first_bad is not None:
            raise OutputError(None, f"edge {first_bad[0]} of type '{etype.name}' connects the wrong nodes "
                                    f"(input {first_bad[1]} -> {first_bad[2]})")
    for fname, files in meta.edge_features(etype.name).items():
        key = f"{etype.name}/{fname}"
        rows = _concat_rows([parts[p].edge_feats.pop(key) for p in parts])
        orig_all = _concat([parts[p].orig_eids[etype.name] for p in parts])
        _compare_feature(comm, FeatureSource(files), start, n, bounds, orig_all, rows, key, max_bytes)
        progress.advance(n)
    for part in parts.values():
        part.orig_eids.pop(etype.name, None)
    return float(n * (1 + len(meta.edge_features(etype.name))))


def _chunk_rows(max_bytes: int) -> int:
    """Edges per chunk: a chunk's exchange and lookups hold about 64 bytes per edge, so 256k
    edges keep them near 16 MiB beside the tables of a whole block."""
    return max(1, min(1 << 18, max_bytes // 64))


def _placed_claims(comm: Intracomm, meta: GraphMeta, parts: Dict[int, Part], e: int, start: int, n: int,
                   bounds: np.ndarray, max_bytes: int, count: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(claimed new source, claimed new destination) of each edge of this rank's input block
    [start, start + n) of edge type e, after checking that every edge is claimed exactly once.
    The claims (made from the partitions) travel to the rank reading their edge chunk by
    chunk, so only a chunk's routing temporaries exist at a time. Collective.

    n claims covering all n edges are each claimed once; only when they are not are the
    claims sent again (`count`), counted per edge to name the first offending edge."""
    etype = meta.edge_types[e]
    claims = [part.edge_claims.take(e) for part in parts.values()]
    rows = _chunk_rows(max_bytes)
    chunks = [tuple(col[lo:lo + rows] for col in c) for c in claims for lo in range(0, len(c[0]), rows)]
    del claims
    # Every rank sends the same dtypes, empty chunks included (see partfiles.EdgeClaims).
    node_dtype = id_dtype(int(sum(meta.node_counts)))
    empty = (np.empty(0, id_dtype(etype.count)), np.empty(0, node_dtype), np.empty(0, node_dtype))
    times = np.zeros(n, dtype=np.int64) if count else None
    claimed_src, claimed_dst = np.empty(n, node_dtype), np.full(n, -1, node_dtype)   # -1: no claim yet
    received = 0
    for k in range(int(allreduce_max(comm, np.array([len(chunks)]))[0])):
        orig, src, dst = chunks[k] if k < len(chunks) else empty
        if k < len(chunks):
            chunks[k] = None
        owner = np.searchsorted(bounds, orig, side="right") - 1
        (local, src_r, dst_r), _ = exchange(comm, owner, [orig, src, dst], max_bytes)
        del owner, orig, src, dst
        local -= local.dtype.type(start)
        if times is not None:
            np.add.at(times, local, 1)
        claimed_src[local], claimed_dst[local] = src_r, dst_r
        received += len(local)
    if times is not None:
        with agreed(comm):
            bad = np.flatnonzero(times != 1)
            if len(bad):
                i = int(bad[0])
                raise OutputError(None, f"edge {start + i} of type '{etype.name}' is kept {int(times[i])} "
                                        f"times (expected exactly 1)")
    elif allreduce_max(comm, np.array([int(received != n or (claimed_dst < 0).any())]))[0]:
        del claimed_src, claimed_dst
        return _placed_claims(comm, meta, parts, e, start, n, bounds, max_bytes, count=True)
    return claimed_src, claimed_dst


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
    if len(local) == n and (n == 0 or (int(local.min()) >= 0 and int(local.max()) < n)):
        seen = np.zeros(n, dtype=bool)   # n claims covering all n items: each exactly once
        seen[local] = True
        if seen.all():
            return
    times = np.bincount(local, minlength=n)
    if (times != 1).any():
        bad = int(np.flatnonzero(times != 1)[0])
        raise OutputError(None, message.format(first + bad, int(times[bad])) + " (expected exactly 1)")


def _concat(arrays) -> np.ndarray:
    arrays = list(arrays)
    return np.concatenate(arrays).astype(np.int64, copy=False) if arrays else np.empty(0, np.int64)


def _concat_rows(arrays) -> np.ndarray:
    return np.concatenate([np.asarray(a) for a in arrays]) if len(arrays) > 1 else np.asarray(arrays[0])


def verify_quick(comm: Intracomm, out_dir: Path, progress: Optional[Progress] = None) -> str:
    """Check every file of an output against its manifest (sizes and checksums), without
    the input; ranks share the files. Progress: rank 0's bytes checked. Collective."""
    progress = progress or Progress.off()
    out_dir = Path(out_dir)
    with agreed(comm):
        files = sorted(read_manifest(out_dir)["files"].items())
    mine = files[comm.Get_rank()::comm.Get_size()]
    with agreed(comm), progress.task("files", sum(entry["size"] for _, entry in mine), "bytes"):
        for item in mine:
            check_files(out_dir, [item])
            progress.advance(item[1]["size"])
    total = sum(entry["size"] for _, entry in files)
    return f"{len(files)} files, {total} bytes match the manifest"

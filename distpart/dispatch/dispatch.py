"""Step 2: move nodes, edges and features to the ranks that own their partitions, and write them.

Partition p is built by rank p // (P / R). The flow, every array exchange buffer-based:
1. new node IDs are computed where the assignment block lives (a histogram, an allreduce
   and a prefix sum; no node moves to be numbered);
2. orig node IDs and node features go to the partition owner, batch by batch, tagged with
   their new IDs so the receiver writes each row straight into place;
3. each edge block looks up the new IDs of its endpoints from the ranks holding those
   nodes' assignment (`exchange.lookup`), then goes to the owner of its destination;
4. edge features follow the same route, tagged with (partition, original edge ID);
5. each owner builds its local graph with halo nodes and writes the partition files;
   rank 0 writes metadata.json last, so its presence means the output is complete.

Each partition is moved into place with a completion record as soon as it is written; a
resumed run (`resume=True`) keeps the partitions whose record matches and sends only the
rows of the others (see `resume`).

With `graphbolt` (GraphboltOptions), each owner also writes the partition's GraphBolt graph
(`fused_csc_sampling_graph.pt`, see `graphbolt`), staged, published and recorded with the
other files, and the config gains DGL's `part_graph_graphbolt` keys.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

import numpy as np

from ..assign.assignment import Assignment
from ..mpi.collective import agreed
from ..run.stages import StageLog
from ..partitions.dglformat import TensorDictWriter, to_storable, write_tensor_dict
from ..run.guards import writing
from ..mpi.exchange import DEFAULT_MAX_BYTES, allreduce_max, allreduce_sum, exchange, exscan_sum
from ..chunked.metadata import GraphMeta
from ..partitions.layout import PartitionLayout, check_layout, partition_config
from ..paths import GRAPHBOLT_FILE, PART_FILES, part_dir
from ..run.faults import pause_point
from ..run.progress import Progress
from ..chunked.readers import FeatureSource
from ..arrays import id_dtype, new_node_ids
from ..partitions.partbook import range_starts
from .edges import EdgeRoute, PartEdges, send_edges
from .publish import (gathered_edge_counts, output_options, prepare_output, publish_output,
                      publish_partition, reusable_partitions, staged_path)
from .relabel import by_partition, node_groups
from .write import write_partition
from ..run.resume import RunKey

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm
    from ..partitions.graphbolt import GraphboltOptions


@dataclass
class _State:
    """What a rank keeps between the stages of one dispatch."""

    node_counts: np.ndarray                    # (P, T), global
    node_starts: np.ndarray                    # (P, T) first new ID of each group
    new_ids: Dict[str, np.ndarray]             # aligned with this rank's assignment block (id_dtype)
    edges: Dict[int, List[PartEdges]] = field(default_factory=dict)   # own partition -> per etype
    edge_route: List[EdgeRoute] = field(default_factory=list)          # per etype: this rank's block
    edge_counts: Optional[np.ndarray] = None   # (P, E), global
    todo: Optional[np.ndarray] = None          # (P,) bool: partitions this run builds

    def rows_to_build(self, parts: np.ndarray) -> "slice | np.ndarray":
        """Index of the rows (with these partitions) that go to a partition being built: all
        of them, as a slice that copies nothing, unless a resumed run reuses partitions."""
        if self.todo is None or self.todo.all():
            return slice(None)
        return np.flatnonzero(self.todo[parts])

    def building(self, parts: range) -> List[int]:
        return [p for p in parts if self.todo is None or self.todo[p]]


def dispatch(comm: Intracomm, meta: GraphMeta, assignment: Assignment, out_dir: Path, *, key: RunKey,
             max_bytes: int = DEFAULT_MAX_BYTES, log: Optional[StageLog] = None,
             resume: bool = False, graphbolt: Optional[GraphboltOptions] = None,
             graph_formats: Sequence[str] = ("coo",)) -> dict:
    """Build and write every partition; returns the partition config (all ranks). Collective.

    `key` (input fingerprint, options, assignment fingerprint) goes into the manifest and the
    partitions' completion records; with `resume`, partitions whose record matches it are kept.
    With `graphbolt`, every partition also gets its GraphBolt graph (DGL and torch needed).
    `graph_formats` are the sparse matrices stored in each graph.dgl (dglformat.GRAPH_FORMATS).
    Both are added to `key`'s options here, for every caller (see `output_options`).
    """
    key = replace(key, options={**key.options, **output_options(graphbolt, graph_formats)})
    log = log or StageLog()
    progress = log.progress
    out_dir = Path(out_dir)
    layout = PartitionLayout(assignment.num_parts, comm.Get_size())
    check_layout(layout.num_parts, layout.nranks)
    mine = layout.parts_of(comm.Get_rank())
    # Checks first: a refused --resume must leave the previous output exactly as it was.
    published = reusable_partitions(comm, out_dir, mine, layout.num_parts, key, progress) if resume else {}
    prepare_output(comm, out_dir, mine)

    with log.stage(comm, "relabel"):
        state = _relabel_nodes(comm, meta, assignment)
        state.todo = np.ones(layout.num_parts, dtype=bool)
        for parts in comm.allgather(sorted(published)):
            state.todo[parts] = False
    building = state.building(mine)
    if state.todo.any():
        _send_everything(comm, meta, assignment, state, layout, out_dir, max_bytes, log)
    else:  # every partition was complete: only the config and manifest are missing
        state.edge_counts = gathered_edge_counts(comm, published, layout.num_parts)
    config = partition_config(meta, assignment.num_parts, assignment.algo_name, state.node_counts, state.edge_counts, graphbolt is not None)
    names = PART_FILES + ((GRAPHBOLT_FILE,) if graphbolt is not None else ())
    with log.stage(comm, "write"):
        with agreed(comm), progress.task("partitions", len(building), "partitions"):
            for p in building:
                with writing(part_dir(out_dir, p)):
                    write_partition(out_dir, p, meta, state.node_counts, state.edge_counts, state.edges.pop(p, []),
                                    graphbolt, graph_formats)
                    published[p] = (publish_partition(out_dir, p, key, state.edge_counts[p], names),
                                    state.edge_counts[p].tolist())
                progress.advance(1)
                pause_point("partition-published", comm.Get_rank())
        publish_output(comm, out_dir, [e for p in mine for e in published[p][0]], config, key)
    return config


def _send_everything(comm: Intracomm, meta: GraphMeta, assignment: Assignment, state: _State,
                     layout: PartitionLayout, out_dir: Path, max_bytes: int, log: StageLog) -> None:
    """Stages 2-4: every row that belongs to a partition being built reaches its owner,
    which streams it into the partition's staged files."""
    progress = log.progress
    building = state.building(layout.parts_of(comm.Get_rank()))
    with ExitStack() as files:
        with log.stage(comm, "nodes"):
            with agreed(comm), writing(out_dir):
                nfeat_writers = {p: files.enter_context(TensorDictWriter(
                    staged_path(out_dir, p, "node_feat.dgl"), _count_feats(meta.node_data))) for p in building}
            orig_nids = _send_nodes(comm, meta, assignment, state, layout, nfeat_writers, max_bytes, progress)
        with agreed(comm), writing(out_dir):
            for p in building:
                write_tensor_dict(staged_path(out_dir, p, "orig_nids.dgl"), orig_nids[p])
        del orig_nids
        with log.stage(comm, "edges"):
            _send_edges(comm, meta, assignment, state, layout, max_bytes, progress)
        with log.stage(comm, "edge_feats"):
            with agreed(comm), writing(out_dir):
                efeat_writers = {p: files.enter_context(TensorDictWriter(
                    staged_path(out_dir, p, "edge_feat.dgl"), _count_feats(meta.edge_data))) for p in building}
            _send_edge_features(comm, meta, state, layout, efeat_writers, max_bytes, progress)
        # Closing flushes the last bytes, which can fail on a full disk: agree on it.
        with agreed(comm), writing(out_dir):
            files.close()


def _count_feats(groups) -> int:
    return sum(len(feats) for feats in groups.values())


# ---------------------------------------------------------------- 1. relabel

def _relabel_nodes(comm: Intracomm, meta: GraphMeta, assignment: Assignment) -> _State:
    num_parts, ntypes = assignment.num_parts, meta.node_types
    local = np.zeros((num_parts, len(ntypes)), dtype=np.int64)
    for t, ntype in enumerate(ntypes):
        local[:, t] = np.bincount(assignment.blocks[ntype].parts, minlength=num_parts)
    counts = allreduce_sum(comm, local)
    below = exscan_sum(comm, local)
    starts = range_starts(counts)
    dtype = id_dtype(int(counts.sum()))
    new_ids = {ntype: new_node_ids(assignment.blocks[ntype].parts, starts[:, t] + below[:, t]).astype(dtype)
               for t, ntype in enumerate(ntypes)}
    return _State(counts, starts, new_ids)


# ---------------------------------------------------------------- 2. nodes

def _batch_rows(row_bytes: int, max_bytes: int) -> int:
    # Half the cap for the rows themselves leaves room for the ID columns sent with them.
    return max(1, (max_bytes // 2) // max(row_bytes, 1))


def _batches(comm: Intracomm, n: int, batch: int) -> int:
    """Number of batches every rank must run so that collectives match across ranks."""
    return int(allreduce_max(comm, np.array([-(-n // batch)]))[0])


def _send_nodes(comm: Intracomm, meta, assignment, state: _State, layout: PartitionLayout,
                writers: Dict[int, TensorDictWriter], max_bytes: int,
                progress: Progress) -> Dict[int, Dict[str, np.ndarray]]:
    orig_nids: Dict[int, Dict[str, np.ndarray]] = {p: {} for p in state.building(layout.parts_of(comm.Get_rank()))}
    rows = sum(len(assignment.blocks[n].parts) * (1 + len(meta.node_features(n))) for n in meta.node_types)
    with progress.task("nodes", rows, "node rows"):
        for t, ntype in enumerate(meta.node_types):
            _send_node_type(comm, meta, assignment, state, layout, writers, max_bytes, progress,
                            t, ntype, orig_nids)
    return orig_nids


def _send_node_type(comm: Intracomm, meta, assignment, state: _State, layout: PartitionLayout,
                    writers: Dict[int, TensorDictWriter], max_bytes: int, progress: Progress,
                    t: int, ntype: str, orig_nids: Dict[int, Dict[str, np.ndarray]]) -> None:
    mine = layout.parts_of(comm.Get_rank())
    block = assignment.blocks[ntype]
    dest = layout.rank_of(block.parts)
    new = state.new_ids[ntype]
    k = state.rows_to_build(block.parts)
    (new_r, orig_r), _ = exchange(comm, dest[k], [new[k], block.orig_ids[k]], max_bytes)
    groups = node_groups(new_r, state.node_starts[list(mine), t])
    for i, p in enumerate(mine):
        if p not in orig_nids:
            continue
        out = np.empty(state.node_counts[p, t], dtype=np.int64)
        sel = groups[i]
        out[new_r[sel] - state.node_starts[p, t]] = orig_r[sel]
        orig_nids[p][ntype] = out
    progress.advance(len(new))
    for fname, files in meta.node_features(ntype).items():
        with agreed(comm):
            source = FeatureSource.expecting(files, meta.num_nodes(ntype), f"node type '{ntype}'")
        outs = {p: np.empty((state.node_counts[p, t], *source.tail_shape), dtype=source.dtype)
                for p in orig_nids}
        batch = _batch_rows(source.row_bytes, max_bytes)
        for b in range(_batches(comm, len(new), batch)):
            lo, hi = min(b * batch, len(new)), min((b + 1) * batch, len(new))
            # Only this rank reads these rows, and only here are a file's data pages decoded
            # (the checks before read headers): a corrupt page must stop every rank, not leave
            # the others in the exchange below. One small allgather per batch of up to
            # max_bytes / 2.
            with agreed(comm):
                rows = source.read(block.start + lo, block.start + hi)
            k = state.rows_to_build(block.parts[lo:hi])
            (new_r, rows_r), _ = exchange(comm, dest[lo:hi][k], [new[lo:hi][k], rows[k]], max_bytes)
            groups = node_groups(new_r, state.node_starts[list(mine), t])
            for i, p in enumerate(mine):
                if p not in outs:
                    continue
                sel = groups[i]
                outs[p][new_r[sel] - state.node_starts[p, t]] = rows_r[sel]
            progress.advance(hi - lo)
        _add_feature(comm, writers, outs, f"{ntype}/{fname}", files.where)


def _add_feature(comm: Intracomm, writers: Dict[int, TensorDictWriter], outs: Dict[int, np.ndarray],
                 key: str, where: str) -> None:
    with agreed(comm):
        for p, arr in outs.items():
            with writing(writers[p].path):
                writers[p].add(key, to_storable(arr, f"{where} ({key})"))


# ---------------------------------------------------------------- 3. edges

def _send_edges(comm: Intracomm, meta: GraphMeta, assignment: Assignment, state: _State,
                layout: PartitionLayout, max_bytes: int, progress: Progress) -> None:
    part_starts = np.append(state.node_starts[:, 0], state.node_counts.sum())
    building = state.building(layout.parts_of(comm.Get_rank()))
    state.edges, state.edge_route, local_counts = send_edges(
        comm, meta, assignment, state.new_ids, part_starts, layout, building, state.rows_to_build, max_bytes,
        progress)
    state.edge_counts = allreduce_sum(comm, local_counts)


def _send_edge_features(comm: Intracomm, meta: GraphMeta, state: _State, layout: PartitionLayout,
                        writers: Dict[int, TensorDictWriter], max_bytes: int, progress: Progress) -> None:
    rows = sum(state.edge_route[e].count * len(meta.edge_features(et.name))
               for e, et in enumerate(meta.edge_types))
    with progress.task("edge features", rows, "rows"):
        for e, etype in enumerate(meta.edge_types):
            _send_edge_type_features(comm, meta, state, layout, writers, max_bytes, progress, e, etype)


def _send_edge_type_features(comm: Intracomm, meta: GraphMeta, state: _State, layout: PartitionLayout,
                             writers: Dict[int, TensorDictWriter], max_bytes: int, progress: Progress,
                             e: int, etype) -> None:
    mine = layout.parts_of(comm.Get_rank())
    start, part = state.edge_route[e].start, state.edge_route[e].part
    for fname, files in meta.edge_features(etype.name).items():
        with agreed(comm):
            source = FeatureSource.expecting(files, etype.count, f"edge type '{etype.name}'")
        outs = {p: np.empty((len(state.edges[p][e].orig), *source.tail_shape), dtype=source.dtype)
                for p in state.edges}
        batch = _batch_rows(source.row_bytes, max_bytes)
        n = len(part)
        for b in range(_batches(comm, n, batch)):
            lo, hi = min(b * batch, n), min((b + 1) * batch, n)
            with agreed(comm):   # a bad row stops every rank, as for node features
                rows = source.read(start + lo, start + hi)
            # The dtype of the held original IDs: searchsorted then copies neither side.
            ids = np.arange(start + lo, start + hi, dtype=id_dtype(etype.count))
            k = state.rows_to_build(part[lo:hi])
            (ids_r, part_r, rows_r), _ = exchange(comm, layout.rank_of(part[lo:hi][k]),
                                                  [ids[k], part[lo:hi][k], rows[k]], max_bytes)
            groups = by_partition(part_r - mine.start, len(mine))
            for i, p in enumerate(mine):
                if p not in outs:
                    continue
                sel = groups[i]
                outs[p][np.searchsorted(state.edges[p][e].orig, ids_r[sel])] = rows_r[sel]
            progress.advance(hi - lo)
        _add_feature(comm, writers, outs, f"{etype.name}/{fname}", files.where)

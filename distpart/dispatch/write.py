"""Step 2's last stage for one partition: its graph.dgl (and GraphBolt graph) and
orig_eids.dgl, written from the edges its owner holds.

The edges are converted to local IDs in place and every per-edge array of the files is
written piece by piece (`Pieces`): an edge costs what is held for it (`edges.PartEdges`)
plus a bounded buffer, never a second copy of the partition. CSR/CSC formats and GraphBolt
need whole arrays and build them.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence

import numpy as np

from ..chunked.metadata import GraphMeta
from ..partitions.dglformat import Pieces, write_graph, write_tensor_dict
from ..partitions.partbook import range_starts, type_of
from ..paths import GRAPHBOLT_FILE
from .edges import PartEdges
from .publish import staged_path
from .relabel import to_local

if TYPE_CHECKING:
    from ..partitions.graphbolt import GraphboltOptions

# Rows of a generated per-edge column (edge _ID, _TYPE, inner_edge) made at a time.
_ROWS = 1 << 20


def write_partition(out_dir: Path, p: int, meta: GraphMeta, node_counts: np.ndarray, edge_counts: np.ndarray,
                    edges: List[PartEdges], graphbolt: Optional[GraphboltOptions] = None,
                    graph_formats: Sequence[str] = ("coo",)) -> None:
    """Write partition p's staged graph files from its edges (one entry per edge type, in
    original-ID order), whose endpoints become local IDs in place."""
    first = int(range_starts(node_counts)[p, 0])
    stop = first + int(node_counts[p].sum())
    halo = to_local(first, stop, [x.src for x in edges], [x.dst for x in edges])
    node_ids = np.concatenate([np.arange(first, stop, dtype=np.int64), halo.astype(np.int64)])
    inner_types = np.repeat(np.arange(len(meta.node_types)), node_counts[p])
    ntypes = np.concatenate([inner_types, type_of(halo, node_counts)]).astype(np.int32)
    inner = np.zeros(len(node_ids), dtype=np.uint8)
    inner[: stop - first] = 1
    ndata = {"_ID": node_ids, "_TYPE": ntypes, "inner_node": inner}
    lengths = [len(x.src) for x in edges]
    m = sum(lengths)
    edge_first = int(range_starts(edge_counts)[p, 0]) if edge_counts.size else 0
    edata = {"_ID": Pieces(np.dtype("<i8"), (m,), lambda: _ranges(edge_first, m)),
             "_TYPE": Pieces(np.dtype("<i4"), (m,), lambda: _runs(lengths, np.int32)),
             "inner_edge": Pieces(np.dtype("u1"), (m,), lambda: _filled(m, 1, np.uint8))}
    src = Pieces.of([x.src for x in edges], "<i8")
    dst = Pieces.of([x.dst for x in edges], "<i8")
    write_graph(staged_path(out_dir, p, "graph.dgl"), len(node_ids), src, dst, ndata=ndata, edata=edata,
                formats=graph_formats)
    if graphbolt is not None:
        from ..partitions.graphbolt import write_partition_graph
        whole = {k: v.materialize() for k, v in edata.items()}
        write_partition_graph(staged_path(out_dir, p, GRAPHBOLT_FILE), len(node_ids), src.materialize(),
                              dst.materialize(), ndata, whole, list(meta.node_types),
                              [e.name for e in meta.edge_types], int(node_counts.sum()), graphbolt)
        del whole
    write_tensor_dict(staged_path(out_dir, p, "orig_eids.dgl"),
                      {et.name: Pieces.of([edges[e].orig], "<i8") for e, et in enumerate(meta.edge_types)})


def _ranges(first: int, n: int) -> Iterator[np.ndarray]:
    for lo in range(0, n, _ROWS):
        yield np.arange(first + lo, first + min(n, lo + _ROWS), dtype=np.int64)


def _runs(lengths: List[int], dtype) -> Iterator[np.ndarray]:
    """lengths[0] zeros, lengths[1] ones, ...: each edge's type index."""
    for value, n in enumerate(lengths):
        yield from _filled(n, value, dtype)


def _filled(n: int, value: int, dtype) -> Iterator[np.ndarray]:
    for lo in range(0, n, _ROWS):
        yield np.full(min(_ROWS, n - lo), value, dtype=dtype)

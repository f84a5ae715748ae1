"""What a partitioning of this input will need, from its metadata alone: the size of the
output and the peak memory of one dispatch rank (nothing is read but file headers).

`run.guards` compares these with the free disk space and `--max-memory-gb` before any work.
"""
from __future__ import annotations

from typing import Sequence

from .metadata import GraphMeta
from .readers import FeatureSource

# Bytes per item in a partition's files (graph.dgl with _ID/_TYPE/inner flags, orig IDs).
_EDGE_BYTES = 8 + 4 + 1 + 8              # _ID, _TYPE, inner_edge, orig_eids
# Each sparse format stored: COO src + dst; CSR/CSC indices + edge IDs, and an indptr entry
# per (inner or halo) node.
_FORMAT_EDGE_BYTES, _INDPTR_BYTES = 16, 8
_NODE_BYTES = 8 + 4 + 1 + 8              # _ID, _TYPE, inner_node, orig_nids
_HALO_BYTES = 8 + 4 + 1
# Dispatch's peak per rank, measured (1M nodes / 10M edges, 2 ranks: 578 MB): about 115 B
# per edge and 40 B per node held by the rank, plus twice its share of feature rows
# (received rows and the output buffer), plus the interpreter and libraries.
_RSS_PER_EDGE, _RSS_PER_NODE, _RSS_BASE = 120, 40, 150 << 20


def feature_bytes(meta: GraphMeta) -> int:
    """Bytes of every node and edge feature (from file headers; nothing is read)."""
    total = 0
    for group in (meta.node_data, meta.edge_data):
        for feats in group.values():
            for files in feats.values():
                source = FeatureSource(files)
                total += source.rows * source.row_bytes
    return total


def estimate_output_bytes(meta: GraphMeta, num_parts: int, graph_formats: Sequence[str] = ("coo",)) -> int:
    """Expected size of all partition files; halo nodes are estimated from the edge count."""
    nodes, edges = sum(meta.node_counts), sum(meta.edge_counts)
    halo = min(int(edges * (1 - 1 / num_parts)), nodes * (num_parts - 1))
    sparse = sum(edges * _FORMAT_EDGE_BYTES + (0 if f == "coo" else (nodes + halo) * _INDPTR_BYTES)
                 for f in graph_formats)
    return sparse + edges * _EDGE_BYTES + nodes * _NODE_BYTES + halo * _HALO_BYTES + feature_bytes(meta)


def estimate_peak_rss(meta: GraphMeta, nranks: int) -> int:
    """Expected peak resident memory of one rank during dispatch."""
    nodes, edges = sum(meta.node_counts), sum(meta.edge_counts)
    per_rank = (edges * _RSS_PER_EDGE + nodes * _RSS_PER_NODE + 2 * feature_bytes(meta)) / nranks
    return int(per_rank) + _RSS_BASE

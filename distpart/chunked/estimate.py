"""What a partitioning of this input will need, from its metadata alone: the size of the
output and the peak memory of one rank in each stage (nothing is read but file headers).

`run.guards` compares these with the free disk space and `--max-memory-gb` before any work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from .metadata import GraphMeta
from .readers import FeatureSource

# Bytes per item in a partition's files (graph.dgl with _ID/_TYPE/inner flags, orig IDs).
_EDGE_BYTES = 8 + 4 + 1 + 8              # _ID, _TYPE, inner_edge, orig_eids
# Each sparse format stored: COO src + dst; CSR/CSC indices + edge IDs, and an indptr entry
# per (inner or halo) node.
_FORMAT_EDGE_BYTES, _INDPTR_BYTES = 16, 8
_NODE_BYTES = 8 + 4 + 1 + 8              # _ID, _TYPE, inner_node, orig_nids
_HALO_BYTES = 8 + 4 + 1
# Peak resident bytes of one rank per stage: BASE_BYTES (interpreter, numpy, mpi4py) plus
# (per_edge * edges + per_node * nodes + features * feature bytes) / ranks. Step 1 is keyed
# "assign/<method>"; kaminpar holds the whole graph in one process (not divided by ranks).
# Refit with `python benchmarks/bench_scale.py --fit benchmarks/results/scale_*.json`.
BASE_BYTES = 110 << 20   # every run's validate stage: 103-104 MiB (results/scale_*.json)


@dataclass(frozen=True)
class StageModel:
    """Bytes per input edge, per node and per feature byte that one stage holds, summed over ranks."""

    per_edge: float
    per_node: float = 0.0
    features: float = 0.0
    whole_graph: bool = False   # held by one process, whatever the number of ranks
    # Step 1 balancing more than one column (node types, edges, masks) holds more per edge.
    per_edge_multi: Optional[float] = None

    def edge_bytes(self, columns: int = 1) -> float:
        """Bytes per input edge when Step 1 balances `columns` constraint columns."""
        return self.per_edge_multi if columns > 1 and self.per_edge_multi is not None else self.per_edge


STAGE_MODELS: Dict[str, StageModel] = {
    # Twice the feature bytes: the received feature rows and the output buffer. Own peaks of the
    # largest rank, 2 ranks (it holds the larger partition): results/scale_20m_apart.json and
    # scale_200m.json (fitted with bench_scale.py --fit).
    "dispatch": StageModel(41, 40, 2.0),
    "verify": StageModel(28, 40, 2.0),
    # One column (node counts): results/scale_{20m_apart,200m,weak_5m}.json. Several (the default
    # set, node types and edges; or with a mask): between RMAT 2M/20M on 2 ranks (the peaks in
    # the commit messages of issue 31's memory work) and results/scale_200m_default.json, which
    # hold less and more per node: within 25% of both.
    "assign/multilevel": StageModel(34, 40, per_edge_multi=55),
    # benchmarks/results/assign_rmat_2m.json (RMAT 2M/20M, 2 ranks: 2823/3064 MB).
    "assign/parmetis": StageModel(306, 40),
    # Not measured by bench_scale: KaMinPar's own check (assign/kaminpar.py) sizes its process.
    "assign/kaminpar": StageModel(100, 40, whole_graph=True),
    "assign/random": StageModel(0, 16),
}
# The stages dispatch logs (each under its own name) share dispatch's model.
DISPATCH_STAGES = ("read_assign", "relabel", "nodes", "node_feats", "edges", "edge_feats", "write")


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


def stage_peak(model: StageModel, nodes: int, edges: int, feats: int, nranks: int, columns: int = 1) -> int:
    """One rank's peak under `model` for a graph of these sizes (feats: feature bytes;
    columns: the constraint columns Step 1 balances)."""
    total = model.edge_bytes(columns) * edges + model.per_node * nodes + model.features * feats
    return int(total / (1 if model.whole_graph else max(1, nranks))) + BASE_BYTES


def estimate_stage_peaks(meta: GraphMeta, nranks: int, method: Optional[str] = "multilevel",
                         verify: bool = True, columns: int = 1) -> Dict[str, int]:
    """Expected peak resident memory of one rank in each stage a run will enter, by stage:
    "assign" (Step 1 with `method`, balancing `columns` constraint columns; None: the
    assignment is read), "dispatch", "verify"."""
    nodes, edges, feats = sum(meta.node_counts), sum(meta.edge_counts), feature_bytes(meta)
    out = {}
    if method is not None:
        model = STAGE_MODELS.get(f"assign/{method}", STAGE_MODELS["assign/multilevel"])
        out["assign"] = stage_peak(model, nodes, edges, feats, nranks, columns)
    out["dispatch"] = stage_peak(STAGE_MODELS["dispatch"], nodes, edges, feats, nranks)
    if verify:
        out["verify"] = stage_peak(STAGE_MODELS["verify"], nodes, edges, feats, nranks)
    return out


def estimate_peak_rss(meta: GraphMeta, nranks: int) -> int:
    """Expected peak resident memory of one rank during dispatch."""
    nodes, edges, feats = sum(meta.node_counts), sum(meta.edge_counts), feature_bytes(meta)
    return stage_peak(STAGE_MODELS["dispatch"], nodes, edges, feats, nranks)

"""Which rank builds which partition, and the partition config JSON DGL reads.

Shared by dispatch (which writes), verify and report (which read): none of this needs
MPI, so importing it does not start MPI.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..paths import GRAPHBOLT_FILE, part_dir
from .partbook import ranges_from_counts

if TYPE_CHECKING:
    from ..chunked.metadata import GraphMeta



@dataclass(frozen=True)
class PartitionLayout:
    """Which rank builds which partitions: contiguous runs of P / R partitions per rank."""

    num_parts: int
    nranks: int

    @property
    def per_rank(self) -> int:
        return self.num_parts // self.nranks

    def rank_of(self, parts: np.ndarray) -> np.ndarray:
        return parts // self.per_rank

    def parts_of(self, rank: int) -> range:
        return range(rank * self.per_rank, (rank + 1) * self.per_rank)


def check_layout(num_parts: int, nranks: int) -> None:
    if num_parts < 1 or num_parts % nranks:
        raise InputError(None, f"the number of partitions ({num_parts}) must be a positive "
                               f"multiple of the number of MPI ranks ({nranks})")


def partition_config(meta: "GraphMeta", num_parts: int, algo_name: str, node_counts: np.ndarray,
                     edge_counts: np.ndarray, graphbolt: bool = False) -> dict:
    """The partition config JSON DGL's loader reads (paths relative to its folder).

    With `graphbolt`, the keys DGL 2.1.0's `dgl_partition_to_graphbolt` adds: each
    partition's `part_graph_graphbolt` and the ID dtypes of the maps (always int64 there)."""
    etype_names = [e.name for e in meta.edge_types]
    config = {
        "graph_name": meta.graph_name,
        "part_method": "metis" if algo_name in ("metis", "parmetis") else algo_name,
        "num_parts": num_parts,
        "halo_hops": 1,
        "node_map": ranges_from_counts(node_counts, list(meta.node_types)),
        "edge_map": ranges_from_counts(edge_counts, etype_names),
        "ntypes": {n: i for i, n in enumerate(meta.node_types)},
        "etypes": {n: i for i, n in enumerate(etype_names)},
        "num_nodes": int(node_counts.sum()),
        "num_edges": int(edge_counts.sum()),
    }
    for p in range(num_parts):
        folder = part_dir("", p).as_posix()
        config[f"part-{p}"] = {"node_feats": f"{folder}/node_feat.dgl",
                               "edge_feats": f"{folder}/edge_feat.dgl",
                               "part_graph": f"{folder}/graph.dgl"}
        if graphbolt:
            config[f"part-{p}"]["part_graph_graphbolt"] = f"{folder}/{GRAPHBOLT_FILE}"
    if graphbolt:
        config["node_map_dtype"] = "int64"
        config["edge_map_dtype"] = "int64"
    return config

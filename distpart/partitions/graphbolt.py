"""GraphBolt output: each partition's `fused_csc_sampling_graph.pt`, as DGL 2.1.0 writes it.

DGL 2.1.0 samples from GraphBolt graphs when training runs with `use_graphbolt=True`
(`dgl.distributed.initialize(..., use_graphbolt=True)` on servers and trainers,
`load_partition(..., use_graphbolt=True)`). Its own pipeline makes them after partitioning
with `dgl_partition_to_graphbolt(part_config, store_eids, store_inner_node,
store_inner_edge)`, which loads every partition's graph.dgl in one process, writes
`part<p>/fused_csc_sampling_graph.pt` beside it (graph.dgl stays: DGL 2.1.0 loads either
one, as asked), and adds to the config `"part_graph_graphbolt": "part<p>/fused_csc_sampling_graph.pt"`
per partition and `"node_map_dtype"`/`"edge_map_dtype": "int64"`.

distpart writes the same file on the rank that builds the partition, from the arrays it has
just written to graph.dgl, so no process ever holds more than its own partitions. The
conversion is the body of DGL 2.1.0's per-partition loop (dgl/distributed/partition.py),
which is not callable for one partition, restated on numpy arrays:

- CSC of the local graph: `csc_indptr` over local destination IDs, `indices` the local
  sources, edges of one destination in local edge-ID order (DGL's COO-to-CSC is a stable
  sort by destination; checked against `DGLGraph.adj_tensors("csc")`);
- node attributes `_ID` (always) and `inner_node` (`store_inner_node`); edge attributes
  `_ID` (`store_eids`) and `inner_edge` (`store_inner_edge`), rows in CSC order;
- a heterogeneous graph (more than one node or edge type) also gets `type_per_edge` and
  the `node_type_to_id`/`edge_type_to_id` maps; a homogeneous one gets neither;
- integer dtypes narrowed as DGL's `_cast_to_minimum_dtype` narrows them (indptr and
  indices to int32 while counts fit, edge types to int8, IDs stay int64).

The bytes equal those DGL's converter writes for the same partition (mpi_tests/test_graphbolt.py
compares them). Not mirrored: DGL's debug mode (`DGL_DIST_DEBUG` set), in which its
converter stores every attribute of graph.dgl.

The file is a pickled torch object, so writing it needs torch and DGL's graphbolt library:
`pip install 'distpart[graphbolt]'`. They are imported only when `--graphbolt` is given.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from ..errors import InputError, OutputError

INSTALL_HINT = ("pip install 'distpart[graphbolt]' (DGL 2.1.0 with torch 2.2.1; "
                "scripts/setup-dgl.sh builds such an environment)")

_INT32_MAX = np.iinfo(np.int32).max
# DGL's `_cast_to_minimum_dtype` candidates: the first whose maximum exceeds the bound wins.
_INDEX_DTYPES = (np.int32, np.int64)
_TYPE_DTYPES = (np.int8, np.int16, np.int32, np.int64)


@dataclass(frozen=True)
class GraphboltOptions:
    """`dgl_partition_to_graphbolt`'s keyword arguments, under the same names."""

    store_eids: bool = False
    store_inner_node: bool = False
    store_inner_edge: bool = False

    def as_json(self) -> Dict[str, bool]:
        return {"store_eids": self.store_eids, "store_inner_node": self.store_inner_node,
                "store_inner_edge": self.store_inner_edge}


def load_graphbolt(asked_by: str = "--graphbolt") -> Any:
    """Import torch and DGL's graphbolt, or raise InputError saying how to install them.

    Called before any work when GraphBolt output is asked for (`asked_by`: the option, for
    the message), so a missing DGL stops the run at once instead of after the partitions
    are computed."""
    try:
        import torch  # noqa: F401  (graphbolt needs it loaded first)
        from dgl import graphbolt
    except Exception as e:  # ImportError, or graphbolt's library missing for this torch
        raise InputError(None, f"{asked_by} needs DGL and torch in the Python that runs distpart, "
                               f"which cannot import them ({type(e).__name__}: {e}); install them "
                               f"with {INSTALL_HINT}") from None
    return graphbolt


def minimum_dtype(bound: int, candidates: Sequence[type]) -> np.dtype:
    """The first candidate whose maximum is above `bound`, as DGL's `_cast_to_minimum_dtype`."""
    for dtype in candidates:
        if bound < np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(candidates[-1])


def csc(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> "tuple[np.ndarray, np.ndarray, np.ndarray]":
    """(indptr, indices, edge order) of the graph's in-edges: edge `order[k]` is the k-th in
    CSC order. Stable, as DGL's conversion, so a destination's edges keep their ID order."""
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, np.asarray(src)[order], order


def write_partition_graph(path: Path, num_nodes: int, src: np.ndarray, dst: np.ndarray,
                          ndata: Mapping[str, np.ndarray], edata: Mapping[str, np.ndarray],
                          ntypes: Sequence[str], etypes: Sequence[str], total_nodes: int,
                          options: GraphboltOptions) -> None:
    """Write one partition's FusedCSCSamplingGraph to `path` with torch.save.

    `src`/`dst` are local node IDs per local edge, `ndata` holds `_ID` and `inner_node`,
    `edata` `_ID`, `_TYPE` and `inner_edge` (as in graph.dgl); `ntypes`/`etypes` are the
    config's type names in ID order and `total_nodes` its `num_nodes`.

    torch names the folder inside the file's zip archive after the file name up to its last
    dot, so the path given here decides the bytes: write to `<stem>.<anything>` and rename
    to get exactly what DGL writes (dispatch stages it as `fused_csc_sampling_graph.partial`).
    """
    gb = load_graphbolt()
    import torch

    indptr, indices, order = csc(num_nodes, src, dst)
    num_edges = len(order)

    def tensor(arr: np.ndarray, dtype: Optional[np.dtype] = None) -> "torch.Tensor":
        arr = np.ascontiguousarray(arr, dtype=dtype or arr.dtype)
        return torch.from_numpy(arr if arr.flags.writeable else arr.copy())

    # DGL's bound for `_ID` is the whole graph's node count, with int64 the only candidate.
    node_attributes = {"_ID": tensor(ndata["_ID"], minimum_dtype(total_nodes, (np.int64,)))}
    if options.store_inner_node:
        node_attributes["inner_node"] = tensor(ndata["inner_node"])
    edge_attributes = {}
    if options.store_eids:
        edge_attributes["_ID"] = tensor(edata["_ID"][order], np.int64)
    if options.store_inner_edge:
        edge_attributes["inner_edge"] = tensor(edata["inner_edge"][order])

    homogeneous = len(ntypes) == 1 and len(etypes) == 1
    type_per_edge = None
    if not homogeneous:
        type_per_edge = tensor(edata["_TYPE"][order], minimum_dtype(len(etypes), _TYPE_DTYPES))
    graph = gb.fused_csc_sampling_graph(
        tensor(indptr, minimum_dtype(num_edges, _INDEX_DTYPES)),
        tensor(indices, minimum_dtype(num_nodes, _INDEX_DTYPES)),
        node_type_offset=None,  # halo nodes break type order; DGL passes None too
        type_per_edge=type_per_edge,
        node_attributes=node_attributes,
        edge_attributes=edge_attributes,
        node_type_to_id=None if homogeneous else {n: i for i, n in enumerate(ntypes)},
        edge_type_to_id=None if homogeneous else {e: i for i, e in enumerate(etypes)},
    )
    try:
        torch.save(graph, os.fspath(path))
    except RuntimeError as e:  # torch's zip writer reports a failed write as RuntimeError
        if shutil.disk_usage(Path(path).parent).free < (1 << 20):
            raise OutputError(path, "no space left on the output's file system while writing; "
                                    "free space and run again") from None
        raise OutputError(path, f"cannot write: {e}") from None

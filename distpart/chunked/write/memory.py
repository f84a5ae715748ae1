"""Input (a): a graph in memory - a plain description or a DGLGraph - checked
(`describe_graph`) and written in bounded batches (`write_graph`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

import numpy as np

from ..names import name_problem
from .files import DEFAULT_BATCH_BYTES, EdgeKey, HOMOGENEOUS_NTYPE, PathLike
from .writer import (ChunkedGraphWriter, bytes_per_row, check_edge_type, check_feature_dtype, check_file_names,
                     rows_per_batch)
from .sources import check_range

_RESERVED_NDATA = ("_ID", "inner_node")   # what DGL's partition_graph does not store as features
_RESERVED_EDATA = ("_ID", "inner_edge")


def graph_description(g: Any) -> Dict[str, Any]:
    """A DGLGraph as the plain description `distpart.chunked.write.describe_graph` accepts.

    Node types and canonical edge types in the graph's type-ID order; edges in edge-ID order;
    every ndata/edata tensor as a numpy array except those DGL's `partition_graph` leaves
    out too (`_ID`, `inner_node`, `inner_edge`). Needs only numpy (and the graph's tensors).
    """
    def arr(t: Any) -> np.ndarray:
        return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)

    etypes = [tuple(c) for c in g.canonical_etypes]
    return {
        "num_nodes": {nt: int(g.num_nodes(nt)) for nt in g.ntypes},
        "edges": {":".join(c): tuple(arr(x) for x in g.edges(etype=c, order="eid")) for c in etypes},
        "node_data": {nt: {k: arr(v) for k, v in g.nodes[nt].data.items() if k not in _RESERVED_NDATA}
                      for nt in g.ntypes},
        "edge_data": {":".join(c): {k: arr(v) for k, v in g.edges[c].data.items() if k not in _RESERVED_EDATA}
                      for c in etypes},
    }


@dataclass
class GraphDescription:
    """A whole graph in memory, checked: types in type-ID order, int64-able endpoint arrays,
    feature arrays with one row per node (edge). Edge types are canonical "src:rel:dst"."""

    num_nodes: Dict[str, int]
    edges: Dict[str, Tuple[np.ndarray, np.ndarray]]
    node_data: Dict[str, Dict[str, np.ndarray]] = field(default_factory=dict)
    edge_data: Dict[str, Dict[str, np.ndarray]] = field(default_factory=dict)

    @property
    def homogeneous(self) -> bool:
        """One node type and one edge type, as DGL's `DGLGraph.is_homogeneous`."""
        return len(self.num_nodes) == 1 and len(self.edges) == 1


def _is_dgl_graph(graph: Any) -> bool:
    return hasattr(graph, "canonical_etypes") and hasattr(graph, "ntypes") and hasattr(graph, "num_nodes")


def describe_graph(graph: Any) -> GraphDescription:
    """Check a graph given in memory and return it as a GraphDescription.

    `graph` is a DGLGraph (see `graph_description`), a GraphDescription, or a dict::

        {"num_nodes": {"author": 100, "paper": 200},          # or an int: one type "_N"
         "edges": {("author", "writes", "paper"): (src, dst),  # or "author:writes:paper";
                   ...},                                       # or one (src, dst): "_N:_E:_N"
         "node_data": {"paper": {"feat": array}},              # optional, rows = nodes
         "edge_data": {("author", "writes", "paper"): {"year": array}}}   # optional

    With one node type, an edge key may be just the relation name and `node_data` may map
    feature names to arrays directly. The flat form `read_whole_graph` returns
    ("node_feats": {(ntype, name): array}, "edge_feats": {(etype, name): array}) is accepted
    too. Arrays may be numpy arrays or CPU torch tensors. Type order is the dicts' order.
    """
    if isinstance(graph, GraphDescription):
        return graph
    if _is_dgl_graph(graph):
        graph = graph_description(graph)
    if not isinstance(graph, Mapping):
        raise TypeError(f"a graph must be a DGLGraph or a dict with 'num_nodes' and 'edges', "
                        f"got {type(graph).__name__}")
    unknown = set(graph) - {"num_nodes", "edges", "node_data", "edge_data", "node_feats", "edge_feats"}
    if unknown:
        raise ValueError(f"unknown keys in the graph description: {sorted(unknown)}")
    if "num_nodes" not in graph or "edges" not in graph:
        raise ValueError("a graph description needs 'num_nodes' and 'edges'")
    raw_nodes = graph["num_nodes"]
    if isinstance(raw_nodes, (int, np.integer)):
        raw_nodes = {HOMOGENEOUS_NTYPE: int(raw_nodes)}
    num_nodes: Dict[str, int] = {}
    for ntype, n in dict(raw_nodes).items():
        problem = name_problem(ntype, "node type") if isinstance(ntype, str) else "node type names must be strings"
        if problem:
            raise ValueError(problem)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"node type {ntype!r}: the number of nodes must be a non-negative integer, got {n!r}")
        num_nodes[ntype] = int(n)
    one_type = next(iter(num_nodes)) if len(num_nodes) == 1 else None

    raw_edges = graph["edges"]
    if not isinstance(raw_edges, Mapping):
        if one_type is None:
            raise ValueError("'edges' must map edge types to (src, dst) when there are several node types")
        raw_edges = {f"{one_type}:_E:{one_type}": raw_edges}
    edges: Dict[str, Tuple[np.ndarray, np.ndarray]] = {}
    for key, pair in raw_edges.items():
        etype = _edge_key(key, num_nodes, one_type)
        if etype in edges:
            raise ValueError(f"edge type {etype!r} given twice")
        edges[etype] = _endpoints(etype, pair, num_nodes)

    node_data: Dict[str, Dict[str, np.ndarray]] = {}
    edge_data: Dict[str, Dict[str, np.ndarray]] = {}
    for owner, name, values in _features(graph.get("node_data"), graph.get("node_feats"), one_type):
        if owner not in num_nodes:
            raise ValueError(f"node feature {owner}/{name}: unknown node type {owner!r}")
        node_data.setdefault(owner, {})[name] = _feature(owner, name, values, num_nodes[owner])
    for owner, name, values in _features(graph.get("edge_data"), graph.get("edge_feats"), None):
        etype = _edge_key(owner, num_nodes, one_type)
        if etype not in edges:
            raise ValueError(f"edge feature {etype}/{name}: unknown edge type {owner!r}")
        edge_data.setdefault(etype, {})[name] = _feature(etype, name, values, len(edges[etype][0]))
    return GraphDescription(num_nodes, edges, node_data, edge_data)


def _edge_key(key: EdgeKey, num_nodes: Mapping[str, int], one_type: Optional[str]) -> str:
    if isinstance(key, tuple):
        if len(key) != 3 or not all(isinstance(k, str) for k in key):
            raise ValueError(f"edge type {key!r} is not a (src, rel, dst) tuple of names")
        name = ":".join(key)
    elif isinstance(key, str):
        name = key if key.count(":") == 2 else (f"{one_type}:{key}:{one_type}" if one_type and ":" not in key else key)
    else:
        raise ValueError(f"edge type {key!r} must be 'src:rel:dst' or a (src, rel, dst) tuple")
    check_edge_type(name, key, num_nodes, "has no entry in 'num_nodes'")
    return name


def _as_array(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor: numpy shares its memory on the CPU
        values = values.detach().cpu().numpy()
    return np.asarray(values)


def _endpoints(etype: str, pair: Any, num_nodes: Mapping[str, int]) -> Tuple[np.ndarray, np.ndarray]:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ValueError(f"edge type {etype!r}: edges must be a (src, dst) pair of arrays")
    src, dst = (_as_array(a) for a in pair)
    for arr, end in ((src, "source"), (dst, "destination")):
        if arr.ndim != 1 or (arr.dtype.kind not in "iu" and arr.size):
            raise ValueError(f"edge type {etype!r}: {end} IDs must be a 1-D integer array, "
                             f"got shape {arr.shape} of {arr.dtype}")
    if len(src) != len(dst):
        raise ValueError(f"edge type {etype!r}: {len(src)} source IDs but {len(dst)} destination IDs")
    s, _, d = etype.split(":")
    for arr, end, ntype in ((src, "source", s), (dst, "destination", d)):
        check_range(arr, num_nodes[ntype], f"edge type {etype!r}: {end} ID", ntype, ValueError)
    return src, dst


def _features(nested: Any, flat: Any, one_type: Optional[str]) -> Iterator[Tuple[Any, str, Any]]:
    if nested is not None:
        if not isinstance(nested, Mapping):
            raise ValueError("node_data/edge_data must be dicts")
        if one_type is not None and nested and not any(isinstance(v, Mapping) for v in nested.values()):
            nested = {one_type: nested}  # one node type: {name: array} is short for {ntype: {name: array}}
        for owner, feats in nested.items():
            if not isinstance(feats, Mapping):
                raise ValueError(f"features of {owner!r} must be a dict of name -> array")
            for name, values in feats.items():
                yield owner, name, values
    if flat is not None:
        for key, values in dict(flat).items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise ValueError(f"flat feature keys are (type, name) pairs, got {key!r}")
            yield key[0], key[1], values


def _feature(owner: str, name: Any, values: Any, rows: int) -> np.ndarray:
    what = f"{owner}/{name}"
    problem = name_problem(name, "feature") if isinstance(name, str) else "feature names must be strings"
    if problem:
        raise ValueError(f"{what}: {problem}")
    arr = _as_array(values)
    check_feature_dtype(arr.dtype, f"feature {what}")
    if arr.ndim < 1 or len(arr) != rows:
        raise ValueError(f"feature {what}: has {len(arr) if arr.ndim else 0} rows, expected {rows}")
    return arr


def write_graph(graph: Any, out_dir: PathLike, *, num_chunks: int = 4, edge_format: str = "csv",
                graph_name: str = "graph", overwrite: bool = False,
                batch_bytes: int = DEFAULT_BATCH_BYTES) -> Path:
    """Write an in-memory graph (see `describe_graph`) in the chunked format; return
    metadata.json's path. Memory beyond the graph itself: one batch of `batch_bytes`."""
    desc = describe_graph(graph)
    check_file_names(num_chunks, edge_format, {e: desc.edge_data.get(e, {}) for e in desc.edges}, desc.node_data)
    writer = ChunkedGraphWriter(out_dir, num_chunks=num_chunks, edge_format=edge_format,
                                graph_name=graph_name, overwrite=overwrite)
    for ntype, n in desc.num_nodes.items():
        writer.add_node_type(ntype, n)
    for etype, (src, dst) in desc.edges.items():
        feats = desc.edge_data.get(etype, {})
        sink = writer.relation(etype, len(src), {k: (v.dtype, v.shape[1:]) for k, v in feats.items()})
        step = rows_per_batch(16 + sum(bytes_per_row(v) for v in feats.values()), batch_bytes)
        for a in range(0, len(src), step):
            sink.write(src[a:a + step].astype(np.int64), dst[a:a + step].astype(np.int64),
                       {k: v[a:a + step] for k, v in feats.items()})
        sink.close()
    for ntype, feats in desc.node_data.items():
        for name, values in feats.items():
            sink = writer.node_feature(ntype, name, values.dtype, values.shape[1:])
            step = rows_per_batch(bytes_per_row(values), batch_bytes)
            for a in range(0, len(values), step):
                sink.write(values[a:a + step])
            sink.close()
    return writer.finish()

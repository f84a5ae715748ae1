"""Loading a partition output without DGL.

The counterparts of `dgl.distributed.load_partition`, `load_partition_feats` and
`load_partition_book`, plus `load_orig_ids`, for the layout of
shared/spec/dgl-partition-format.md. They return numpy arrays, or torch tensors with
`as_torch=True`; torch is imported only then, and mpi4py never, so training scripts and
inspection tools can use this module anywhere.

Paths inside the partition config are relative to the config's folder (absolute paths
are accepted too). Anything missing or malformed raises OutputError naming the file.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import numpy as np

from .dglformat import PartitionGraph, read_graph, read_tensor_dict
from ..errors import OutputError, PathLike
from ..chunked.metadata import read_json
from .partbook import PartitionBook

Arrays = dict[str, Any]
"""Name -> np.ndarray, or torch.Tensor when loaded with as_torch=True."""


def load_partition(
    part_config: PathLike, part_id: int, load_feats: bool = True, as_torch: bool = False
) -> tuple[PartitionGraph, Arrays, Arrays, PartitionBook, str, list[str], list[tuple[str, str, str]]]:
    """Load partition `part_id`: (graph, node_feats, edge_feats, gpb, graph_name, ntypes, etypes).

    The graph's arrays (src, dst, ndata, edata) are torch tensors with `as_torch`. The
    feature dicts are empty when `load_feats` is False. `ntypes` (names) and `etypes`
    (canonical (src, rel, dst) tuples, as DGL 2.x returns) are lists in type-ID order.
    """
    cfg = _read_config(part_config)
    graph = read_graph(_part_file(part_config, cfg, part_id, "part_graph"))
    gpb, graph_name = _partition_book(part_config, cfg, part_id)
    node_feats: Arrays = {}
    edge_feats: Arrays = {}
    if load_feats:
        node_feats = read_tensor_dict(_part_file(part_config, cfg, part_id, "node_feats"))
        edge_feats = read_tensor_dict(_part_file(part_config, cfg, part_id, "edge_feats"))
    if as_torch:
        graph = _graph_as_torch(graph)
        node_feats, edge_feats = _as_torch(node_feats), _as_torch(edge_feats)
    return graph, node_feats, edge_feats, gpb, graph_name, gpb.ntypes, canonical_etypes(gpb.etypes)


def load_partition_feats(
    part_config: PathLike,
    part_id: int,
    load_nodes: bool = True,
    load_edges: bool = True,
    as_torch: bool = False,
) -> tuple[Optional[Arrays], Optional[Arrays]]:
    """Load (node_feats, edge_feats) of partition `part_id`; None for the kind not loaded.

    Keys are '<ntype>/<feat>' and '<src:rel:dst>/<feat>'; rows are the partition's own
    nodes (edges) in local order.
    """
    cfg = _read_config(part_config)
    feats: list[Optional[Arrays]] = []
    for wanted, key in ((load_nodes, "node_feats"), (load_edges, "edge_feats")):
        loaded = read_tensor_dict(_part_file(part_config, cfg, part_id, key)) if wanted else None
        feats.append(_as_torch(loaded) if as_torch and loaded is not None else loaded)
    return feats[0], feats[1]


def load_partition_book(
    part_config: PathLike, part_id: int
) -> tuple[PartitionBook, str, dict[str, int], dict[tuple[str, str, str], int]]:
    """Load (gpb, graph_name, ntypes, etypes); the type dicts map node type names and
    canonical edge type tuples to type IDs, as DGL 2.x's does."""
    gpb, graph_name = _partition_book(part_config, _read_config(part_config), part_id)
    return (
        gpb,
        graph_name,
        {name: i for i, name in enumerate(gpb.ntypes)},
        {etype: i for i, etype in enumerate(canonical_etypes(gpb.etypes))},
    )


def canonical_etypes(names: list[str]) -> list[tuple[str, str, str]]:
    """'src:rel:dst' names as the (src, rel, dst) tuples DGL 2.x's loaders return."""
    return [tuple(name.split(":")) for name in names]  # type: ignore[misc]


def load_orig_ids(
    part_config: PathLike, part_id: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Load (orig_nids, orig_eids) of partition `part_id`.

    `orig_nids[ntype][i]` is the original per-type ID of the partition's i-th own node
    of that type (edges likewise, keyed by canonical edge type), read from orig_nids.dgl
    and orig_eids.dgl beside the partition's graph file.
    """
    cfg = _read_config(part_config)
    folder = os.path.dirname(_part_file(part_config, cfg, part_id, "part_graph"))
    return (
        read_tensor_dict(os.path.join(folder, "orig_nids.dgl")),
        read_tensor_dict(os.path.join(folder, "orig_eids.dgl")),
    )


def _read_config(part_config: PathLike) -> dict[str, Any]:
    path = os.fspath(part_config)
    cfg = read_json(path, OutputError)
    if not isinstance(cfg, dict):
        raise OutputError(path, "the partition config must be a JSON object")
    return cfg


def _part_file(part_config: PathLike, cfg: dict[str, Any], part_id: int, key: str) -> str:
    """Path of file `key` ('part_graph', 'node_feats', ...) of partition `part_id`."""
    config_path = os.fspath(part_config)
    entry = cfg.get(f"part-{part_id}")
    if not isinstance(entry, dict):
        raise OutputError(f"{config_path}: part-{part_id}", "no such partition in the config")
    relative = entry.get(key)
    if not isinstance(relative, str):
        raise OutputError(f"{config_path}: part-{part_id}", f"no {key!r} file listed")
    # os.path.join keeps `relative` as it is when it is absolute.
    return os.path.join(os.path.dirname(config_path), relative)


def _partition_book(
    part_config: PathLike, cfg: dict[str, Any], part_id: int
) -> tuple[PartitionBook, str]:
    config_path = os.fspath(part_config)
    graph_name = cfg.get("graph_name")
    if not isinstance(graph_name, str):
        raise OutputError(f"{config_path}: graph_name", "missing")
    return PartitionBook.from_config(cfg, part_id, source=config_path), graph_name


def _as_torch(arrays: dict[str, np.ndarray]) -> Arrays:
    import torch  # only this option needs torch; `import distpart.partitions.loader` must not

    return {key: torch.from_numpy(arr) for key, arr in arrays.items()}


def _graph_as_torch(graph: PartitionGraph) -> PartitionGraph:
    import torch  # see _as_torch

    return dataclasses.replace(
        graph,
        src=torch.from_numpy(graph.src),
        dst=torch.from_numpy(graph.dst),
        ndata=_as_torch(graph.ndata),
        edata=_as_torch(graph.edata),
    )

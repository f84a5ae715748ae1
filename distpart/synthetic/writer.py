"""The general writer of synthetic chunked graphs: node, edge and feature specs, written one
chunk at a time.

Everything is deterministic for a given seed:

* edges of type T in chunk c come from a generator seeded by (seed, T, c), so one type's
  edges do not change when other types are added or removed;
* feature values are a hash of (seed, owner, feature name, row index, column), so tests can
  recompute any row with `feature_values` without reading the files.

Writing streams: one chunk is generated, written and dropped before the next, so the peak
memory is one chunk, not the graph. The pieces shared with `distpart chunk` (`chunk_sizes`,
the edge file writers, file names) live in `chunked.write`.
"""
from __future__ import annotations

import json
import os
import pathlib
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..arrays import GOLDEN64, splitmix64
from ..chunked.metadata import EDGE_FORMATS, FEATURE_FORMATS
from ..chunked.write import EXTENSIONS, chunk_sizes, file_stem, write_edge_file
from .graph_models import EdgeModel, stable_key, uniform

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["NodeTypeSpec", "EdgeTypeSpec", "FeatureSpec", "feature_values", "write_chunked_graph"]


@dataclass(frozen=True)
class NodeTypeSpec:
    """A node type and its number of nodes."""

    name: str
    count: int


@dataclass(frozen=True)
class EdgeTypeSpec:
    """A canonical edge type "src:rel:dst", its number of edges and its file format.

    `delimiter` is only used by the "csv" format.
    """

    canonical: str
    count: int
    fmt: str = "csv"
    delimiter: str = " "


@dataclass(frozen=True)
class FeatureSpec:
    """A feature of a node type or canonical edge type.

    Each row has shape `tail_shape` (``()`` for a 1-D feature). `num_chunks` is the number
    of files; None means the graph's `num_chunks`. For "hdf5" the dataset is named `name`.
    """

    owner: str
    name: str
    dtype: Any
    tail_shape: Tuple[int, ...] = ()
    fmt: str = "numpy"
    num_chunks: Optional[int] = None


# ----------------------------------------------------------------------------- values


def feature_values(spec: FeatureSpec, rows: np.ndarray, seed: int = 0) -> np.ndarray:
    """The values of `spec` at row indices `rows`, shape ``(len(rows),) + spec.tail_shape``.

    A pure function of (seed, owner, name, row, column), so any subset of rows can be
    recomputed independently of how the feature was chunked on disk. Value ranges:

    * bool: a fair coin per entry (both values appear);
    * floating: uniform in [-8, 8), so values are almost never integral;
    * integer: uniform over the dtype's whole range, so signed types include negatives and
      int64 values exceed float64's exact range (a lossy cast would be caught).
    """
    dtype = np.dtype(spec.dtype)
    rows = np.asarray(rows, dtype=np.int64)
    width = int(np.prod(spec.tail_shape, dtype=np.int64))
    key = np.uint64(stable_key("feature", seed, spec.owner, spec.name))
    counter = rows.astype(np.uint64)[:, None] * np.uint64(width) + np.arange(width, dtype=np.uint64)
    h = splitmix64(counter * GOLDEN64 + key)
    if dtype == np.bool_:
        values = (h >> np.uint64(63)).astype(np.bool_)
    elif dtype.kind == "f":
        unit = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53  # exact, in [0, 1)
        values = (unit * 16.0 - 8.0).astype(dtype)
    elif dtype.kind in "iu":
        bits = dtype.itemsize * 8
        top = (h >> np.uint64(64 - bits)).astype(np.dtype(f"u{dtype.itemsize}"))
        values = top.view(dtype)  # reinterpreting the bits gives negatives for signed types
    else:
        raise ValueError(f"feature {spec.owner}/{spec.name}: unsupported dtype {dtype}")
    return values.reshape((len(rows),) + tuple(spec.tail_shape))


# ----------------------------------------------------------------------------- writers


def _write_feature(path: pathlib.Path, spec: FeatureSpec, values: np.ndarray) -> None:
    if spec.fmt == "numpy":
        np.save(path, values)
    elif spec.fmt == "parquet":
        # DGL's convention: one column per flattened trailing element, named "0", "1", ...,
        # and the file's own array shape in the schema metadata to restore the dims.
        width = int(np.prod(values.shape[1:], dtype=np.int64))
        flat = values.reshape(len(values), width)  # not -1: that fails on an empty chunk
        table = pa.table({str(j): flat[:, j] for j in range(flat.shape[1])})
        table = table.replace_schema_metadata({b"shape": str(values.shape).encode()})
        pq.write_table(table, path)
    elif spec.fmt == "hdf5":
        with h5py.File(path, "w") as f:
            # No timestamps in the file, so the same seed gives the same bytes.
            f.create_dataset(spec.name, data=values, track_times=False)
    else:
        raise ValueError(f"feature {spec.owner}/{spec.name}: the generator cannot write {spec.fmt!r} files")


def _check_specs(
    node_types: Sequence[NodeTypeSpec],
    edge_types: Sequence[EdgeTypeSpec],
    features: Sequence[FeatureSpec],
    community: Optional[int],
) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for nt in node_types:
        if nt.name in counts or ":" in nt.name or not nt.name:
            raise ValueError(f"bad or duplicate node type name {nt.name!r}")
        if nt.count < 0:
            raise ValueError(f"node type {nt.name}: count must be >= 0")
        counts[nt.name] = nt.count
    owners: Dict[str, int] = dict(counts)
    for et in edge_types:
        parts = et.canonical.split(":")
        if len(parts) != 3 or parts[0] not in counts or parts[2] not in counts:
            raise ValueError(f"edge type {et.canonical!r} is not 'src:rel:dst' of known node types")
        if et.canonical in owners:
            raise ValueError(f"duplicate edge type {et.canonical!r}")
        if et.fmt not in EDGE_FORMATS:
            raise ValueError(f"edge type {et.canonical}: format must be one of {EDGE_FORMATS}")
        if et.fmt == "csv" and len(et.delimiter) != 1:
            raise ValueError(f"edge type {et.canonical}: CSV delimiter must be one character")
        if et.count < 0 or (et.count > 0 and (counts[parts[0]] == 0 or counts[parts[2]] == 0)):
            raise ValueError(f"edge type {et.canonical}: bad count {et.count} for its node types")
        owners[et.canonical] = et.count
    seen = set()
    for fs in features:
        if fs.owner not in owners or (fs.owner, fs.name) in seen:
            raise ValueError(f"feature {fs.owner}/{fs.name}: unknown owner or duplicate")
        if fs.fmt not in FEATURE_FORMATS:
            raise ValueError(f"feature {fs.owner}/{fs.name}: format must be one of {FEATURE_FORMATS}")
        seen.add((fs.owner, fs.name))
    if community is not None and community < 1:
        raise ValueError(f"community must be >= 1, got {community}")
    return owners


def write_chunked_graph(
    out_dir: PathLike,
    node_types: Sequence[NodeTypeSpec],
    edge_types: Sequence[EdgeTypeSpec],
    features: Sequence[FeatureSpec] = (),
    *,
    num_chunks: int = 4,
    seed: int = 0,
    absolute_paths: bool = False,
    community: Optional[int] = None,
    graph_name: str = "synthetic",
    edge_model: Optional[EdgeModel] = None,
) -> pathlib.Path:
    """Write a random graph in DGL's chunked format under `out_dir`; return metadata.json's path.

    Node and edge counts are split into `num_chunks` near-equal chunks; each feature into
    its own `num_chunks` (default: the graph's). Files go to ``edges/``, ``node_data/`` and
    ``edge_data/``; metadata.json refers to them relative to `out_dir` unless
    `absolute_paths`. With `community=k`, node i of a type with n nodes belongs to
    community i*k//n and ~90% of edges join a source to its community in the destination type.
    `edge_model` (see graph_models) replaces that uniform/community model.
    """
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    owner_counts = _check_specs(node_types, edge_types, features, community)
    model = edge_model or uniform(community)
    out = pathlib.Path(out_dir)
    for sub in ("edges", "node_data", "edge_data"):
        (out / sub).mkdir(parents=True, exist_ok=True)

    def ref(path: pathlib.Path) -> str:
        return str(path.resolve()) if absolute_paths else path.relative_to(out).as_posix()

    num_nodes = {nt.name: nt.count for nt in node_types}
    edges_meta: Dict[str, Any] = {}
    for et in edge_types:
        src_type, _, dst_type = et.canonical.split(":")
        paths = []
        first = 0
        for c, size in enumerate(chunk_sizes(et.count, num_chunks)):
            # One generator per (type, chunk): chunks are independent, so only one is in memory.
            rng = np.random.default_rng([seed, stable_key("edges", et.canonical), c])
            src, dst = model(rng, et.canonical, num_nodes[src_type], num_nodes[dst_type], first, size, seed)
            first += size
            path = out / "edges" / f"{file_stem(et.canonical)}-{c}{EXTENSIONS[et.fmt]}"
            write_edge_file(path, et.fmt, src, dst, et.delimiter)
            paths.append(ref(path))
        fmt: Dict[str, str] = {"name": et.fmt}
        if et.fmt == "csv":
            fmt["delimiter"] = et.delimiter
        edges_meta[et.canonical] = {"format": fmt, "data": paths}

    node_data: Dict[str, Dict[str, Any]] = {}
    edge_data: Dict[str, Dict[str, Any]] = {}
    for fs in features:
        sub, table = ("node_data", node_data) if fs.owner in num_nodes else ("edge_data", edge_data)
        paths = []
        start = 0
        for c, size in enumerate(chunk_sizes(owner_counts[fs.owner], fs.num_chunks or num_chunks)):
            values = feature_values(fs, np.arange(start, start + size, dtype=np.int64), seed)
            path = out / sub / f"{file_stem(fs.owner)}-{fs.name}-{c}{EXTENSIONS[fs.fmt]}"
            _write_feature(path, fs, values)
            paths.append(ref(path))
            start += size
        fmt = {"name": fs.fmt}
        if fs.fmt == "hdf5":
            fmt["dataset"] = fs.name
        table.setdefault(fs.owner, {})[fs.name] = {"format": fmt, "data": paths}

    metadata = {
        "graph_name": graph_name,
        "node_type": [nt.name for nt in node_types],
        "num_nodes_per_chunk": [chunk_sizes(nt.count, num_chunks) for nt in node_types],
        "edge_type": [et.canonical for et in edge_types],
        "num_edges_per_chunk": [chunk_sizes(et.count, num_chunks) for et in edge_types],
        "edges": edges_meta,
        "node_data": node_data,
        "edge_data": edge_data,
    }
    # Written last: a directory with a metadata.json is a complete graph.
    meta_path = out / "metadata.json"
    meta_path.write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return meta_path


# ----------------------------------------------------------------------------- presets



"""Generating example and benchmark inputs in DGL's chunked graph format.

This module owns every synthetic graph distpart uses: the small heterogeneous graph the
README and the tests are written against (`example_graph`), large homogeneous graphs for
benchmarks (`homogeneous_graph`; power-law `rmat_graph`; `mesh_graph`), and the general
writer they are built on (`write_chunked_graph`; edge models in `graph_models`). It also holds `read_whole_graph`, a deliberately naive serial
reader that the tests use as ground truth for the MPI pipeline. The pieces it shares with
`distpart chunk` (`chunk_sizes`, the edge file writers, file names) live in `chunk`.

Everything is deterministic for a given seed:

* edges of type T in chunk c come from a generator seeded by (seed, T, c), so one type's
  edges do not change when other types are added or removed;
* feature values are a hash of (seed, owner, feature name, row index, column), so tests can
  recompute any row with `feature_values` without reading the files.

Writing streams: one chunk is generated, written and dropped before the next, so the peak
memory is one chunk, not the graph.

Command line::

    python -m distpart.synthetic example OUT_DIR [--scale S] [--seed N]
    python -m distpart.synthetic homogeneous OUT_DIR --num-nodes N --num-edges M \\
        [--num-chunks C] [--format numpy|csv|parquet] [--feat-dim D] [--community K] [--seed N]
    python -m distpart.synthetic rmat OUT_DIR --num-nodes N --num-edges M [...]
    python -m distpart.synthetic mesh OUT_DIR --num-nodes N [...]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .arrays import GOLDEN64, splitmix64
from .chunk import EXTENSIONS, chunk_sizes, file_stem, write_edge_file
from .graph_models import GRAPH500, EdgeModel, rmat, stable_key, torus, uniform
from .metadata import EDGE_FORMATS, FEATURE_FORMATS

PathLike = Union[str, "os.PathLike[str]"]


__all__ = [
    "NodeTypeSpec",
    "EdgeTypeSpec",
    "FeatureSpec",
    "chunk_sizes",
    "feature_values",
    "write_chunked_graph",
    "example_graph",
    "homogeneous_graph",
    "rmat_graph",
    "mesh_graph",
    "read_whole_graph",
    "main",
]


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


def example_graph_specs(
    scale: int = 1,
) -> Tuple[List[NodeTypeSpec], List[EdgeTypeSpec], List[FeatureSpec]]:
    """The schema of `example_graph` (types, counts, formats), for tests that need it."""
    nodes = [
        NodeTypeSpec("author", 1000 * scale),
        NodeTypeSpec("paper", 2000 * scale),
        # 3 nodes in 4 chunks at scale 1: the last node chunk is empty on purpose.
        NodeTypeSpec("institution", 3 * scale),
    ]
    edges = [
        EdgeTypeSpec("author:writes:paper", 4000 * scale, fmt="csv", delimiter=" "),
        EdgeTypeSpec("paper:cites:paper", 3000 * scale, fmt="numpy"),
        EdgeTypeSpec("author:affiliated_with:institution", 1000 * scale, fmt="parquet"),
        EdgeTypeSpec("paper:written_by:author", 2000 * scale, fmt="csv", delimiter=","),
    ]
    feats = [
        FeatureSpec("paper", "feat", "float32", (8,), fmt="numpy", num_chunks=3),
        FeatureSpec("paper", "label", "int64", (), fmt="parquet"),
        FeatureSpec("paper", "train_mask", "bool", (), fmt="hdf5"),
        FeatureSpec("author", "emb", "float16", (4,), fmt="hdf5", num_chunks=2),
        FeatureSpec("author", "age", "uint16", (), fmt="numpy"),
        FeatureSpec("author:writes:paper", "year", "int16", (), fmt="numpy"),
        # 5 files against the edge type's 4: feature chunking is independent of edge chunking.
        FeatureSpec("paper:cites:paper", "weight", "float64", (2,), fmt="parquet", num_chunks=5),
    ]
    return nodes, edges, feats


def example_graph(out_dir: PathLike, scale: int = 1, seed: int = 0) -> pathlib.Path:
    """Write the bundled heterogeneous example (README and tests) and return metadata.json."""
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    nodes, edges, feats = example_graph_specs(scale)
    return write_chunked_graph(
        out_dir, nodes, edges, feats, num_chunks=4, seed=seed, graph_name="example"
    )


def homogeneous_graph(
    out_dir: PathLike,
    num_nodes: int,
    num_edges: int,
    *,
    num_chunks: int = 8,
    fmt: str = "numpy",
    feat_dim: int = 16,
    seed: int = 0,
    community: Optional[int] = None,
) -> pathlib.Path:
    """Write a one-type graph ("_N", "_N:_E:_N") for benchmarks; return metadata.json.

    `fmt` is the edge format; the float32 node feature "feat" (width `feat_dim`, none when
    0) is always .npy.
    """
    feats = [FeatureSpec("_N", "feat", "float32", (feat_dim,))] if feat_dim > 0 else []
    return write_chunked_graph(
        out_dir,
        [NodeTypeSpec("_N", num_nodes)],
        [EdgeTypeSpec("_N:_E:_N", num_edges, fmt=fmt)],
        feats,
        num_chunks=num_chunks,
        seed=seed,
        community=community,
        graph_name="homogeneous",
    )


def rmat_graph(
    out_dir: PathLike,
    num_nodes: int,
    num_edges: int,
    *,
    num_chunks: int = 8,
    fmt: str = "numpy",
    seed: int = 0,
    probabilities: Tuple[float, float, float] = GRAPH500,
) -> pathlib.Path:
    """A heterogeneous power-law graph for partitioning benchmarks; return metadata.json.

    Node types "user" (60% of the nodes) and "item"; edge types user:follows:user (40% of
    the edges), user:buys:item (40%) and item:similar:item (20%), each an RMAT matrix with
    Graph500's parameters, IDs randomly relabelled per node type (see graph_models).
    """
    users = num_nodes * 3 // 5
    follows, buys = num_edges * 2 // 5, num_edges * 2 // 5
    return write_chunked_graph(
        out_dir,
        [NodeTypeSpec("user", users), NodeTypeSpec("item", num_nodes - users)],
        [EdgeTypeSpec("user:follows:user", follows, fmt=fmt),
         EdgeTypeSpec("user:buys:item", buys, fmt=fmt),
         EdgeTypeSpec("item:similar:item", num_edges - follows - buys, fmt=fmt)],
        num_chunks=num_chunks, seed=seed, graph_name="rmat", edge_model=rmat(probabilities),
    )


def mesh_graph(
    out_dir: PathLike, num_nodes: int, *, num_chunks: int = 8, fmt: str = "numpy", seed: int = 0
) -> pathlib.Path:
    """A 2-D torus mesh (2 edges per node, IDs randomly relabelled); return metadata.json."""
    return write_chunked_graph(
        out_dir,
        [NodeTypeSpec("_N", num_nodes)],
        [EdgeTypeSpec("_N:_E:_N", 2 * num_nodes, fmt=fmt)],
        num_chunks=num_chunks, seed=seed, graph_name="mesh", edge_model=torus,
    )


# ----------------------------------------------------------------------------- reference reader


def read_whole_graph(metadata_path: PathLike) -> Dict[str, Any]:
    """Read a whole chunked graph into memory, serially: the tests' ground truth.

    Returns ``{"num_nodes": {ntype: n}, "edges": {etype: (src, dst)}, "node_feats":
    {(ntype, feat): array}, "edge_feats": {(etype, feat): array}}`` with int64 src/dst in
    edge-ID order. Deliberately shares no code with the pipeline or the writers above, so
    a bug in either cannot hide itself.
    """
    meta_path = pathlib.Path(metadata_path)
    base = meta_path.parent
    meta = json.loads(meta_path.read_text(encoding="utf-8"))

    def resolve(p: str) -> pathlib.Path:
        return pathlib.Path(p) if os.path.isabs(p) else base / p

    def read_edge_file(path: pathlib.Path, fmt: Dict[str, Any]) -> Tuple[np.ndarray, np.ndarray]:
        if fmt["name"] == "numpy":
            arr = np.load(path).reshape(-1, 2)
            return arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
        if fmt["name"] == "parquet":
            table = pq.read_table(path)
            return (table.column("src").to_numpy().astype(np.int64),
                    table.column("dst").to_numpy().astype(np.int64))
        if fmt["name"] == "csv":
            if path.stat().st_size == 0:  # pyarrow refuses an empty CSV; it is an empty chunk
                return np.empty(0, np.int64), np.empty(0, np.int64)
            table = pacsv.read_csv(
                path,
                read_options=pacsv.ReadOptions(autogenerate_column_names=True),
                parse_options=pacsv.ParseOptions(delimiter=fmt.get("delimiter", ",")),
                convert_options=pacsv.ConvertOptions(
                    column_types={"f0": pa.int64(), "f1": pa.int64()}),
            )
            return table.column(0).to_numpy(), table.column(1).to_numpy()
        raise ValueError(f"{path}: unknown edge format {fmt['name']!r}")

    def read_feature_file(path: pathlib.Path, fmt: Dict[str, Any]) -> np.ndarray:
        if fmt["name"] == "numpy":
            return np.load(path)
        if fmt["name"] == "hdf5":
            with h5py.File(path, "r") as f:
                return f[fmt["dataset"]][...]
        if fmt["name"] == "parquet":
            table = pq.read_table(path)
            cols = [table.column(name).to_numpy() for name in table.column_names]
            shape_text = (table.schema.metadata or {}).get(b"shape")
            arr = np.stack(cols, axis=1)
            if shape_text is None:
                return arr if arr.shape[1] > 1 else arr[:, 0]
            shape = tuple(int(s) for s in shape_text.decode().strip("()[] ").split(",") if s.strip())
            return arr.reshape(shape)
        raise ValueError(f"{path}: unknown feature format {fmt['name']!r}")

    num_nodes = {nt: int(sum(c)) for nt, c in zip(meta["node_type"], meta["num_nodes_per_chunk"])}
    edges = {}
    for etype in meta["edge_type"]:
        spec = meta["edges"][etype]
        parts = [read_edge_file(resolve(p), spec["format"]) for p in spec["data"]]
        edges[etype] = (np.concatenate([s for s, _ in parts]), np.concatenate([d for _, d in parts]))

    def read_feats(section: Dict[str, Any]) -> Dict[Tuple[str, str], np.ndarray]:
        return {
            (owner, name): np.concatenate(
                [read_feature_file(resolve(p), spec["format"]) for p in spec["data"]])
            for owner, feats in section.items()
            for name, spec in feats.items()
        }

    return {
        "num_nodes": num_nodes,
        "edges": edges,
        "node_feats": read_feats(meta.get("node_data", {})),
        "edge_feats": read_feats(meta.get("edge_data", {})),
    }


# ----------------------------------------------------------------------------- command line


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m distpart.synthetic",
        description="Write a synthetic graph in DGL's chunked graph format.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("example", help="the bundled heterogeneous example graph")
    ex.add_argument("out_dir")
    ex.add_argument("--scale", type=int, default=1)
    ex.add_argument("--seed", type=int, default=0)
    ho = sub.add_parser("homogeneous", help="a one-type graph for benchmarks")
    ho.add_argument("out_dir")
    ho.add_argument("--num-nodes", type=int, required=True)
    ho.add_argument("--num-edges", type=int, required=True)
    ho.add_argument("--num-chunks", type=int, default=8)
    ho.add_argument("--format", choices=EDGE_FORMATS, default="numpy")
    ho.add_argument("--feat-dim", type=int, default=16)
    ho.add_argument("--community", type=int, default=None)
    ho.add_argument("--seed", type=int, default=0)
    rm = sub.add_parser("rmat", help="a heterogeneous RMAT power-law graph (Graph500 parameters)")
    me = sub.add_parser("mesh", help="a 2-D torus mesh, 2 edges per node")
    for sp in (rm, me):
        sp.add_argument("out_dir")
        sp.add_argument("--num-nodes", type=int, required=True)
        sp.add_argument("--num-chunks", type=int, default=8)
        sp.add_argument("--format", choices=EDGE_FORMATS, default="numpy")
        sp.add_argument("--seed", type=int, default=0)
    rm.add_argument("--num-edges", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "example":
            path = example_graph(args.out_dir, scale=args.scale, seed=args.seed)
        elif args.command == "rmat":
            path = rmat_graph(args.out_dir, args.num_nodes, args.num_edges, num_chunks=args.num_chunks,
                              fmt=args.format, seed=args.seed)
        elif args.command == "mesh":
            path = mesh_graph(args.out_dir, args.num_nodes, num_chunks=args.num_chunks, fmt=args.format,
                              seed=args.seed)
        else:
            path = homogeneous_graph(
                args.out_dir, args.num_nodes, args.num_edges, num_chunks=args.num_chunks,
                fmt=args.format, feat_dim=args.feat_dim, seed=args.seed,
                community=args.community,
            )
    except ValueError as exc:
        parser.error(str(exc))  # exits with status 2 and the usage line
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

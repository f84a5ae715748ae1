"""Writing DGL's chunked graph format from data that is not chunked yet (`distpart chunk`).

This module owns the writer of the chunked format and its three sources:

(a) a plain in-memory description (`write_graph`): node counts per type, (src, dst) arrays
    per canonical edge type, feature arrays per type (see `describe_graph`), or a DGLGraph;
(b) OGB's raw layout (`chunk_ogb`), as MAG240M ships it: `processed/<src>___<rel>___<dst>/
    edge_index.npy` (a (2, E) array) per relation and `processed/<ntype>/node_<name>.npy` per
    node feature;
(c) one large edge list per relation, CSV or Parquet (`chunk_edge_lists`): the first two
    columns (or `src`/`dst`) are the endpoints, every further column an edge feature.

Everything is streamed: a source is read in batches (`pyarrow.csv.open_csv`,
`ParquetFile.iter_batches`, slices of memory-mapped .npy files), each batch is cut at the
chunk boundaries and appended to the open chunk files, so memory is bounded by the batch
(`batch_bytes`), never by a file, a chunk or the graph. CSV sources are read twice (to count
rows and find the endpoint ranges, then to write); nothing is held between the passes.

The output holds every key DGL's and distpart's readers read: `graph_name`, `node_type`,
`num_nodes_per_chunk`, `edge_type`, `num_edges_per_chunk`, `edges` (with the CSV delimiter),
`node_data`, `edge_data`, paths relative to the folder. Edges go to `edges/` in the chosen
format (csv with a space, as DGL's tools write, numpy or parquet); features to `node_data/
<ntype>/` and `edge_data/<etype>/` as .npy. metadata.json is written last, so a folder with
one is complete. A folder is only written when it is new or empty, or with `overwrite`
when an earlier `distpart chunk` wrote it (a `.distpart-chunked` marker says so).

The shared pieces (`chunk_sizes`, `file_stem`, `write_edge_file`) are also used by
`synthetic`, which writes the test and benchmark graphs.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .errors import InputError
from .metadata import EDGE_FORMATS, name_problem

PathLike = Union[str, "os.PathLike[str]"]
EdgeKey = Union[str, Tuple[str, str, str]]

__all__ = [
    "GraphDescription",
    "ChunkedGraphWriter",
    "chunk_sizes",
    "describe_graph",
    "write_graph",
    "chunk_ogb",
    "chunk_edge_lists",
]

MARKER = ".distpart-chunked"
EXTENSIONS = {"csv": ".csv", "numpy": ".npy", "parquet": ".parquet", "hdf5": ".h5"}
DEFAULT_BATCH_BYTES = 64 << 20
HOMOGENEOUS_NTYPE = "_N"   # DGL's name for the node type of a one-type graph
_WRITTEN = ("metadata.json", "edges", "node_data", "edge_data")


# ----------------------------------------------------------------------------- shared pieces


def chunk_sizes(total: int, parts: int) -> List[int]:
    """Split `total` into `parts` near-equal sizes, larger first (some are 0 if total < parts)."""
    if parts < 1:
        raise ValueError(f"number of chunks must be >= 1, got {parts}")
    if total < 0:
        raise ValueError(f"count must be >= 0, got {total}")
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def file_stem(name: str) -> str:
    """A type name as a file name: canonical edge types contain ':', which Windows refuses and
    some shells mangle; '___' is what MAG240M's raw layout uses."""
    return name.replace(":", "___")


def write_edge_file(path: Path, fmt: str, src: np.ndarray, dst: np.ndarray, delimiter: str = " ") -> None:
    """One whole edge chunk file in `fmt` ("csv", "numpy" or "parquet")."""
    chunk = _open_edge_chunk(path, fmt, len(src), delimiter)
    chunk.write(np.asarray(src), np.asarray(dst))
    chunk.close()


# ----------------------------------------------------------------------------- chunk files


class _NpyChunk:
    """A .npy file written front to back in pieces: the header first (the row count is known),
    then the rows with `tofile`, so nothing of the file stays mapped or buffered."""

    def __init__(self, path: Path, rows: int, dtype: np.dtype, tail: Tuple[int, ...]) -> None:
        self.path, self.dtype, self.tail = path, np.dtype(dtype), tuple(tail)
        self._file = open(path, "wb")
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": (rows,) + self.tail}
        np.lib.format.write_array_header_1_0(self._file, header)

    def write(self, *columns: np.ndarray) -> None:
        rows = columns[0] if len(columns) == 1 else np.stack(columns, axis=1)
        np.ascontiguousarray(rows, dtype=self.dtype).reshape((len(rows),) + self.tail).tofile(self._file)

    def close(self) -> None:
        self._file.close()


class _CsvEdgeChunk:
    """Two integer columns, no header, the given delimiter: DGL's CSV edge files."""

    def __init__(self, path: Path, delimiter: str) -> None:
        self.path = path
        options = pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none")
        self._writer = pacsv.CSVWriter(str(path), _EDGE_SCHEMA, write_options=options)

    def write(self, src: np.ndarray, dst: np.ndarray) -> None:
        self._writer.write_table(_edge_table(src, dst))

    def close(self) -> None:
        self._writer.close()


class _ParquetEdgeChunk:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = pq.ParquetWriter(str(path), _EDGE_SCHEMA)

    def write(self, src: np.ndarray, dst: np.ndarray) -> None:
        self._writer.write_table(_edge_table(src, dst))

    def close(self) -> None:
        self._writer.close()


_EDGE_SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64())])


def _edge_table(src: np.ndarray, dst: np.ndarray) -> pa.Table:
    return pa.table([pa.array(np.asarray(src, dtype=np.int64)), pa.array(np.asarray(dst, dtype=np.int64))],
                    schema=_EDGE_SCHEMA)


def _open_edge_chunk(path: Path, fmt: str, rows: int, delimiter: str):
    if fmt == "numpy":
        return _NpyChunk(path, rows, np.dtype(np.int64), (2,))
    if fmt == "parquet":
        return _ParquetEdgeChunk(path)
    if fmt == "csv":
        return _CsvEdgeChunk(path, delimiter)
    raise ValueError(f"edge format must be one of {EDGE_FORMATS}, got {fmt!r}")


class _RowSplitter:
    """Rows arriving in batches of any size, cut into chunk files of fixed sizes.

    Every chunk file is created, empty ones too, since the metadata names each.
    """

    def __init__(self, sizes: Sequence[int], open_chunk: Callable[[int, int], Any], what: str) -> None:
        self.sizes, self._open, self.what = list(sizes), open_chunk, what
        self.paths: List[Path] = []
        self._c, self._left, self._cur, self.written = -1, 0, None, 0
        self._advance()

    def _advance(self) -> None:
        while self._left == 0 and self._c + 1 < len(self.sizes):
            if self._cur is not None:
                self._cur.close()
            self._c += 1
            self._cur = self._open(self._c, self.sizes[self._c])
            self.paths.append(self._cur.path)
            self._left = self.sizes[self._c]

    def write(self, *columns: np.ndarray) -> None:
        n, i = len(columns[0]), 0
        while i < n:
            if self._left == 0:
                raise InputError(None, f"{self.what}: more rows than the {sum(self.sizes)} expected")
            k = min(self._left, n - i)
            self._cur.write(*(c[i:i + k] for c in columns))
            i, self._left, self.written = i + k, self._left - k, self.written + k
            self._advance()

    def close(self) -> List[Path]:
        self._advance()
        if self.written != sum(self.sizes):
            raise InputError(None, f"{self.what}: {self.written} rows, expected {sum(self.sizes)}")
        if self._cur is not None:
            self._cur.close()
            self._cur = None
        return self.paths


class _RelationSink:
    """The edges of one edge type and its edge features, written side by side in the same
    batches (a row of an edge list carries both)."""

    def __init__(self, edges: _RowSplitter, feats: Dict[str, _RowSplitter], on_close: Callable[[], None]) -> None:
        self._edges, self._feats, self._on_close = edges, feats, on_close

    def write(self, src: np.ndarray, dst: np.ndarray, feats: Optional[Mapping[str, np.ndarray]] = None) -> None:
        feats = feats or {}
        if set(feats) != set(self._feats):
            raise ValueError(f"{self._edges.what}: a batch has features {sorted(feats)}, "
                             f"expected {sorted(self._feats)}")
        self._edges.write(src, dst)
        for name, values in feats.items():
            self._feats[name].write(values)

    def close(self) -> None:
        self._edges.close()
        for sink in self._feats.values():
            sink.close()
        self._on_close()


# ----------------------------------------------------------------------------- the writer


def _check_feature_dtype(dtype: Any, what: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind not in "biuf":
        raise ValueError(f"{what}: features must be bool, integer or float arrays, got {dt}")
    return dt


class ChunkedGraphWriter:
    """Builds one chunked graph folder: types first, then edges and features as streams.

    Node types must be declared (`add_node_type`) before an edge type names them; each
    `relation(...)` and `node_feature(...)` returns a sink to `write` batches into and then
    `close`. `finish` writes metadata.json and returns its path.
    """

    def __init__(self, out_dir: PathLike, *, num_chunks: int = 4, edge_format: str = "csv",
                 graph_name: str = "graph", overwrite: bool = False, inputs: Sequence[PathLike] = (),
                 delimiter: str = " ") -> None:
        if edge_format not in EDGE_FORMATS:
            raise ValueError(f"edge format must be one of {', '.join(EDGE_FORMATS)}, got {edge_format!r}")
        if not isinstance(num_chunks, int) or num_chunks < 1:
            raise ValueError(f"the number of chunks must be a positive integer, got {num_chunks!r}")
        if len(delimiter) != 1:
            raise ValueError(f"the CSV delimiter must be one character, got {delimiter!r}")
        self.out = Path(out_dir)
        self.num_chunks, self.edge_format, self.delimiter = num_chunks, edge_format, delimiter
        self.graph_name = graph_name
        prepare_folder(self.out, overwrite, inputs)
        self._nodes: Dict[str, int] = {}
        self._edges: Dict[str, int] = {}
        self._edge_files: Dict[str, Any] = {}
        self._node_data: Dict[str, Dict[str, Any]] = {}
        self._edge_data: Dict[str, Dict[str, Any]] = {}
        self._stems: Dict[str, str] = {}

    def _ref(self, path: Path) -> str:
        return path.relative_to(self.out).as_posix()

    def _stem(self, name: str) -> str:
        # '___' could make two edge types one file name ("a:b___c:d", "a___b:c:d"): number the second.
        if name not in self._stems:
            stem = file_stem(name)
            if stem in self._stems.values():
                stem = f"{stem}-{len(self._stems)}"
            self._stems[name] = stem
        return self._stems[name]

    def add_node_type(self, name: str, count: int) -> None:
        problem = name_problem(name, "node type")
        if problem:
            raise ValueError(problem)
        if name in self._nodes:
            raise ValueError(f"node type {name!r} declared twice")
        if int(count) < 0:
            raise ValueError(f"node type {name!r}: negative count {count}")
        self._nodes[name] = int(count)

    def relation(self, etype: str, count: int,
                 features: Mapping[str, Tuple[Any, Tuple[int, ...]]] = ()) -> _RelationSink:
        """A sink for the `count` edges of canonical edge type `etype` and its features
        ({name: (dtype, row shape)})."""
        parts = etype.split(":")
        if len(parts) != 3:
            raise ValueError(f"edge type {etype!r} is not a canonical 'src:rel:dst' edge type")
        problem = name_problem(parts[1], "relation")
        if problem:
            raise ValueError(f"edge type {etype!r}: {problem}")
        for end in (parts[0], parts[2]):
            if end not in self._nodes:
                raise ValueError(f"edge type {etype!r} names node type {end!r}, which is not declared")
        if etype in self._edges:
            raise ValueError(f"edge type {etype!r} written twice")
        count = int(count)
        sizes = chunk_sizes(count, self.num_chunks)
        folder = self.out / "edges"
        folder.mkdir(exist_ok=True)
        stem, ext = self._stem(etype), EXTENSIONS[self.edge_format]
        edges = _RowSplitter(sizes, lambda c, rows: _open_edge_chunk(
            folder / f"{stem}-{c}{ext}", self.edge_format, rows, self.delimiter), f"edge type {etype}")
        feats = {name: self._feature_splitter("edge_data", etype, name, dtype, tail, sizes)
                 for name, (dtype, tail) in dict(features).items()}

        def done() -> None:
            fmt: Dict[str, str] = {"name": self.edge_format}
            if self.edge_format == "csv":
                fmt["delimiter"] = self.delimiter
            self._edges[etype] = count
            self._edge_files[etype] = {"format": fmt, "data": [self._ref(p) for p in edges.paths]}
            for name, sink in feats.items():
                self._edge_data.setdefault(etype, {})[name] = {
                    "format": {"name": "numpy"}, "data": [self._ref(p) for p in sink.paths]}

        return _RelationSink(edges, feats, done)

    def node_feature(self, ntype: str, name: str, dtype: Any, tail: Tuple[int, ...] = ()) -> _RowSplitter:
        """A sink for node feature `name` of `ntype` (one row per node, rows of shape `tail`);
        `close()` it after the last batch."""
        if ntype not in self._nodes:
            raise ValueError(f"node feature {ntype}/{name}: node type {ntype!r} is not declared")
        if name in self._node_data.get(ntype, {}):
            raise ValueError(f"node feature {ntype}/{name} written twice")
        sink = self._feature_splitter("node_data", ntype, name, dtype, tail,
                                      chunk_sizes(self._nodes[ntype], self.num_chunks))
        self._node_data.setdefault(ntype, {})[name] = sink
        return sink

    def _feature_splitter(self, group: str, owner: str, name: str, dtype: Any, tail: Tuple[int, ...],
                          sizes: List[int]) -> _RowSplitter:
        problem = name_problem(name, "feature")
        if problem:
            raise ValueError(f"{owner}: {problem}")
        dt = _check_feature_dtype(dtype, f"feature {owner}/{name}")
        folder = self.out / group / self._stem(owner)
        folder.mkdir(parents=True, exist_ok=True)
        return _RowSplitter(sizes, lambda c, rows: _NpyChunk(folder / f"{name}-{c}.npy", rows, dt, tuple(tail)),
                            f"feature {owner}/{name}")

    def finish(self) -> Path:
        """Write metadata.json (last: its presence means the folder is complete)."""
        node_data = {}
        for ntype, feats in self._node_data.items():
            node_data[ntype] = {name: {"format": {"name": "numpy"}, "data": [self._ref(p) for p in sink.paths]}
                                for name, sink in feats.items()}
        metadata = {
            "graph_name": self.graph_name,
            "node_type": list(self._nodes),
            "num_nodes_per_chunk": [chunk_sizes(n, self.num_chunks) for n in self._nodes.values()],
            "edge_type": list(self._edges),
            "num_edges_per_chunk": [chunk_sizes(n, self.num_chunks) for n in self._edges.values()],
            "edges": self._edge_files,
            "node_data": node_data,
            "edge_data": self._edge_data,
        }
        path = self.out / "metadata.json"
        tmp = self.out / ".metadata.json.tmp"
        tmp.write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return path


def prepare_folder(out: Path, overwrite: bool, inputs: Sequence[PathLike] = ()) -> None:
    """Make `out` ready for a chunked graph: new or empty, or (with `overwrite`) a previous
    `distpart chunk` output, whose files are removed first. Never a folder holding an input."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(out, "exists and is not a folder")
    target = out.resolve()
    for path in inputs:
        p = Path(path).resolve()
        if p == target or target in p.parents:
            raise InputError(out, f"holds the input {path}: write the chunked graph to another folder")
    if out.is_dir():
        present = [n for n in os.listdir(out) if n != MARKER]
        if present:
            if not (out / MARKER).is_file():
                raise InputError(out, "exists and is not empty: choose a new or empty folder "
                                      "(distpart never replaces files it did not write)")
            if not overwrite:
                raise InputError(out, "holds a chunked graph written before: pass --overwrite "
                                      "(overwrite=True) to replace it")
            # metadata.json first, so a half-removed folder never looks complete.
            for name in _WRITTEN:
                target_path = out / name
                if target_path.is_dir() and not target_path.is_symlink():
                    shutil.rmtree(target_path)
                elif target_path.exists() or target_path.is_symlink():
                    target_path.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / MARKER).write_text(json.dumps({"tool": "distpart chunk"}) + "\n")
    except OSError as e:
        raise InputError(out, f"cannot write in the folder: {e.strerror}") from None


def _rows_per_batch(row_bytes: int, batch_bytes: int) -> int:
    return max(1, int(batch_bytes) // max(1, int(row_bytes)))


def _row_bytes(arr: np.ndarray) -> int:
    return int(arr.dtype.itemsize * np.prod(arr.shape[1:], dtype=np.int64))


# ----------------------------------------------------------------------------- (a) in memory


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

    `graph` is a DGLGraph (see `api.graph_description`), a GraphDescription, or a dict::

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
        from .api import graph_description
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
    parts = name.split(":")
    if len(parts) != 3:
        raise ValueError(f"edge type {key!r} is not a canonical 'src:rel:dst' edge type")
    problem = name_problem(parts[1], "relation")
    if problem:
        raise ValueError(f"edge type {name!r}: {problem}")
    for end in (parts[0], parts[2]):
        if end not in num_nodes:
            raise ValueError(f"edge type {name!r} names node type {end!r}, which has no entry in 'num_nodes'")
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
        _check_range(arr, num_nodes[ntype], f"edge type {etype!r}: {end} ID", ntype, ValueError)
    return src, dst


def _check_range(ids: np.ndarray, n: int, what: str, ntype: str, error: Callable[..., Exception],
                 where: Optional[PathLike] = None, first_row: int = 0) -> None:
    """Raise naming the first ID outside [0, n) of `ntype` and its row (min/max first: no copy
    unless something is wrong)."""
    if not len(ids) or (int(ids.min()) >= 0 and int(ids.max()) < n):
        return
    bad = int(np.flatnonzero((ids < 0) | (ids >= n))[0])
    problem = f"{what} {int(ids[bad])} at row {first_row + bad} is outside [0, {n}) of node type '{ntype}'"
    raise error(where, problem) if where is not None else error(problem)


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
    _check_feature_dtype(arr.dtype, f"feature {what}")
    if arr.ndim < 1 or len(arr) != rows:
        raise ValueError(f"feature {what}: has {len(arr) if arr.ndim else 0} rows, expected {rows}")
    return arr


def write_graph(graph: Any, out_dir: PathLike, *, num_chunks: int = 4, edge_format: str = "csv",
                graph_name: str = "graph", overwrite: bool = False,
                batch_bytes: int = DEFAULT_BATCH_BYTES) -> Path:
    """Write an in-memory graph (see `describe_graph`) in the chunked format; return
    metadata.json's path. Memory beyond the graph itself: one batch of `batch_bytes`."""
    desc = describe_graph(graph)
    writer = ChunkedGraphWriter(out_dir, num_chunks=num_chunks, edge_format=edge_format,
                                graph_name=graph_name, overwrite=overwrite)
    for ntype, n in desc.num_nodes.items():
        writer.add_node_type(ntype, n)
    for etype, (src, dst) in desc.edges.items():
        feats = desc.edge_data.get(etype, {})
        sink = writer.relation(etype, len(src), {k: (v.dtype, v.shape[1:]) for k, v in feats.items()})
        step = _rows_per_batch(16 + sum(_row_bytes(v) for v in feats.values()), batch_bytes)
        for a in range(0, len(src), step):
            sink.write(src[a:a + step].astype(np.int64), dst[a:a + step].astype(np.int64),
                       {k: v[a:a + step] for k, v in feats.items()})
        sink.close()
    for ntype, feats in desc.node_data.items():
        for name, values in feats.items():
            sink = writer.node_feature(ntype, name, values.dtype, values.shape[1:])
            step = _rows_per_batch(_row_bytes(values), batch_bytes)
            for a in range(0, len(values), step):
                sink.write(values[a:a + step])
            sink.close()
    return writer.finish()


# ----------------------------------------------------------------------------- (b) OGB


def _say(notes: Optional[Callable[[str], None]]) -> Callable[[str], None]:
    return notes or (lambda text: print(f"distpart chunk: note: {text}", file=sys.stderr, flush=True))


class _Npy:
    """A .npy file read by rows with positioned reads. Not memory-mapped: every mapped page
    read would stay counted in the process's resident memory until the file is closed, which
    for a 21 GB edge_index.npy is the whole file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                self.shape, fortran, self.dtype = read(f)
                self.offset = f.tell()
        except (OSError, ValueError) as e:
            raise InputError(path, f"not a readable .npy file: {e}") from None
        if fortran and len(self.shape) > 1:
            raise InputError(path, "is stored in Fortran order; save it in C order (np.ascontiguousarray)")
        if self.dtype.hasobject:
            raise InputError(path, "holds Python objects, not numbers")
        self.ndim = len(self.shape)
        self.tail = tuple(self.shape[1:])
        self.row_items = int(np.prod(self.tail, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.shape[0]) if self.shape else 0

    def items(self, start: int, count: int) -> np.ndarray:
        """`count` elements from flat element `start` on."""
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * self.dtype.itemsize)
            out = np.fromfile(f, dtype=self.dtype, count=count)
        if len(out) != count:
            raise InputError(self.path, f"is shorter than its header says ({self.shape})")
        return out

    def rows(self, a: int, b: int) -> np.ndarray:
        return self.items(a * self.row_items, (b - a) * self.row_items).reshape((b - a,) + self.tail)


def _npy(path: Path) -> _Npy:
    return _Npy(path)


def _meta_pt_counts(path: Path, say: Callable[[str], None]) -> Dict[str, int]:
    """Node counts from OGB's meta.pt (a torch-saved dict), when torch is installed."""
    if not path.is_file():
        return {}
    try:
        import torch
    except ImportError:
        say(f"{path}: torch is not installed, so its node counts are not read; counts come from "
            f"--num-nodes, the node features, or the largest endpoint + 1")
        return {}
    try:
        # weights_only: a dict of numbers needs no arbitrary unpickling.
        meta = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # any unreadable file: fall back to the other sources
        say(f"{path}: not read ({e}); counts come from the other sources")
        return {}
    if not isinstance(meta, Mapping):
        return {}
    return {str(k): int(v) for k, v in meta.items() if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}


@dataclass
class _EdgeSource:
    """One relation's input: how to stream it, and what its first pass found."""

    etype: str
    path: Path
    rows: int = 0
    features: Dict[str, Tuple[np.dtype, Tuple[int, ...]]] = field(default_factory=dict)
    max_src: int = -1
    max_dst: int = -1
    batches: Callable[[], Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]] = None  # type: ignore[assignment]


def chunk_ogb(ogb_dir: PathLike, out_dir: PathLike, *, num_nodes: Optional[Mapping[str, int]] = None,
              num_chunks: int = 4, edge_format: str = "csv", graph_name: Optional[str] = None,
              overwrite: bool = False, batch_bytes: int = DEFAULT_BATCH_BYTES,
              notes: Optional[Callable[[str], None]] = None) -> Path:
    """Chunk a graph in OGB's raw layout (MAG240M's); return metadata.json's path.

    `ogb_dir` is the dataset folder or its `processed/` folder. Each sub-folder named
    `<src>___<rel>___<dst>` holding `edge_index.npy` ((2, E) or (E, 2)) is an edge type; its
    other `.npy` files are edge features (`edge_<name>.npy` -> `<name>`). Every other
    sub-folder is a node type whose `.npy` files are node features (`node_feat.npy` ->
    `feat`). Node and edge types are taken in name order (DGL's order). Node counts come from
    `num_nodes`, else the dataset's `meta.pt` (with torch), else a node feature's rows, else
    the largest endpoint + 1 (noted: trailing isolated nodes cannot be seen).
    """
    say = _say(notes)
    root = Path(ogb_dir)
    if not root.is_dir():
        raise InputError(root, "is not a folder")
    processed = root / "processed" if (root / "processed").is_dir() else root
    dataset_root = root if processed != root else root.parent
    relations, node_dirs = [], []
    for d in sorted(p for p in processed.iterdir() if p.is_dir()):
        if (d / "edge_index.npy").is_file():
            relations.append(d)
        elif any(f.suffix == ".npy" for f in d.iterdir()):
            node_dirs.append(d)
    if not relations:
        raise InputError(processed, "has no <src>___<rel>___<dst>/edge_index.npy: not OGB's raw layout")

    sources: List[_EdgeSource] = []
    for d in relations:
        parts = d.name.split("___")
        if len(parts) != 3:
            raise InputError(d, "an edge type folder must be named <src>___<rel>___<dst>")
        sources.append(_npy_edge_source(":".join(parts), d, batch_bytes))
    node_feats: Dict[str, Dict[str, Path]] = {}
    for d in node_dirs:
        for f in sorted(d.glob("*.npy")):
            name = f.stem[len("node_"):] if f.stem.startswith("node_") else f.stem
            node_feats.setdefault(d.name, {})[name] = f
    known = dict(_meta_pt_counts(dataset_root / "meta.pt", say))
    known.update(num_nodes or {})
    ntypes = sorted({n for s in sources for n in (s.etype.split(":")[0], s.etype.split(":")[2])} | set(node_feats)
                    | set(num_nodes or {}))
    counts = _node_counts(ntypes, sources, node_feats, known, say)
    return _write_sources(out_dir, counts, sources, node_feats, num_chunks=num_chunks, edge_format=edge_format,
                          graph_name=graph_name or dataset_root.name or "graph", overwrite=overwrite,
                          batch_bytes=batch_bytes, inputs=[processed])


def _npy_edge_source(etype: str, folder: Path, batch_bytes: int) -> _EdgeSource:
    path = folder / "edge_index.npy"
    arr = _npy(path)
    if arr.ndim != 2 or 2 not in arr.shape or arr.dtype.kind not in "iu":
        raise InputError(path, f"must be a (2, E) integer array, found shape {arr.shape} of {arr.dtype}")
    by_rows = arr.shape[0] != 2   # OGB's layout is (2, E); (E, 2) is accepted too
    rows = arr.shape[0] if by_rows else arr.shape[1]
    feats: Dict[str, _Npy] = {}
    for f in sorted(folder.glob("*.npy")):
        if f.name == "edge_index.npy":
            continue
        values = _npy(f)
        if values.ndim < 1 or len(values) != rows:
            raise InputError(f, f"has {len(values) if values.ndim else 0} rows but {path} has {rows} edges")
        name = f.stem[len("edge_"):] if f.stem.startswith("edge_") else f.stem
        try:
            _check_feature_dtype(values.dtype, f"feature {etype}/{name}")
        except ValueError as e:
            raise InputError(f, str(e)) from None
        feats[name] = values
    step = _rows_per_batch(16 + sum(v.dtype.itemsize * v.row_items for v in feats.values()), batch_bytes)

    def batches(features: bool = True) -> Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]:
        for a in range(0, rows, step):
            b = min(rows, a + step)
            if by_rows:
                pair = arr.rows(a, b)
                src, dst = pair[:, 0], pair[:, 1]
            else:  # (2, E) in C order: the sources, then the destinations, each contiguous
                src, dst = arr.items(a, b - a), arr.items(rows + a, b - a)
            yield (src.astype(np.int64), dst.astype(np.int64),
                   {k: v.rows(a, b) for k, v in feats.items()} if features else {}, a)

    source = _EdgeSource(etype, path, rows, {k: (v.dtype, v.tail) for k, v in feats.items()},
                         batches=batches)
    for src, dst, _, first in batches(features=False):   # the endpoints' ranges only
        if len(src):
            _check_negative(src, dst, path, etype, first)
            source.max_src = max(source.max_src, int(src.max()))
            source.max_dst = max(source.max_dst, int(dst.max()))
    return source


def _check_negative(src: np.ndarray, dst: np.ndarray, path: Path, etype: str, first_row: int) -> None:
    s, _, d = etype.split(":")
    for ids, end, ntype in ((src, "source", s), (dst, "destination", d)):
        if len(ids) and int(ids.min()) < 0:
            bad = int(np.flatnonzero(ids < 0)[0])
            raise InputError(path, f"{end} ID {int(ids[bad])} at row {first_row + bad} of edge type "
                                   f"'{etype}' is negative")


def _node_counts(ntypes: Sequence[str], sources: Sequence[_EdgeSource], node_feats: Mapping[str, Mapping[str, Path]],
                 known: Mapping[str, int], say: Callable[[str], None]) -> Dict[str, int]:
    """Each node type's count: given, else a feature's rows, else the largest endpoint + 1;
    then every endpoint is checked against it."""
    counts: Dict[str, int] = {}
    for ntype in ntypes:
        largest = max([s.max_src for s in sources if s.etype.split(":")[0] == ntype]
                      + [s.max_dst for s in sources if s.etype.split(":")[2] == ntype] + [-1])
        feat_rows = {name: len(_npy(p)) for name, p in node_feats.get(ntype, {}).items()}
        if ntype in known:
            counts[ntype] = int(known[ntype])
        elif feat_rows:
            counts[ntype] = next(iter(feat_rows.values()))
        else:
            counts[ntype] = largest + 1
            say(f"node type '{ntype}': {largest + 1} nodes (the largest endpoint + 1; give "
                f"--num-nodes {ntype}=N if the type has isolated nodes beyond that)")
        for name, rows in feat_rows.items():
            if rows != counts[ntype]:
                raise InputError(node_feats[ntype][name], f"has {rows} rows but node type '{ntype}' has "
                                                          f"{counts[ntype]} nodes")
    for s in sources:
        src_t, _, dst_t = s.etype.split(":")
        for largest, end, ntype in ((s.max_src, "source", src_t), (s.max_dst, "destination", dst_t)):
            if largest >= counts[ntype]:
                _find_out_of_range(s, end, ntype, counts[ntype])
    return counts


def _find_out_of_range(source: _EdgeSource, end: str, ntype: str, n: int) -> None:
    """Name the first endpoint outside [0, n) and its row (a second pass, only on error)."""
    for src, dst, _, first in source.batches():
        _check_range(src if end == "source" else dst, n, f"{end} ID", ntype, InputError, source.path, first)
    raise AssertionError("an endpoint was out of range in the first pass but not in the second")


def _write_sources(out_dir: PathLike, counts: Mapping[str, int], sources: Sequence[_EdgeSource],
                   node_feats: Mapping[str, Mapping[str, Path]], *, num_chunks: int, edge_format: str,
                   graph_name: str, overwrite: bool, batch_bytes: int, inputs: Sequence[PathLike]) -> Path:
    writer = ChunkedGraphWriter(out_dir, num_chunks=num_chunks, edge_format=edge_format,
                                graph_name=graph_name, overwrite=overwrite,
                                inputs=[*inputs, *(s.path for s in sources),
                                        *(p for feats in node_feats.values() for p in feats.values())])
    for ntype, n in counts.items():
        writer.add_node_type(ntype, n)
    for source in sources:
        sink = writer.relation(source.etype, source.rows, source.features)
        for src, dst, feats, _ in source.batches():
            sink.write(src, dst, feats)
        sink.close()
    for ntype, feats in node_feats.items():
        for name, path in feats.items():
            values = _npy(path)
            if values.ndim < 1:
                raise InputError(path, "holds a single value, not one row per node")
            try:
                sink = writer.node_feature(ntype, name, values.dtype, values.tail)
            except ValueError as e:
                raise InputError(path, str(e)) from None
            step = _rows_per_batch(values.dtype.itemsize * values.row_items, batch_bytes)
            for a in range(0, len(values), step):
                sink.write(values.rows(a, min(len(values), a + step)))
            sink.close()
    return writer.finish()


# ----------------------------------------------------------------------------- (c) edge lists


def chunk_edge_lists(edge_files: Mapping[EdgeKey, PathLike], out_dir: PathLike, *,
                     num_nodes: Optional[Mapping[str, int]] = None,
                     node_features: Optional[Mapping[Union[str, Tuple[str, str]], PathLike]] = None,
                     delimiter: str = ",", header: bool = False, num_chunks: int = 4,
                     edge_format: str = "csv", graph_name: str = "graph", overwrite: bool = False,
                     batch_bytes: int = DEFAULT_BATCH_BYTES,
                     notes: Optional[Callable[[str], None]] = None) -> Path:
    """Chunk one edge list per relation (CSV, or Parquet by its .parquet/.pq name); return
    metadata.json's path.

    The endpoints are the first two columns (Parquet: `src` and `dst` if present); every
    further column is an edge feature, named by the CSV header (`header=True`) or the
    Parquet column, else `f2`, `f3`, ... A Parquet list column of equal-length lists is a
    2-D feature. `node_features` maps (ntype, name) or "ntype/name" to a .npy file. Node
    types are taken in order of first mention (`num_nodes`, then the edge types); counts
    come from `num_nodes`, a node feature's rows, or the largest endpoint + 1 (noted).
    """
    say = _say(notes)
    if not edge_files:
        raise InputError(None, "no edge list given")
    sources: List[_EdgeSource] = []
    ntypes: Dict[str, None] = dict.fromkeys(num_nodes or {})
    for key, path in edge_files.items():
        etype = ":".join(key) if isinstance(key, tuple) else str(key)
        parts = etype.split(":")
        if len(parts) != 3 or not all(parts):
            raise InputError(None, f"edge type {etype!r} is not a canonical 'src:rel:dst' edge type")
        for problem in (name_problem(parts[0], "node type"), name_problem(parts[1], "relation"),
                        name_problem(parts[2], "node type")):
            if problem:
                raise InputError(None, f"edge type {etype!r}: {problem}")
        ntypes.update(dict.fromkeys((parts[0], parts[2])))
        path = Path(path)
        if not path.is_file():
            raise InputError(path, "file does not exist")
        if path.suffix.lower() in (".parquet", ".pq"):
            sources.append(_parquet_edge_source(etype, path, batch_bytes))
        else:
            sources.append(_csv_edge_source(etype, path, delimiter, header, batch_bytes))
    if len({s.etype for s in sources}) != len(sources):
        raise InputError(None, "an edge type is given twice")
    node_feats: Dict[str, Dict[str, Path]] = {}
    for key, path in (node_features or {}).items():
        if isinstance(key, tuple):
            ntype, name = key
        else:
            ntype, _, name = str(key).partition("/")
        problem = name_problem(ntype, "node type") or name_problem(name, "feature")
        if problem:
            raise InputError(None, f"node feature {key!r}: {problem}")
        ntypes.setdefault(ntype, None)
        node_feats.setdefault(ntype, {})[name] = Path(path)
        if not Path(path).is_file():
            raise InputError(path, "file does not exist")
    counts = _node_counts(list(ntypes), sources, node_feats, dict(num_nodes or {}), say)
    return _write_sources(out_dir, counts, sources, node_feats, num_chunks=num_chunks, edge_format=edge_format,
                          graph_name=graph_name, overwrite=overwrite, batch_bytes=batch_bytes, inputs=[])


def _feature_columns(batch: pa.RecordBatch, names: Sequence[str], path: Path, first_row: int) -> Dict[str, np.ndarray]:
    out = {}
    for name in names:
        col = batch.column(name)
        if col.null_count:
            bad = int(np.flatnonzero(np.asarray(col.is_null()))[0])
            raise InputError(path, f"column '{name}' has an empty value at row {first_row + bad}")
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type) or pa.types.is_fixed_size_list(col.type):
            lengths = np.asarray(pc.list_value_length(col))
            if len(lengths) and (lengths != lengths[0]).any():
                bad = int(np.flatnonzero(lengths != lengths[0])[0])
                raise InputError(path, f"column '{name}': row {first_row + bad} has {lengths[bad]} values, "
                                       f"the rows before {lengths[0]}")
            width = int(lengths[0]) if len(lengths) else 0
            out[name] = col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), width)
        else:
            out[name] = col.to_numpy(zero_copy_only=False)
    return out


def _endpoint_columns(batch: pa.RecordBatch, src: str, dst: str) -> Tuple[np.ndarray, np.ndarray]:
    return (batch.column(src).to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
            batch.column(dst).to_numpy(zero_copy_only=False).astype(np.int64, copy=False))


def _numpy_type(atype: pa.DataType, path: Path, name: str) -> Tuple[np.dtype, bool]:
    """(numpy dtype, is a list) of a feature column, or InputError for text and the like."""
    is_list = pa.types.is_list(atype) or pa.types.is_large_list(atype) or pa.types.is_fixed_size_list(atype)
    value = atype.value_type if is_list else atype
    if pa.types.is_boolean(value):
        return np.dtype(bool), is_list
    if pa.types.is_integer(value) or pa.types.is_floating(value):
        return np.dtype(value.to_pandas_dtype()), is_list
    raise InputError(path, f"column '{name}' holds {atype} values: edge features must be numbers or booleans")


def _first_pass(source: _EdgeSource, feature_names: Sequence[str]) -> None:
    """Count rows, find the largest endpoints, the features' row shapes; refuse negatives."""
    shapes: Dict[str, Tuple[int, ...]] = {}
    for src, dst, feats, first in source.batches():
        source.rows = first + len(src)
        if len(src):
            _check_negative(src, dst, source.path, source.etype, first)
            source.max_src = max(source.max_src, int(src.max()))
            source.max_dst = max(source.max_dst, int(dst.max()))
        for name in feature_names:
            shape = feats[name].shape[1:]
            if name in shapes and shape != shapes[name] and len(src):
                raise InputError(source.path, f"column '{name}': rows of shape {shape} from row {first} on, "
                                              f"{shapes[name]} before")
            if len(src) or name not in shapes:
                shapes[name] = shape
    for name in feature_names:
        dtype, _ = source.features[name]
        source.features[name] = (dtype, shapes.get(name, ()))


def _parquet_edge_source(etype: str, path: Path, batch_bytes: int) -> _EdgeSource:
    from .readers import parquet_data_columns
    try:
        pf = pq.ParquetFile(str(path))
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"not a readable Parquet file: {e}") from None
    schema = pf.schema_arrow
    names = [schema.names[i] for i in parquet_data_columns(schema, path)]
    if "src" in names and "dst" in names:
        src_col, dst_col = "src", "dst"
    elif len(names) >= 2:
        src_col, dst_col = names[0], names[1]
    else:
        raise InputError(path, f"needs two endpoint columns, found {names}")
    for col in (src_col, dst_col):
        if not pa.types.is_integer(schema.field(col).type):
            raise InputError(path, f"endpoint column '{col}' holds {schema.field(col).type}, not integers")
    feature_names = [n for n in names if n not in (src_col, dst_col)]
    features = {n: (_numpy_type(schema.field(n).type, path, n)[0], ()) for n in feature_names}
    rows = pf.metadata.num_rows
    stored = sum(pf.metadata.row_group(g).total_byte_size for g in range(pf.metadata.num_row_groups))
    step = _rows_per_batch(max(16, stored // max(1, rows)), batch_bytes)

    def batches() -> Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]:
        first = 0
        # pyarrow's defaults pre-buffer whole row groups and decode several at once on threads
        # (measured: the whole of a 72 MB file held at once); one row group at a time, read
        # through a small buffer, is what bounds memory here.
        reader = pq.ParquetFile(str(path), memory_map=False, pre_buffer=False, buffer_size=1 << 20)
        try:
            for batch in reader.iter_batches(batch_size=step, columns=[src_col, dst_col, *feature_names],
                                             use_threads=False):
                for col in (src_col, dst_col):
                    if batch.column(col).null_count:
                        bad = int(np.flatnonzero(np.asarray(batch.column(col).is_null()))[0])
                        raise InputError(path, f"endpoint column '{col}' has an empty value at row {first + bad}")
                src, dst = _endpoint_columns(batch, src_col, dst_col)
                yield src, dst, _feature_columns(batch, feature_names, path, first), first
                first += len(src)
        except pa.ArrowException as e:
            raise InputError(path, f"cannot read: {e}") from None
        finally:
            reader.close()

    source = _EdgeSource(etype, path, rows, features, batches=batches)
    _first_pass(source, feature_names)
    return source


def _csv_edge_source(etype: str, path: Path, delimiter: str, header: bool, batch_bytes: int) -> _EdgeSource:
    """A CSV edge list, read with pyarrow's streaming reader. Column types are fixed by the
    first pass: pyarrow infers them from the first block, so a feature column whose first
    block looks like integers and later holds decimals is read as float64 from the start."""
    if len(delimiter) != 1:
        raise InputError(None, f"the CSV delimiter must be one character, got {delimiter!r}")
    empty = path.stat().st_size == 0
    # pyarrow's streaming CSV reader keeps about 32 blocks read ahead (measured with pyarrow
    # 26, threads or not): blocks of batch_bytes / 32 hold the reader near batch_bytes.
    block = int(min(max(batch_bytes // 32, 1 << 16), 1 << 30))
    names: List[str] = []
    if not empty:
        names = _csv_names(path, delimiter, header, block)
        if len(names) < 2:
            raise InputError(path, f"needs at least two columns (source, destination), found {len(names)}")
    feature_names = names[2:]
    types: Dict[str, pa.DataType] = {n: pa.int64() for n in names[:2]}

    def open_reader(column_types: Mapping[str, pa.DataType]):
        read = pacsv.ReadOptions(block_size=block, autogenerate_column_names=not header, use_threads=False)
        convert = pacsv.ConvertOptions(column_types=dict(column_types), strings_can_be_null=False)
        try:
            return pacsv.open_csv(str(path), read_options=read,
                                  parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=convert)
        except pa.ArrowException as e:
            raise InputError(path, _csv_problem(e)) from None

    def batches_with(column_types: Mapping[str, pa.DataType]):
        def batches() -> Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]:
            if empty:
                return
            first = 0
            reader = open_reader(column_types)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except pa.ArrowException as e:
                    raise _CsvTypeError(path, _csv_problem(e), first) from None
                src, dst = _endpoint_columns(batch, names[0], names[1])
                yield src, dst, _feature_columns(batch, feature_names, path, first), first
                first += len(src)
        return batches

    features: Dict[str, Tuple[np.dtype, Tuple[int, ...]]] = {}
    source = _EdgeSource(etype, path)
    if not empty:
        reader = open_reader(types)
        for name in feature_names:
            features[name] = (_numpy_type(reader.schema.field(name).type, path, name)[0], ())
            types[name] = reader.schema.field(name).type
    source.features = features
    source.batches = batches_with(types)
    try:
        _first_pass(source, feature_names)
    except _CsvTypeError as e:
        if not feature_names:
            raise InputError(path, e.problem) from None
        # A later block did not fit the type inferred from the first: read the features as
        # float64, which holds both integers and decimals.
        retry = dict(types, **{n: pa.float64() for n in feature_names if pa.types.is_integer(types[n])})
        if retry == types:
            raise InputError(path, e.problem) from None
        types = retry
        source.features = {n: (np.dtype(types[n].to_pandas_dtype()) if n in retry else features[n][0], ())
                           for n in feature_names}
        source.batches = batches_with(types)
        source.rows, source.max_src, source.max_dst = 0, -1, -1
        try:
            _first_pass(source, feature_names)
        except _CsvTypeError as e2:
            raise InputError(path, e2.problem) from None
    return source


class _CsvTypeError(InputError):
    """A block pyarrow could not convert with the column types given (caught to retry)."""

    def __init__(self, path: Path, problem: str, row: int) -> None:
        super().__init__(path, problem)
        self.row = row


def _csv_names(path: Path, delimiter: str, header: bool, block: int) -> List[str]:
    read = pacsv.ReadOptions(block_size=block, autogenerate_column_names=not header, use_threads=False)
    try:
        reader = pacsv.open_csv(str(path), read_options=read, parse_options=pacsv.ParseOptions(delimiter=delimiter))
    except pa.ArrowException as e:
        raise InputError(path, _csv_problem(e)) from None
    return list(reader.schema.names)


def _csv_problem(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return f"not a valid edge list: {text}"


# ----------------------------------------------------------------------------- command line


def _pairs(items: Sequence[str], what: str, split_last: bool = False) -> List[Tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.rpartition("=") if split_last else item.partition("=")
        if not sep or not key or not value:
            raise InputError(None, f"{what} takes KEY=VALUE, got {item!r}")
        out.append((key, value))
    return out


def run_chunk(args: Any) -> Path:
    """The `distpart chunk` subcommand (arguments as cli.py parses them); returns metadata.json."""
    num_nodes: Dict[str, int] = {}
    for key, value in _pairs(args.num_nodes, "--num-nodes", split_last=True):
        try:
            num_nodes[key] = int(value)
        except ValueError:
            raise InputError(None, f"--num-nodes {key}={value}: not an integer") from None
        if num_nodes[key] < 0:
            raise InputError(None, f"--num-nodes {key}={value}: must be >= 0")
    common = dict(num_chunks=args.num_chunks, edge_format=args.edge_format, overwrite=args.overwrite)
    try:
        if args.ogb is not None:
            if args.edges or args.node_feat:
                raise InputError(None, "--ogb reads the whole dataset: do not add --edges or --node-feat")
            return chunk_ogb(args.ogb, args.out_dir, num_nodes=num_nodes, graph_name=args.graph_name, **common)
        if not args.edges:
            raise InputError(None, "give --ogb DIR, or one --edges SRC:REL:DST=FILE per edge type")
        return chunk_edge_lists(dict(_pairs(args.edges, "--edges")), args.out_dir, num_nodes=num_nodes,
                                node_features=dict(_pairs(args.node_feat, "--node-feat")),
                                delimiter=args.delimiter, header=args.header,
                                graph_name=args.graph_name or "graph", **common)
    except ValueError as e:  # a name or option the writer refused
        raise InputError(None, str(e)) from None

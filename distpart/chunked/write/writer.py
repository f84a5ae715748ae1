"""`ChunkedGraphWriter`: a chunked graph folder written type by type, metadata.json last.

Also owns the folder rule (`prepare_folder`): written only when new or empty, or with
`overwrite` when an earlier `distpart chunk` wrote it (its `.distpart-chunked` marker).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Container, Dict, Iterable, List, Mapping, Sequence, Tuple

import numpy as np

from ...errors import InputError
from ..metadata import EDGE_FORMATS
from ..names import NAME_MAX, name_problem
from .files import EXTENSIONS, MARKER, PathLike, NpyChunk, RelationSink, RowSplitter, WRITTEN, open_edge_chunk, chunk_sizes, file_stem


def check_feature_dtype(dtype: Any, what: str) -> np.dtype:
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
                 features: Mapping[str, Tuple[Any, Tuple[int, ...]]] = ()) -> RelationSink:
        """A sink for the `count` edges of canonical edge type `etype` and its features
        ({name: (dtype, row shape)})."""
        check_edge_type(etype, etype, self._nodes, "is not declared")
        if etype in self._edges:
            raise ValueError(f"edge type {etype!r} written twice")
        count = int(count)
        sizes = chunk_sizes(count, self.num_chunks)
        folder = self.out / "edges"
        folder.mkdir(exist_ok=True)
        stem, ext = self._stem(etype), EXTENSIONS[self.edge_format]
        edges = RowSplitter(sizes, lambda c, rows: open_edge_chunk(
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

        return RelationSink(edges, feats, done)

    def node_feature(self, ntype: str, name: str, dtype: Any, tail: Tuple[int, ...] = ()) -> RowSplitter:
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
                          sizes: List[int]) -> RowSplitter:
        problem = name_problem(name, "feature")
        if problem:
            raise ValueError(f"{owner}: {problem}")
        dt = check_feature_dtype(dtype, f"feature {owner}/{name}")
        folder = self.out / group / self._stem(owner)
        folder.mkdir(parents=True, exist_ok=True)
        return RowSplitter(sizes, lambda c, rows: NpyChunk(folder / f"{name}-{c}.npy", rows, dt, tuple(tail)),
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
            for name in WRITTEN:
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


def check_file_names(num_chunks: int, edge_format: str, edges: Mapping[str, Iterable[str]],
                     node_data: Mapping[str, Iterable[str]]) -> None:
    """ValueError naming the first type or feature whose chunk file (or folder) name would be
    longer than a file name can be (NAME_MAX bytes); called before anything is written.
    Names: edges/<src>___<rel>___<dst>-<c><ext>, {node,edge}_data/<type>/<feature>-<c>.npy."""
    last = f"-{max(1, num_chunks) - 1}"
    leaves = [(f"edge type {e!r}", file_stem(e) + last + EXTENSIONS.get(edge_format, "")) for e in edges]
    leaves += [(f"feature {owner}/{name}", name + last + ".npy")
               for group in (edges, node_data) for owner, names in group.items() for name in names]
    leaves += [(f"node type {n!r}", file_stem(n)) for n in node_data]
    for what, leaf in leaves:
        size = len(leaf.encode("utf-8", "surrogatepass"))
        if size > NAME_MAX:
            raise ValueError(f"{what}: its chunk file name {leaf[:40]!r}... would be {size} bytes in UTF-8, "
                             f"and a file name holds at most {NAME_MAX}: choose a shorter name")


def rows_per_batch(row_bytes: int, batch_bytes: int) -> int:
    return max(1, int(batch_bytes) // max(1, int(row_bytes)))


def bytes_per_row(arr: np.ndarray) -> int:
    return int(arr.dtype.itemsize * np.prod(arr.shape[1:], dtype=np.int64))


def check_edge_type(etype: str, given: Any, node_types: Container[str], missing: str) -> None:
    """`etype` must be 'src:rel:dst' with a valid relation name and known node types; errors
    name the edge type as the user `given` it and say why a node type is unknown (`missing`)."""
    parts = etype.split(":")
    if len(parts) != 3:
        raise ValueError(f"edge type {given!r} is not a canonical 'src:rel:dst' edge type")
    problem = name_problem(parts[1], "relation")
    if problem:
        raise ValueError(f"edge type {etype!r}: {problem}")
    for end in (parts[0], parts[2]):
        if end not in node_types:
            raise ValueError(f"edge type {etype!r} names node type {end!r}, which {missing}")

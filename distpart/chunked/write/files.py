"""The chunk files of DGL's chunked format and what cuts a stream of rows into them.

Owns the file naming (`file_stem`, `EXTENSIONS`), the even split of rows over chunks
(`chunk_sizes`), one writer per chunk file kind (.npy rows, CSV and Parquet edges), and
`RowSplitter`/`RelationSink`, which append batches at chunk boundaries. `synthetic` uses
the shared pieces too, so both write identical files.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ...errors import InputError
from ..metadata import EDGE_FORMATS



PathLike = Union[str, "os.PathLike[str]"]
EdgeKey = Union[str, Tuple[str, str, str]]

MARKER = ".distpart-chunked"
EXTENSIONS = {"csv": ".csv", "numpy": ".npy", "parquet": ".parquet", "hdf5": ".h5"}
DEFAULT_BATCH_BYTES = 64 << 20
HOMOGENEOUS_NTYPE = "_N"   # DGL's name for the node type of a one-type graph
WRITTEN = ("metadata.json", "edges", "node_data", "edge_data")


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
    chunk = open_edge_chunk(path, fmt, len(src), delimiter)
    chunk.write(np.asarray(src), np.asarray(dst))
    chunk.close()


# ----------------------------------------------------------------------------- chunk files


class NpyChunk:
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


class _ArrowEdgeChunk:
    """Two int64 columns (src, dst) through a pyarrow writer: DGL's CSV edge files (no header,
    the given delimiter) and Parquet edge files."""

    def __init__(self, path: Path, writer) -> None:
        self.path = path
        self._writer = writer

    def write(self, src: np.ndarray, dst: np.ndarray) -> None:
        self._writer.write_table(_edge_table(src, dst))

    def close(self) -> None:
        self._writer.close()


_EDGE_SCHEMA = pa.schema([("src", pa.int64()), ("dst", pa.int64())])


def _edge_table(src: np.ndarray, dst: np.ndarray) -> pa.Table:
    return pa.table([pa.array(np.asarray(src, dtype=np.int64)), pa.array(np.asarray(dst, dtype=np.int64))],
                    schema=_EDGE_SCHEMA)


def open_edge_chunk(path: Path, fmt: str, rows: int, delimiter: str):
    if fmt == "numpy":
        return NpyChunk(path, rows, np.dtype(np.int64), (2,))
    if fmt == "parquet":
        return _ArrowEdgeChunk(path, pq.ParquetWriter(str(path), _EDGE_SCHEMA))
    if fmt == "csv":
        options = pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none")
        return _ArrowEdgeChunk(path, pacsv.CSVWriter(str(path), _EDGE_SCHEMA, write_options=options))
    raise ValueError(f"edge format must be one of {EDGE_FORMATS}, got {fmt!r}")


class RowSplitter:
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


class RelationSink:
    """The edges of one edge type and its edge features, written side by side in the same
    batches (a row of an edge list carries both)."""

    def __init__(self, edges: RowSplitter, feats: Dict[str, RowSplitter], on_close: Callable[[], None]) -> None:
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

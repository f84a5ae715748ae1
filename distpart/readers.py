"""Reading chunk files: edge lists (CSV, NumPy, Parquet) and features (NumPy, Parquet, HDF5).

The unit of reading is a *piece*: a slice of one chunk file. Every list of chunk files is
seen as one concatenated array and cut into one contiguous block per rank, so the work is
balanced whatever the number and sizes of the files. NumPy, Parquet and HDF5 are sliced by
row; CSV cannot be indexed by row, so it is sliced by byte and each piece starts at the
first line that begins inside it (its row offset is found afterwards by a prefix sum over
ranks). Nothing here talks to MPI.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np

from .errors import InputError
from .metadata import ChunkFiles


@dataclass(frozen=True)
class Piece:
    """Units [start, stop) of file `file` (rows, or bytes for CSV) in a ChunkFiles list."""

    file: int
    start: int
    stop: int


def block_bounds(total: int, nranks: int) -> np.ndarray:
    """Boundaries of `nranks` near-equal contiguous blocks of [0, total), int64, length nranks+1."""
    return (np.arange(nranks + 1, dtype=np.int64) * total) // nranks


def pieces_of_block(sizes: Sequence[int], rank: int, nranks: int) -> List[Piece]:
    """The pieces of rank's block of the concatenation of files with the given sizes."""
    offsets = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])
    lo, hi = block_bounds(int(offsets[-1]), nranks)[rank:rank + 2]
    out = []
    for i, size in enumerate(sizes):
        a, b = max(lo, offsets[i]), min(hi, offsets[i] + size)
        if a < b:
            out.append(Piece(i, int(a - offsets[i]), int(b - offsets[i])))
    return out


# ---------------------------------------------------------------- CSV of integers

def _line_start_at_or_after(mm, pos: int, size: int) -> int:
    """Offset of the first line that starts at or after `pos` (a line starts after '\\n')."""
    if pos <= 0:
        return 0
    probe = pos - 1
    while probe < size:
        window = mm.read_at(min(1 << 16, size - probe), probe)
        nl = window.find(b"\n")
        if nl >= 0:
            return probe + nl + 1
        probe += len(window)
    return size


def read_csv_ints(path: Path, byte_start: int, byte_stop: int, ncols: int,
                  delimiter: str = " ") -> np.ndarray:
    """Parse the lines that start in [byte_start, byte_stop) of a header-less integer CSV.

    Returns an (n, ncols) int64 array. Raises InputError naming the file for a non-integer
    field or a wrong number of columns.
    """
    import pyarrow as pa

    try:
        mm = pa.memory_map(str(path), "r")
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    with mm:
        size = mm.size()
        a = _line_start_at_or_after(mm, byte_start, size)
        b = size if byte_stop >= size else _line_start_at_or_after(mm, byte_stop, size)
        if b <= a:
            return np.empty((0, ncols), dtype=np.int64)
        mm.seek(a)
        try:
            table = _parse_csv(mm.read_buffer(b - a), ncols, delimiter)  # zero-copy view of the map
        except pa.ArrowInvalid as e:
            line = _first_bad_line(mm, a, b, ncols, delimiter)
            raise InputError(path, f"bad CSV row{line}: {str(e).splitlines()[0]}") from None
        if table.num_rows and any(col.null_count for col in table.columns):
            line = _first_bad_line(mm, a, b, ncols, delimiter)
            raise InputError(path, f"bad CSV row{line}: empty field (expected integers)")
    out = np.empty((table.num_rows, ncols), dtype=np.int64)
    for i, col in enumerate(table.columns):
        out[:, i] = col.to_numpy()
    return out


def _first_bad_line(mm, a: int, b: int, ncols: int, delimiter: str) -> str:
    """' (line N: ...)' for the first line in [a, b) that pyarrow rejects, for the message.

    Runs only after a parse failure. The failing range is halved until one line is left,
    each half parsed by pyarrow itself, so "bad" means exactly what the reader rejects; the
    cost is about twice one parse of the piece.
    """
    lines = mm.read_at(b - a, a).split(b"\n")
    lo, hi = 0, len(lines)
    if _parses(b"\n".join(lines[lo:hi]), ncols, delimiter):
        return ""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if not _parses(b"\n".join(lines[lo:mid]), ncols, delimiter):
            hi = mid
        else:
            lo = mid
    number = _count_newlines(mm, a) + lo + 1
    return f" (line {number}: {lines[lo][:60].decode('utf-8', 'replace').rstrip()!r})"


def _parse_csv(data, ncols: int, delimiter: str):
    """A header-less CSV of `ncols` int64 columns as a pyarrow Table (raises ArrowInvalid)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    names = [f"c{i}" for i in range(ncols)]
    return pacsv.read_csv(pa.BufferReader(data),
                          read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
                          parse_options=pacsv.ParseOptions(delimiter=delimiter),
                          convert_options=pacsv.ConvertOptions(column_types={n: pa.int64() for n in names}))


def _parses(data: bytes, ncols: int, delimiter: str) -> bool:
    import pyarrow as pa
    if not data.strip():
        return True
    try:
        table = _parse_csv(data, ncols, delimiter)
    except pa.ArrowInvalid:
        return False
    return not any(col.null_count for col in table.columns)


def _count_newlines(mm, stop: int, window: int = 64 << 20) -> int:
    return sum(mm.read_at(min(window, stop - pos), pos).count(b"\n") for pos in range(0, stop, window))


# ---------------------------------------------------------------- edges

def edge_file_sizes(files: ChunkFiles) -> List[int]:
    """Units per file for cutting edge files into pieces: rows, or bytes for CSV."""
    if files.fmt.name == "csv":
        return [_stat_size(p) for p in files.paths]
    return [_edge_rows(files, p) for p in files.paths]


def _stat_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None


def _edge_rows(files: ChunkFiles, path: Path) -> int:
    if files.fmt.name == "numpy":
        arr = _open_npy(path)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise InputError(path, f"edge array must have shape (num_edges, 2), found {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise InputError(path, f"edge array must hold integers, found dtype {arr.dtype}")
        return int(arr.shape[0])
    pf = _open_parquet(path)
    schema = pf.schema_arrow
    if len(schema) != 2:
        raise InputError(path, f"edge table must have 2 columns (src, dst), found {len(schema)}")
    import pyarrow as pa
    for field in schema:
        if not pa.types.is_integer(field.type):
            raise InputError(path, f"edge column '{field.name}' must be integer, found {field.type}")
    return int(pf.metadata.num_rows)


def read_edge_piece(files: ChunkFiles, piece: Piece) -> Tuple[np.ndarray, np.ndarray]:
    """(src, dst) int64 arrays of one piece, in file row order."""
    path = files.paths[piece.file]
    name = files.fmt.name
    if name == "csv":
        arr = read_csv_ints(path, piece.start, piece.stop, 2, files.fmt.delimiter)
        return arr[:, 0].copy(), arr[:, 1].copy()
    if name == "numpy":
        arr = np.asarray(_open_npy(path)[piece.start:piece.stop])
        return arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
    table = _parquet_rows(_open_parquet(path), path, piece.start, piece.stop)
    return (table.column(0).to_numpy().astype(np.int64, copy=False),
            table.column(1).to_numpy().astype(np.int64, copy=False))


# ---------------------------------------------------------------- features

class FeatureSource:
    """One feature's chunk files as a single row-addressable array (rows = node/edge IDs)."""

    def __init__(self, files: ChunkFiles) -> None:
        self.files = files
        shapes = [self._header(p) for p in files.paths]
        if not shapes:
            raise InputError(files.where, "feature has no data files")
        first_dtype, first_tail = shapes[0][1], shapes[0][2]
        for path, (_, dtype, tail) in zip(files.paths, shapes):
            if dtype != first_dtype or tail != first_tail:
                raise InputError(path, f"chunk has dtype {dtype} and row shape {tail}, but the "
                                       f"first chunk has {first_dtype} and {first_tail}")
        self.dtype: np.dtype = first_dtype
        self.tail_shape: Tuple[int, ...] = first_tail
        self.file_rows = [s[0] for s in shapes]
        self.offsets = np.concatenate([[0], np.cumsum(self.file_rows, dtype=np.int64)])

    @classmethod
    def expecting(cls, files: ChunkFiles, rows: int, owner: str) -> "FeatureSource":
        """Open a feature whose files must hold exactly `rows` rows (one per item of `owner`)."""
        source = cls(files)
        if source.rows != rows:
            raise InputError(files.where, f"feature has {source.rows} rows in its files but {owner} "
                                          f"has {rows} items")
        return source

    @property
    def rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def row_bytes(self) -> int:
        return int(self.dtype.itemsize * int(np.prod(self.tail_shape, dtype=np.int64)))

    def _header(self, path: Path) -> Tuple[int, np.dtype, Tuple[int, ...]]:
        name = self.files.fmt.name
        if name == "numpy":
            arr = _open_npy(path)
            if arr.ndim < 1:
                raise InputError(path, "feature array must have at least one dimension")
            return int(arr.shape[0]), arr.dtype, tuple(arr.shape[1:])
        if name == "hdf5":
            with _open_h5(path) as f:
                ds = self._dataset(f, path)
                if ds.ndim < 1:
                    raise InputError(path, "feature dataset must have at least one dimension")
                return int(ds.shape[0]), ds.dtype, tuple(ds.shape[1:])
        pf = _open_parquet(path)
        return int(pf.metadata.num_rows), *_parquet_feature_layout(pf, path)

    def _dataset(self, f, path: Path):
        key = self.files.fmt.dataset
        if key not in f:
            raise InputError(path, f"HDF5 file has no dataset {key!r}")
        return f[key]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) of the concatenated feature, as a C-contiguous array."""
        out = np.empty((max(stop - start, 0), *self.tail_shape), dtype=self.dtype)
        first = int(np.searchsorted(self.offsets, start, side="right")) - 1
        pos = start
        i = max(first, 0)
        while pos < stop:
            a, b = pos - int(self.offsets[i]), min(stop, int(self.offsets[i + 1])) - int(self.offsets[i])
            if b > a:
                out[pos - start: pos - start + b - a] = self._read_file(i, a, b)
                pos += b - a
            i += 1
        return out

    def _read_file(self, i: int, a: int, b: int) -> np.ndarray:
        path = self.files.paths[i]
        name = self.files.fmt.name
        if name == "numpy":
            return _open_npy(path)[a:b]
        if name == "hdf5":
            with _open_h5(path) as f:
                return self._dataset(f, path)[a:b]
        table = _parquet_rows(_open_parquet(path), path, a, b)
        cols = []
        for cname, col in zip(table.column_names, table.columns):
            if col.null_count:
                raise InputError(path, f"column '{cname}' has null values")
            cols.append(col.to_numpy(zero_copy_only=False))
        flat = np.stack(cols, axis=1) if cols else np.empty((b - a, 0), self.dtype)
        return flat.astype(self.dtype, copy=False).reshape((b - a, *self.tail_shape))


def _parquet_feature_layout(pf, path: Path) -> Tuple[np.dtype, Tuple[int, ...]]:
    """(dtype, row shape) of a Parquet feature: one column per flattened trailing element.

    DGL stores the array's shape in the schema metadata under b"shape"; without it the file
    is read as a 2-D array, as DGL's own reader does.
    """
    import pyarrow as pa
    schema = pf.schema_arrow
    types = {f.type for f in schema}
    if len(types) != 1:
        raise InputError(path, f"feature columns must share one type, found {sorted(map(str, types))}")
    (atype,) = types
    if not (pa.types.is_integer(atype) or pa.types.is_floating(atype) or pa.types.is_boolean(atype)):
        raise InputError(path, f"feature columns must be numeric or bool, found {atype}")
    dtype = np.dtype(bool) if pa.types.is_boolean(atype) else np.dtype(atype.to_pandas_dtype())
    meta = schema.metadata or {}
    if b"shape" in meta:
        try:
            shape = tuple(int(s) for s in ast.literal_eval(meta[b"shape"].decode()))
        except (ValueError, SyntaxError, TypeError):
            raise InputError(path, f"unreadable 'shape' metadata {meta[b'shape']!r}") from None
        if not shape or int(np.prod(shape[1:], dtype=np.int64)) != len(schema):
            raise InputError(path, f"'shape' metadata {shape} does not match {len(schema)} columns")
        return dtype, shape[1:]
    return dtype, (len(schema),)


# ---------------------------------------------------------------- file opening

def _open_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (ValueError, OSError, EOFError) as e:
        raise InputError(path, f"not a readable .npy file: {e}") from None


def _open_parquet(path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        return pq.ParquetFile(str(path), memory_map=True)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"not a readable Parquet file: {e}") from None


def _parquet_rows(pf, path: Path, a: int, b: int):
    """Rows [a, b) of a Parquet file, reading only the row groups that overlap them."""
    import pyarrow as pa
    md = pf.metadata
    starts = np.concatenate([[0], np.cumsum([md.row_group(i).num_rows for i in range(md.num_row_groups)])])
    groups = [i for i in range(md.num_row_groups) if starts[i] < b and starts[i + 1] > a]
    try:
        table = pf.read_row_groups(groups) if groups else pf.schema_arrow.empty_table()
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"corrupt Parquet data: {e}") from None
    first = int(starts[groups[0]]) if groups else 0
    return table.slice(a - first, b - a)


def _open_h5(path: Path):
    import h5py
    try:
        return h5py.File(path, "r")
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except OSError as e:
        raise InputError(path, f"not a readable HDF5 file: {e}") from None

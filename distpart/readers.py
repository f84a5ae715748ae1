"""Reading chunk files: edge lists (CSV, NumPy, Parquet) and features (NumPy, Parquet, CSV, HDF5).

The unit of reading is a *piece*: a slice of one chunk file. Every list of chunk files is
seen as one concatenated array and cut into one contiguous block per rank, so the work is
balanced whatever the number and sizes of the files. NumPy, Parquet and HDF5 are sliced by
row; CSV cannot be indexed by row, so it is sliced by byte and each piece starts at the
first line that begins inside it (its row offset is found afterwards by a prefix sum over
ranks). Nothing here talks to MPI.

A feature is read through a `FeatureSource`, one row-addressable array over its files.
Parquet is read a row group at a time, data columns only (pandas index columns are not
data): a small row group is decoded whole, a large one streamed in record batches, and the
source keeps the open file and the part it stopped in, so a rank reading its block in
consecutive batches, as dispatch does, decodes only the row groups that overlap its rows,
each once. A CSV feature is scanned once per process (width, rows, int64 or float64, as
DGL's pyarrow-based reader infers) and cut into windows of whole lines that are then read
like row groups.
"""
from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

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


def split_pieces(pieces: Sequence[Piece], max_units: int) -> List[Piece]:
    """The same ranges cut into pieces of at most `max_units` units each, in order."""
    out = []
    for p in pieces:
        for a in range(p.start, p.stop, max(1, max_units)):
            out.append(Piece(p.file, a, min(p.stop, a + max(1, max_units))))
    return out


# ---------------------------------------------------------------- CSV

def _line_start_at_or_after(f, pos: int, size: int) -> int:
    """Offset of the first line that starts at or after `pos` (a line starts after '\\n')."""
    if pos <= 0:
        return 0
    probe = pos - 1
    while probe < size:
        window = f.read_at(min(1 << 16, size - probe), probe)
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


def _find_bad_line(f, a: int, b: int, ncols: int, delimiter: str, kind: str = "int64",
                   null_values: Optional[List[str]] = None) -> Optional[Tuple[int, bytes]]:
    """(line number in the file, line) of the first line in [a, b) that pyarrow rejects.

    Runs only after a parse failure. The failing range is halved until one line is left,
    each half parsed by pyarrow itself, so "bad" means exactly what the reader rejects; the
    cost is about twice one parse of the piece.
    """
    lines = f.read_at(b - a, a).split(b"\n")
    lo, hi = 0, len(lines)
    if _parses(b"\n".join(lines[lo:hi]), ncols, delimiter, kind, null_values):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if not _parses(b"\n".join(lines[lo:mid]), ncols, delimiter, kind, null_values):
            hi = mid
        else:
            lo = mid
    return _count_newlines(f, a) + lo + 1, lines[lo]


def _first_bad_line(f, a: int, b: int, ncols: int, delimiter: str, kind: str = "int64",
                    null_values: Optional[List[str]] = None) -> str:
    """' (line N: ...)' for the first line in [a, b) that pyarrow rejects, for the message."""
    found = _find_bad_line(f, a, b, ncols, delimiter, kind, null_values)
    if found is None:
        return ""
    number, line = found
    return f" (line {number}: {line[:60].decode('utf-8', 'replace').rstrip()!r})"


def _parse_csv(data, ncols: Optional[int], delimiter: str, kind: Optional[str] = "int64",
               null_values: Optional[List[str]] = None):
    """A header-less CSV as a pyarrow Table (raises ArrowInvalid).

    `ncols` None takes the column count from the first line; `kind` (a pyarrow type alias)
    is every column's type, None infers each. `null_values` None keeps pyarrow's null
    spellings (edges report those fields as empty); features pass [] so that "nan" reads as
    NaN and an empty field fails the conversion instead of becoming a null.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv
    names = None if ncols is None else [f"c{i}" for i in range(ncols)]
    types = {n: pa.type_for_alias(kind) for n in names} if names and kind else {}
    nulls = {} if null_values is None else {"null_values": null_values}
    convert = pacsv.ConvertOptions(column_types=types, **nulls)
    read = pacsv.ReadOptions(column_names=names, autogenerate_column_names=names is None, use_threads=False)
    return pacsv.read_csv(pa.BufferReader(data), read_options=read,
                          parse_options=pacsv.ParseOptions(delimiter=delimiter),
                          convert_options=convert)


def _parses(data: bytes, ncols: int, delimiter: str, kind: str = "int64",
            null_values: Optional[List[str]] = None) -> bool:
    import pyarrow as pa
    if not data.strip():
        return True
    try:
        table = _parse_csv(data, ncols, delimiter, kind, null_values)
    except pa.ArrowInvalid:
        return False
    return not any(col.null_count for col in table.columns)


def _count_newlines(f, stop: int, window: int = 64 << 20) -> int:
    return sum(f.read_at(min(window, stop - pos), pos).count(b"\n") for pos in range(0, stop, window))


# ---------------------------------------------------------------- CSV features

# Bytes of CSV text parsed at once when reading a CSV feature: the unit decoded whole, as a
# row group is for Parquet. Big enough that pyarrow's per-call cost vanishes, small enough
# that a window's numbers (about as many bytes as its text) are a minor part of a rank's memory.
CSV_WINDOW_BYTES = 8 << 20


@dataclass(frozen=True)
class CsvLayout:
    """What one scan of a header-less numeric CSV feature file found.

    Window k is bytes [window_bytes[k], window_bytes[k + 1]) of the file, whole lines, and
    holds rows [window_rows[k], window_rows[k + 1]). Rows are then read a window at a time.
    """

    ncols: Optional[int]        # None: the file holds no rows
    floating: bool              # some field is not an integer: the file reads as float64
    window_bytes: np.ndarray    # int64, one more than the windows
    window_rows: np.ndarray     # int64, one more than the windows

    @property
    def rows(self) -> int:
        return int(self.window_rows[-1])


# Scans by (file identity, delimiter, window): every FeatureSource of one feature in a
# process (validate, guards, dispatch, verify) needs the row count and dtype, and CSV has no
# header to read them from cheaply.
_CSV_LAYOUTS: Dict[tuple, CsvLayout] = {}


def csv_feature_layout(path: Path, delimiter: str = ",", window_bytes: Optional[int] = None) -> CsvLayout:
    """Scan a CSV feature file (once per process): width, row count, int64 or float64.

    As DGL's array_readwriter reads CSV (pyarrow, no header, one row per line, type
    inference): a column is int64 if every field in it is an integer, and the file is
    float64 if any column is not. Fields must be numbers ("nan" and "inf" are); a bad field
    or a line with another number of fields is an InputError naming the file and line.
    """
    window = window_bytes or CSV_WINDOW_BYTES
    st = _stat(path)
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, delimiter, window)
    layout = _CSV_LAYOUTS.get(key)
    if layout is None:
        layout = _CSV_LAYOUTS[key] = _scan_csv(path, delimiter, window)
    return layout


def _scan_csv(path: Path, delimiter: str, window: int) -> CsvLayout:
    import pyarrow as pa
    with _open_text(path) as f:
        size = f.size()
        ncols = _csv_width(f, path, size, delimiter)
        if ncols is None:
            return CsvLayout(None, False, np.array([0, size], np.int64), np.zeros(2, np.int64))
        bounds, rows, floating = [0], [0], False
        while bounds[-1] < size:
            a = bounds[-1]
            b = size if a + window >= size else _line_start_at_or_after(f, a + window, size)
            try:
                table = _parse_csv(f.read_at(b - a, a), ncols, delimiter, None, null_values=[])
            except pa.ArrowInvalid as e:
                raise _csv_feature_error(f, path, a, b, ncols, delimiter, str(e)) from None
            for j, atype in enumerate(table.schema.types if table.num_rows else []):
                if not (pa.types.is_integer(atype) or pa.types.is_floating(atype)):
                    raise _csv_feature_error(f, path, a, b, ncols, delimiter,
                                             f"column {j} holds {atype}, not numbers")
                floating |= pa.types.is_floating(atype)
            bounds.append(b)
            rows.append(rows[-1] + table.num_rows)
    return CsvLayout(ncols, floating, np.array(bounds, np.int64), np.array(rows, np.int64))


def _csv_width(f, path: Path, size: int, delimiter: str) -> Optional[int]:
    """Fields of the first non-empty line as pyarrow splits it; None if every line is empty."""
    import pyarrow as pa
    pos, number = 0, 1
    while pos < size:
        end = _line_start_at_or_after(f, pos + 1, size)
        line = f.read_at(end - pos, pos)
        if line.strip(b"\r\n"):
            try:
                return _parse_csv(line, None, delimiter, None, null_values=[]).num_columns
            except pa.ArrowInvalid as e:
                raise InputError(path, f"bad CSV row (line {number}: {_shown(line)}): "
                                       f"{_without_row(str(e))}") from None
        pos, number = end, number + 1
    return None


def _csv_feature_error(f, path: Path, a: int, b: int, ncols: int, delimiter: str, problem: str) -> InputError:
    """The InputError for bytes [a, b) of a CSV feature that do not read as `ncols` numbers:
    the first such line and pyarrow's own complaint about it."""
    import pyarrow as pa
    found = _find_bad_line(f, a, b, ncols, delimiter, "double", [])
    if found is None:
        return InputError(path, f"bad CSV data: {_without_row(problem)}")
    number, line = found
    try:
        _parse_csv(line, ncols, delimiter, "double", [])
    except pa.ArrowInvalid as e:
        problem = str(e)
    hint = " (CSV features have no header line)" if number == 1 else ""
    return InputError(path, f"bad CSV row (line {number}: {_shown(line)}): {_without_row(problem)}{hint}")


def _without_row(message: str) -> str:
    """pyarrow's first message line without its "Row #N" (counted inside the parsed piece,
    not the file: the line number given beside it is the file's)."""
    return re.sub(r"Row #\d+: ", "", message.splitlines()[0] if message else message)


def _shown(line: bytes) -> str:
    return repr(line[:60].decode("utf-8", "replace").rstrip())


def _read_csv_numbers(path: Path, a: int, b: int, ncols: int, delimiter: str, dtype: np.dtype,
                      expect_rows: int) -> np.ndarray:
    """Bytes [a, b) (whole lines) of a CSV feature as an (n, ncols) array of `dtype`."""
    import pyarrow as pa
    kind = "double" if dtype.kind == "f" else "int64"
    with _open_text(path) as f:
        try:
            table = _parse_csv(f.read_at(b - a, a), ncols, delimiter, kind, null_values=[])
        except pa.ArrowInvalid as e:
            raise _csv_feature_error(f, path, a, b, ncols, delimiter, str(e)) from None
    if table.num_rows != expect_rows:
        raise InputError(path, "changed while being read (row count differs from the first scan)")
    out = np.empty((table.num_rows, ncols), dtype=dtype)
    for j, col in enumerate(table.columns):
        out[:, j] = col.to_numpy()
    return out


# ---------------------------------------------------------------- edges

def edge_file_sizes(files: ChunkFiles) -> List[int]:
    """Units per file for cutting edge files into pieces: rows, or bytes for CSV."""
    if files.fmt.name == "csv":
        return [_stat(p).st_size for p in files.paths]
    return [_edge_rows(files, p) for p in files.paths]


def _stat(path: Path) -> os.stat_result:
    try:
        return os.stat(path)
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
        _release_arrow_memory()
        return arr[:, 0].copy(), arr[:, 1].copy()
    if name == "numpy":
        arr = np.asarray(_open_npy(path)[piece.start:piece.stop])
        return arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
    n = piece.stop - piece.start
    src, dst = np.empty(n, np.int64), np.empty(n, np.int64)

    def fill(k: int, batch) -> None:
        for out, cname, col in zip((src, dst), batch.schema.names, batch.columns):
            if col.null_count:
                raise InputError(path, f"edge column '{cname}' has a null value in row "
                                       f"{piece.start + k + _first_null(col)}")
            out[k:k + len(col)] = col.to_numpy()   # widened to int64 in the copy

    rows = _ParquetRows(path, None, row_bytes=16)
    try:
        rows.read(piece.start, piece.stop, fill)
    finally:
        rows.close()
    _release_arrow_memory()
    return src, dst


# ---------------------------------------------------------------- features

class FeatureSource:
    """One feature's chunk files as a single row-addressable array (rows = node/edge IDs).

    Reading is cheapest in increasing row order, as every caller reads: Parquet and CSV
    files are decoded in units (a record batch of a row group, a window of lines) and the
    source keeps the open Parquet file and the unit it stopped in, so consecutive reads
    continue where the last one ended and decode nothing twice.
    """

    def __init__(self, files: ChunkFiles) -> None:
        self.files = files
        self._layouts: List[object] = []   # per file: ParquetLayout, CsvLayout or None
        heads = [self._header(p) for p in files.paths]
        if not heads:
            raise InputError(files.where, "feature has no data files")
        if files.fmt.name == "csv":
            # One float column anywhere makes the whole feature float64, as concatenating
            # DGL's per-file arrays would; integral files then read as float64 too.
            floating = any(d is not None and d.kind == "f" for _, d, _ in heads)
            common = np.dtype(np.float64 if floating else np.int64)
            heads = [(r, None if d is None else common, t) for r, d, t in heads]
        # A file without rows may not tell its dtype or row width (an empty CSV file, a list
        # column); the first file that does sets them.
        ref = next((k for k, h in enumerate(heads) if h[2] is not None),
                   next((k for k, h in enumerate(heads) if h[1] is not None), None))
        dtype = heads[ref][1] if ref is not None and heads[ref][1] is not None else np.dtype(np.float64)
        tail = heads[ref][2] if ref is not None and heads[ref][2] is not None else (0,)
        for k, (path, (_, d, t)) in enumerate(zip(files.paths, heads)):
            if (d is not None and d != dtype) or (t is not None and t != tail):
                first = "the first chunk" if ref == 0 else f"chunk {ref} ({files.paths[ref].name})"
                raise InputError(path, f"chunk has dtype {d if d is not None else dtype} and row shape "
                                       f"{t if t is not None else tail}, but {first} has {dtype} and {tail}")
        self.dtype: np.dtype = dtype
        self.tail_shape: Tuple[int, ...] = tuple(tail)
        self.file_rows = [h[0] for h in heads]
        self.offsets = np.concatenate([[0], np.cumsum(self.file_rows, dtype=np.int64)])
        self._width = int(np.prod(self.tail_shape, dtype=np.int64))
        self._parquet: Optional[Tuple[int, "_ParquetRows"]] = None
        self._window: Optional[Tuple[int, int, np.ndarray]] = None

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
        return int(self.dtype.itemsize * self._width)

    def _header(self, path: Path) -> Tuple[int, Optional[np.dtype], Optional[Tuple[int, ...]]]:
        """(rows, dtype, row shape) of one file; None where a file without rows cannot tell."""
        name = self.files.fmt.name
        layout: object = None
        try:
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
            if name == "csv":
                layout = csv_feature_layout(path, self.files.fmt.delimiter)
                if layout.ncols is None:
                    return 0, None, None
                return layout.rows, np.dtype(np.float64 if layout.floating else np.int64), (layout.ncols,)
            pf = _open_parquet(path)
            layout = _parquet_feature_layout(pf, path)
            return int(pf.metadata.num_rows), layout.dtype, layout.tail
        finally:
            self._layouts.append(layout)

    def _dataset(self, f, path: Path):
        key = self.files.fmt.dataset
        if key not in f:
            raise InputError(path, f"HDF5 file has no dataset {key!r}")
        return f[key]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) of the concatenated feature, as a C-contiguous array."""
        n = max(stop - start, 0)
        out = np.empty((n, *self.tail_shape), dtype=self.dtype)
        flat = out.reshape(n, self._width)   # a view: Parquet and CSV fill it row-major
        first = int(np.searchsorted(self.offsets, start, side="right")) - 1
        pos = start
        i = max(first, 0)
        while pos < stop:
            a, b = pos - int(self.offsets[i]), min(stop, int(self.offsets[i + 1])) - int(self.offsets[i])
            if b > a:
                k = pos - start
                self._fill(i, a, b, out[k:k + b - a], flat[k:k + b - a])
                pos += b - a
            i += 1
        if self.files.fmt.name in ("parquet", "csv"):
            _release_arrow_memory()
        return out

    def _fill(self, i: int, a: int, b: int, out: np.ndarray, flat: np.ndarray) -> None:
        """Write rows [a, b) of file i into `out` (and its 2-D view `flat`)."""
        path = self.files.paths[i]
        name = self.files.fmt.name
        if name == "numpy":
            out[...] = _open_npy(path)[a:b]
        elif name == "hdf5":
            with _open_h5(path) as f:
                out[...] = self._dataset(f, path)[a:b]
        elif name == "csv":
            self._fill_csv(i, a, b, flat)
        else:
            layout = self._layouts[i]
            assert isinstance(layout, ParquetLayout)
            fill = _fill_from_vectors if layout.vector else _fill_from_columns
            self._rows_of(i, layout).read(
                a, b, lambda k, batch: fill(flat[k:k + batch.num_rows], batch, path, a + k))

    def _rows_of(self, i: int, layout: "ParquetLayout") -> "_ParquetRows":
        """The open reader of Parquet file i: one file open at a time, kept between reads."""
        if self._parquet is None or self._parquet[0] != i:
            if self._parquet is not None:
                self._parquet[1].close()
            self._parquet = (i, _ParquetRows(self.files.paths[i], layout.select, self.row_bytes))
        return self._parquet[1]

    def _fill_csv(self, i: int, a: int, b: int, flat: np.ndarray) -> None:
        layout = self._layouts[i]
        assert isinstance(layout, CsvLayout)
        starts = layout.window_rows
        w = int(np.searchsorted(starts, a, side="right")) - 1
        done = 0
        while a + done < b:
            lo, hi = int(starts[w]), int(starts[w + 1])
            if hi > a + done:
                rows = self._csv_window(i, w, layout)
                take = min(b, hi) - (a + done)
                flat[done:done + take] = rows[a + done - lo:a + done - lo + take]
                done += take
                if a + done == hi:
                    self._window = None   # used up: free it now, not at the next read
            w += 1

    def _csv_window(self, i: int, w: int, layout: CsvLayout) -> np.ndarray:
        """Window w of CSV file i, parsed; kept until its last row is read (consecutive
        reads share it)."""
        if self._window is None or self._window[:2] != (i, w):
            self._window = None   # free the previous window before parsing the next
            a, b = int(layout.window_bytes[w]), int(layout.window_bytes[w + 1])
            rows = int(layout.window_rows[w + 1] - layout.window_rows[w])
            self._window = (i, w, _read_csv_numbers(self.files.paths[i], a, b, self._width,
                                                    self.files.fmt.delimiter, self.dtype, rows))
        return self._window[2]


def _release_arrow_memory() -> None:
    """Give the memory pyarrow freed back to the system. Its allocator (mimalloc) otherwise
    keeps it for pyarrow's own reuse, where NumPy, which allocates everything that follows a
    read (the exchange's buffers), cannot use it: measured +30 MB peak in the nodes stage."""
    import pyarrow as pa
    pa.default_memory_pool().release_unused()


# ---------------------------------------------------------------- Parquet

# A row group of up to this many decoded bytes is read whole and kept until its last row
# is used; a larger one is streamed in record batches of about PARQUET_BATCH_BYTES, so memory
# follows the batch and not the row group (one row group can hold a whole chunk file).
# Streaming keeps a decoder per column between reads (measured on 16 float32 columns: about
# 20 MB for row groups of 64k rows, 44 MB for one of 1M), so small row groups are cheaper whole.
PARQUET_WHOLE_GROUP_BYTES = 8 << 20
PARQUET_BATCH_BYTES = 4 << 20

# Column chunks up to this size are read whole; larger ones through a buffer of
# PARQUET_READ_BUFFER bytes. Measured on 1M x 16 float32, half the rows: row groups of 64k
# rows (256 KiB chunks) peak at 132 MB read whole and 147 MB buffered; one row group (4 MiB
# chunks) at 234 MB whole and 166 MB buffered.
PARQUET_WHOLE_CHUNK_BYTES = 1 << 20
PARQUET_READ_BUFFER = 256 << 10


@dataclass(frozen=True)
class ParquetLayout:
    """How a Parquet feature file maps to an array.

    Either one numeric column per flattened element of a row (DGL's writer, pandas), or one
    list column holding each row's values (DGL's "vector rows", Spark ML). Columns pandas
    wrote for the DataFrame index are not data.
    """

    select: Optional[List[str]]         # the data columns to read, in file order (None: all)
    vector: bool                        # one list column, a row per list
    dtype: np.dtype
    tail: Optional[Tuple[int, ...]]     # row shape; None for a list column in a file without rows


def parquet_data_columns(schema, path: Path) -> List[int]:
    """Indices of the columns of `schema` that hold data: all but the pandas index columns.

    pandas stores a DataFrame index other than a default RangeIndex as columns
    (`__index_level_0__`, or the index's name) listed under "index_columns" in the b"pandas"
    schema metadata. DGL reads Parquet through pandas, which turns them back into the index,
    so they are not feature values. A RangeIndex is stored as metadata only (a dict entry)
    and has no column.
    """
    meta = schema.metadata or {}
    if b"pandas" not in meta:
        return list(range(len(schema)))
    try:
        pandas = json.loads(meta[b"pandas"])
    except ValueError:
        raise InputError(path, "unreadable 'pandas' schema metadata (not JSON)") from None
    index = pandas.get("index_columns", []) if isinstance(pandas, dict) else []
    if not isinstance(index, list):
        raise InputError(path, f"'pandas' schema metadata has index_columns {index!r}, expected a list")
    dropped = {c for c in index if isinstance(c, str)}
    return [i for i, name in enumerate(schema.names) if name not in dropped]


def _numpy_dtype(atype) -> Optional[np.dtype]:
    import pyarrow as pa
    if pa.types.is_boolean(atype):
        return np.dtype(bool)
    if pa.types.is_integer(atype) or pa.types.is_floating(atype):
        return np.dtype(atype.to_pandas_dtype())
    return None


def _parquet_feature_layout(pf, path: Path) -> ParquetLayout:
    """The layout of a Parquet feature file, from its schema (and first row for a list column).

    DGL stores the array's shape in the schema metadata under b"shape"; without it the file
    is read as a 2-D array, as DGL's own reader does.
    """
    import pyarrow as pa
    schema = pf.schema_arrow
    keep = parquet_data_columns(schema, path)
    fields = [schema.field(i) for i in keep]
    names = tuple(f.name for f in fields)
    select = None if len(keep) == len(schema) else list(names)
    if not fields:
        raise InputError(path, "feature file has no data columns (only pandas index columns)" if len(schema)
                         else "feature file has no columns")
    shape = _shape_metadata(schema, path)
    if len(fields) == 1 and (pa.types.is_list(fields[0].type) or pa.types.is_large_list(fields[0].type)
                             or pa.types.is_fixed_size_list(fields[0].type)):
        atype = fields[0].type
        dtype = _numpy_dtype(atype.value_type)
        if dtype is None:
            raise InputError(path, f"list column '{names[0]}' must hold numbers or bools, found {atype}")
        fixed = atype.list_size if pa.types.is_fixed_size_list(atype) else None
        if shape is not None:
            tail: Optional[Tuple[int, ...]] = shape[1:]
            width = int(np.prod(tail, dtype=np.int64))
            if fixed is not None and fixed != width:
                raise InputError(path, f"'shape' metadata {shape} does not match list column "
                                       f"'{names[0]}' of {fixed} values per row")
        elif fixed is not None:
            tail = (fixed,)
        else:
            width_found = _first_list_length(pf, path, names[0])
            tail = None if width_found is None else (width_found,)
        return ParquetLayout(select, True, dtype, tail)
    types = {f.type for f in fields}
    if len(types) != 1:
        raise InputError(path, f"feature columns must share one type, found {sorted(map(str, types))}")
    (atype,) = types
    dtype = _numpy_dtype(atype)
    if dtype is None:
        raise InputError(path, f"feature columns must be numeric or bool, found {atype} (column '{names[0]}')")
    if shape is not None:
        if int(np.prod(shape[1:], dtype=np.int64)) != len(fields):
            raise InputError(path, f"'shape' metadata {shape} does not match {len(fields)} data columns")
        return ParquetLayout(select, False, dtype, shape[1:])
    return ParquetLayout(select, False, dtype, (len(fields),))


def _shape_metadata(schema, path: Path) -> Optional[Tuple[int, ...]]:
    meta = schema.metadata or {}
    if b"shape" not in meta:
        return None
    try:
        shape = tuple(int(s) for s in ast.literal_eval(meta[b"shape"].decode()))
    except (ValueError, SyntaxError, TypeError, UnicodeDecodeError):
        raise InputError(path, f"unreadable 'shape' metadata {meta[b'shape']!r}") from None
    if not shape:
        raise InputError(path, f"'shape' metadata {shape} has no dimensions")
    return shape


def _first_list_length(pf, path: Path, name: str) -> Optional[int]:
    """Values in the first row of list column `name` (None if the file has no rows): the
    row width of a list<...> column, whose type does not fix it. Decodes one page."""
    import pyarrow as pa
    md = pf.metadata
    for g in range(md.num_row_groups):
        if md.row_group(g).num_rows:
            try:
                batch = next(pf.iter_batches(batch_size=1, row_groups=[g], columns=[name], use_threads=False))
            except (pa.ArrowException, OSError, StopIteration) as e:
                raise InputError(path, f"corrupt Parquet data: {e}") from None
            col = batch.column(0)
            if col.null_count:
                raise InputError(path, f"list column '{name}' is null in row 0")
            return int(col.offsets[1].as_py() - col.offsets[0].as_py())
    return None


def _first_null(arr) -> int:
    return int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])


def _fill_from_columns(flat: np.ndarray, batch, path: Path, row: int) -> None:
    """One column per element: column j of the batch is column j of `flat`."""
    for j, (name, col) in enumerate(zip(batch.schema.names, batch.columns)):
        if col.null_count:
            raise InputError(path, f"column '{name}' has a null value in row {row + _first_null(col)}")
        flat[:, j] = col.to_numpy(zero_copy_only=False)


def _fill_from_vectors(flat: np.ndarray, batch, path: Path, row: int) -> None:
    """One list column: row i's list is row i of `flat`, and must have its width."""
    import pyarrow as pa
    col, name, width = batch.column(0), batch.schema.names[0], flat.shape[1]
    if col.null_count:
        raise InputError(path, f"list column '{name}' is null in row {row + _first_null(col)}")
    if not pa.types.is_fixed_size_list(col.type):
        lengths = np.diff(col.offsets.to_numpy())
        bad = np.flatnonzero(lengths != width)
        if len(bad):
            raise InputError(path, f"list column '{name}' has {int(lengths[bad[0]])} values in row "
                                   f"{row + int(bad[0])}, but the feature's rows have {width} "
                                   f"(every row must have the same length)")
    values = col.flatten()
    if values.null_count:
        raise InputError(path, f"list column '{name}' holds a null value in row "
                               f"{row + _first_null(values) // max(width, 1)}")
    flat[...] = values.to_numpy(zero_copy_only=False).reshape(len(col), width)


class _ParquetRows:
    """Rows of one Parquet file, each row group decoded at most once per pass.

    Reads go one row group at a time. A small row group is decoded whole (data columns
    only) and kept until a read uses its last row, so consecutive reads inside it decode
    nothing again. A large one is streamed: the record-batch iterator and the batch it
    stopped in are kept between reads, so a read that continues where the last one ended
    goes on decoding from there, and its rows before the read are decoded in batches and
    dropped (Parquet cannot seek inside a row group without a page index). Row groups
    wholly outside a read are never decoded. A read before the current position of a
    streamed row group starts it again.
    """

    def __init__(self, path: Path, columns: Optional[List[str]], row_bytes: int) -> None:
        self.path = path
        # Not memory-mapped: every mapped page read stays counted in the process's resident
        # memory until the file is closed, and a rank keeps it open across its batches.
        # Without pre-buffering or a buffer, pyarrow reads each column chunk whole before
        # decoding it, which is cheapest for small chunks; large ones (a big row group) are
        # read in pieces. (pyarrow's default pre-buffers every column chunk of a row group.)
        self.pf = _open_parquet(path, memory_map=False, pre_buffer=False)
        md = self.pf.metadata
        chunk = max((md.row_group(g).total_byte_size // max(md.num_columns, 1)
                     for g in range(md.num_row_groups)), default=0)
        if chunk > PARQUET_WHOLE_CHUNK_BYTES:
            self.pf = _open_parquet(path, memory_map=False, pre_buffer=False,
                                    buffer_size=PARQUET_READ_BUFFER, metadata=md)
        sizes = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        self.columns = columns
        self.whole_rows = PARQUET_WHOLE_GROUP_BYTES // max(row_bytes, 1)
        self.batch_rows = max(1, PARQUET_BATCH_BYTES // max(row_bytes, 1))
        self._whole: Optional[Tuple[int, object]] = None   # (row group, its Table)
        self._group = -1              # the streamed row group (-1: none)
        self._batches = None          # its record batches
        self._pos = 0                 # file row of the first row of _batch, or of the next batch
        self._batch = None            # a batch read but not used up

    def close(self) -> None:
        self._whole = self._batches = self._batch = None
        self.pf.close()

    def read(self, a: int, b: int, sink: Callable[[int, "object"], None]) -> None:
        """Call sink(k, batch) for consecutive record batches holding rows [a + k, ...) of [a, b)."""
        if not 0 <= a <= b <= int(self.starts[-1]):
            raise ValueError(f"rows [{a}, {b}) outside [0, {int(self.starts[-1])})")
        row = a
        while row < b:
            g = int(np.searchsorted(self.starts, row, side="right")) - 1
            first, end = int(self.starts[g]), int(self.starts[g + 1])
            stop = min(b, end)
            if end - first <= self.whole_rows:
                for batch in self._decoded(g).slice(row - first, stop - row).to_batches():
                    sink(row - a, batch)
                    row += batch.num_rows
                if stop == end:
                    self._whole = None   # used up: free it now, not at the next read
            else:
                self._stream(g, row, stop, lambda k, batch: sink(k + row - a, batch))
            row = stop

    def _decoded(self, g: int):
        """Row group g as a Table of the data columns, decoded once."""
        import pyarrow as pa
        if self._whole is None or self._whole[0] != g:
            self._whole = None
            try:
                table = self.pf.read_row_group(g, columns=self.columns, use_threads=False)
            except (pa.ArrowException, OSError) as e:
                raise InputError(self.path, f"corrupt Parquet data: {e}") from None
            if table.num_rows != int(self.starts[g + 1] - self.starts[g]):
                raise InputError(self.path, f"row group {g} holds {table.num_rows} rows but its footer "
                                            f"says {int(self.starts[g + 1] - self.starts[g])}")
            self._whole = (g, table)
        return self._whole[1]

    def _stream(self, g: int, row: int, stop: int, sink: Callable[[int, "object"], None]) -> None:
        """Rows [row, stop) of row group g, continuing the stream where the last read ended."""
        import pyarrow as pa
        start = row
        if self._group != g or row < self._pos:
            self._batch, self._batches = None, None   # free the old decoder before the new one
            self._group, self._pos = g, int(self.starts[g])
            try:
                self._batches = self.pf.iter_batches(batch_size=self.batch_rows, columns=self.columns,
                                                     row_groups=[g], use_threads=False)
            except (pa.ArrowException, OSError) as e:
                raise InputError(self.path, f"corrupt Parquet data: {e}") from None
        end = int(self.starts[g + 1])
        while row < stop:
            batch = self._batch if self._batch is not None else self._next_batch(end)
            n = batch.num_rows
            if row < self._pos + n:
                lo, hi = row - self._pos, min(stop - self._pos, n)
                sink(row - start, batch.slice(lo, hi - lo))
                row += hi - lo
                if hi < n:
                    self._batch = batch
                    break
            self._pos, self._batch = self._pos + n, None   # used up, or rows before `row`
        if self._batch is None and self._pos == end:
            self._group, self._batches = -1, None   # the row group is used up: free its decoder

    def _next_batch(self, end: int):
        import pyarrow as pa
        try:
            batch = next(self._batches)
        except StopIteration:
            raise InputError(self.path, f"row group {self._group} holds fewer rows than its footer says") from None
        except (pa.ArrowException, OSError) as e:
            raise InputError(self.path, f"corrupt Parquet data: {e}") from None
        if self._pos + batch.num_rows > end:
            raise InputError(self.path, f"row group {self._group} holds more rows than its footer says")
        return batch


# ---------------------------------------------------------------- file opening

def _open_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (ValueError, OSError, EOFError) as e:
        raise InputError(path, f"not a readable .npy file: {e}") from None


def _open_parquet(path: Path, memory_map: bool = True, pre_buffer: bool = True, buffer_size: int = 0,
                  metadata=None):
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        return pq.ParquetFile(str(path), memory_map=memory_map, pre_buffer=pre_buffer, buffer_size=buffer_size,
                              metadata=metadata)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"not a readable Parquet file: {e}") from None


def _open_text(path: Path):
    """A CSV file for positioned reads. Not memory-mapped: a scan of a large file would
    otherwise leave all of it counted in the process's resident memory."""
    import pyarrow as pa
    try:
        return pa.OSFile(str(path), "r")
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"cannot read: {e}") from None


def _open_h5(path: Path):
    import h5py
    try:
        return h5py.File(path, "r")
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except OSError as e:
        raise InputError(path, f"not a readable HDF5 file: {e}") from None

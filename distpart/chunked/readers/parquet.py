"""Parquet chunk files: which columns are data, how they map to an array, and reading rows.

Parquet is read a row group at a time, data columns only (pandas index columns are not
data): a small row group is decoded whole, a large one streamed in record batches, and the
reader keeps the open file and the part it stopped in, so a rank reading its block in
consecutive batches decodes only the row groups that overlap its rows, each once.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import numpy as np

from ...errors import InputError
from . import opening


# A row group of up to this many decoded bytes is read whole and kept until its last row
# is used; a larger one is streamed in record batches of about PARQUET_BATCH_BYTES, so memory
# follows the batch and not the row group (one row group can hold a whole chunk file).
# Streaming keeps a decoder per column between reads, so small row groups are cheaper whole
# (chosen by benchmarks/bench_readers.py, see benchmarks/results/readers_after.json).
PARQUET_WHOLE_GROUP_BYTES = 8 << 20
PARQUET_BATCH_BYTES = 4 << 20

# Column chunks up to this size are read whole; larger ones through a buffer of
# PARQUET_READ_BUFFER bytes, which bounds a large row group's peak (chosen by
# benchmarks/bench_readers.py, see benchmarks/results/readers_after.json).
PARQUET_WHOLE_CHUNK_BYTES = 1 << 20
PARQUET_READ_BUFFER = 256 << 10


def buffered_reads_safe(version: Optional[str] = None) -> bool:
    """Whether pyarrow `version` (the installed one by default) reads Parquet right through
    a buffer (`buffer_size` > 0, the stream PARQUET_READ_BUFFER uses).

    Arrow 17.0-18.x do not: their BufferedInputStream (GH-43060's SetBufferSize, fixed by
    GH-43949 in 19.0) shrinks its buffer when the page reader peeks at a page header that
    starts near the buffer's end in the last stretch of a column chunk, and then writes the
    rest of the peek past the buffer's end. The heap corruption that follows is silent and
    varies from run to run: on pyarrow 17.0.0, with files of many pages per column chunk, a
    list<float> column lost rows and a plain float column read wrong values;
    ARROW_DEBUG_MEMORY_POOL=abort stops on the write every time (tests/test_readers.py).
    19.0-23.x still write past the buffer in another case (GH-48311, fixed in 24.0); it needs
    a peek longer than the buffer, which distpart's buffer and the page reader's 16 KiB header
    peeks should never make, but these versions are left out too: wrong features are worse
    than memory.
    """
    import pyarrow as pa
    major = int((version or pa.__version__).split(".")[0])
    return not 17 <= major < 24


def corrupt(path: Path, error: BaseException) -> InputError:
    """The error for a Parquet file whose data pyarrow cannot decode, on one line."""
    return InputError(path, f"corrupt Parquet data: {opening.one_line(error)}")


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


def parquet_feature_layout(pf, path: Path) -> ParquetLayout:
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
    if shape is not None and shape[0] != pf.metadata.num_rows:
        # DGL's reader reshapes each file's values to its own `shape`: the first dimension
        # is that file's rows (GSProcessing writes "(rows,)" on label and mask files).
        raise InputError(path, f"'shape' metadata {shape} says {shape[0]} rows but the file has "
                               f"{pf.metadata.num_rows}")
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
                raise corrupt(path, e) from None
            col = batch.column(0)
            if col.null_count:
                raise InputError(path, f"list column '{name}' is null in row 0")
            return int(col.offsets[1].as_py() - col.offsets[0].as_py())
    return None


def first_null(arr) -> int:
    return int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])


def fill_from_columns(flat: np.ndarray, batch, path: Path, row: int) -> None:
    """One column per element: column j of the batch is column j of `flat`."""
    for j, (name, col) in enumerate(zip(batch.schema.names, batch.columns)):
        if col.null_count:
            raise InputError(path, f"column '{name}' has a null value in row {row + first_null(col)}")
        flat[:, j] = col.to_numpy(zero_copy_only=False)


def fill_from_vectors(flat: np.ndarray, batch, path: Path, row: int) -> None:
    """One list column: row i's list is row i of `flat`, and must have its width."""
    import pyarrow as pa
    col, name, width = batch.column(0), batch.schema.names[0], flat.shape[1]
    if col.null_count:
        raise InputError(path, f"list column '{name}' is null in row {row + first_null(col)}")
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
                               f"{row + first_null(values) // max(width, 1)}")
    flat[...] = values.to_numpy(zero_copy_only=False).reshape(len(col), width)


class ParquetRows:
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
        self.pf = opening.open_parquet(path, memory_map=False, pre_buffer=False)
        md = self.pf.metadata
        chunk = max((md.row_group(g).total_byte_size // max(md.num_columns, 1)
                     for g in range(md.num_row_groups)), default=0)
        # Where the buffer is not safe (`buffered_reads_safe`), every column chunk is read
        # whole: memory then grows by the row group's selected column chunks.
        if chunk > PARQUET_WHOLE_CHUNK_BYTES and buffered_reads_safe():
            self.pf = opening.open_parquet(path, memory_map=False, pre_buffer=False,
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
                raise corrupt(self.path, e) from None
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
                raise corrupt(self.path, e) from None
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
            raise corrupt(self.path, e) from None
        if self._pos + batch.num_rows > end:
            raise InputError(self.path, f"row group {self._group} holds more rows than its footer says")
        return batch

"""A feature's chunk files (NumPy, Parquet, CSV, HDF5) as one row-addressable array."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from ...errors import InputError
from ..metadata import ChunkFiles
from . import opening
from .csv import CsvLayout, csv_feature_layout, read_csv_numbers
from .parquet import ParquetLayout, ParquetRows, fill_from_columns, fill_from_vectors, parquet_feature_layout


class FeatureSource:
    """One feature's chunk files as a single row-addressable array (rows = node/edge IDs).

    Reading is cheapest in increasing row order, as every caller reads: Parquet and CSV
    files are decoded in units (a record batch of a row group, a window of lines) and the
    source keeps the open Parquet file and the unit it stopped in, so consecutive reads
    continue where the last one ended and decode nothing twice.
    """

    def __init__(self, files: ChunkFiles) -> None:
        self.files = files
        known = files.headers.get("feature")
        if known is None:   # the first source of these files reads their headers
            self._layouts: List[object] = []   # per file: ParquetLayout, CsvLayout or None
            known = files.headers["feature"] = ([self._header(p) for p in files.paths], self._layouts)
        heads, self._layouts = known
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
        for path, n, declared in zip(files.paths, self.file_rows, files.row_counts or self.file_rows):
            if n != declared:
                raise InputError(path, f"has {n} rows but row_counts says {declared} (in {files.where})")
        self.offsets = np.concatenate([[0], np.cumsum(self.file_rows, dtype=np.int64)])
        self._width = int(np.prod(self.tail_shape, dtype=np.int64))
        self._parquet: Optional[Tuple[int, "ParquetRows"]] = None
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
                arr = opening.open_npy(path)
                if arr.ndim < 1:
                    raise InputError(path, "feature array must have at least one dimension")
                return int(arr.shape[0]), arr.dtype, tuple(arr.shape[1:])
            if name == "hdf5":
                with opening.open_h5(path) as f:
                    ds = self._dataset(f, path)
                    if ds.ndim < 1:
                        raise InputError(path, "feature dataset must have at least one dimension")
                    return int(ds.shape[0]), ds.dtype, tuple(ds.shape[1:])
            if name == "csv":
                layout = csv_feature_layout(path, self.files.fmt.delimiter)
                if layout.ncols is None:
                    return 0, None, None
                return layout.rows, np.dtype(np.float64 if layout.floating else np.int64), (layout.ncols,)
            pf = opening.open_parquet(path)
            layout = parquet_feature_layout(pf, path)
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
            opening.release_arrow_memory()
        return out

    def _fill(self, i: int, a: int, b: int, out: np.ndarray, flat: np.ndarray) -> None:
        """Write rows [a, b) of file i into `out` (and its 2-D view `flat`)."""
        path = self.files.paths[i]
        name = self.files.fmt.name
        if name == "numpy":
            out[...] = opening.open_npy(path)[a:b]
        elif name == "hdf5":
            with opening.open_h5(path) as f:
                try:
                    out[...] = self._dataset(f, path)[a:b]
                except OSError as e:
                    # h5py decodes a chunked dataset's chunks only here (a bad checksum or a
                    # corrupt compressed chunk): bad input, not a bug to abort the job on.
                    raise InputError(path, f"corrupt HDF5 data in rows [{a}, {b}): {opening.one_line(e)}") from None
        elif name == "csv":
            self._fill_csv(i, a, b, flat)
        else:
            layout = self._layouts[i]
            assert isinstance(layout, ParquetLayout)
            fill = fill_from_vectors if layout.vector else fill_from_columns
            self._rows_of(i, layout).read(
                a, b, lambda k, batch: fill(flat[k:k + batch.num_rows], batch, path, a + k))

    def _rows_of(self, i: int, layout: "ParquetLayout") -> "ParquetRows":
        """The open reader of Parquet file i: one file open at a time, kept between reads."""
        if self._parquet is None or self._parquet[0] != i:
            if self._parquet is not None:
                self._parquet[1].close()
            self._parquet = (i, ParquetRows(self.files.paths[i], layout.select, self.row_bytes))
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
            self._window = (i, w, read_csv_numbers(self.files.paths[i], a, b, self._width,
                                                    self.files.fmt.delimiter, self.dtype, rows))
        return self._window[2]

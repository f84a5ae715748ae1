"""Header-less CSV: integer edge lists sliced by byte, and numeric feature files.

CSV cannot be indexed by row, so an edge piece is a byte range and holds the lines that
begin inside it (its row offset is found afterwards by a prefix sum over ranks). A CSV
feature is scanned once per process (width, rows, int64 or float64, as DGL's pyarrow-based
reader infers) and cut into windows of whole lines that are then read like Parquet row
groups. Parsing is pyarrow's; a rejected piece is bisected to name the first bad line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from ...errors import InputError
from . import opening


def line_start_at_or_after(f, pos: int, size: int) -> int:
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
        a = line_start_at_or_after(mm, byte_start, size)
        b = size if byte_stop >= size else line_start_at_or_after(mm, byte_stop, size)
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
    st = opening.stat_file(path)
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, delimiter, window)
    layout = _CSV_LAYOUTS.get(key)
    if layout is None:
        layout = _CSV_LAYOUTS[key] = _scan_csv(path, delimiter, window)
    return layout


def _scan_csv(path: Path, delimiter: str, window: int) -> CsvLayout:
    import pyarrow as pa
    with opening.open_text(path) as f:
        size = f.size()
        ncols = _csv_width(f, path, size, delimiter)
        if ncols is None:
            return CsvLayout(None, False, np.array([0, size], np.int64), np.zeros(2, np.int64))
        bounds, rows, floating = [0], [0], False
        while bounds[-1] < size:
            a = bounds[-1]
            b = size if a + window >= size else line_start_at_or_after(f, a + window, size)
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
        end = line_start_at_or_after(f, pos + 1, size)
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


def read_csv_numbers(path: Path, a: int, b: int, ncols: int, delimiter: str, dtype: np.dtype,
                      expect_rows: int) -> np.ndarray:
    """Bytes [a, b) (whole lines) of a CSV feature as an (n, ncols) array of `dtype`."""
    import pyarrow as pa
    kind = "double" if dtype.kind == "f" else "int64"
    with opening.open_text(path) as f:
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

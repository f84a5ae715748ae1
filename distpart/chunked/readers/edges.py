"""Edge chunk files (CSV, NumPy, Parquet): their sizes in pieces' units, and one piece's (src, dst)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import numpy as np

from ...errors import InputError
from ..metadata import ChunkFiles
from . import opening
from .csv import read_csv_ints
from .parquet import ParquetRows, first_null
from .pieces import Piece


def edge_file_sizes(files: ChunkFiles) -> List[int]:
    """Units per file for cutting edge files into pieces: rows, or bytes for CSV."""
    if files.fmt.name == "csv":
        return [opening.stat_file(p).st_size for p in files.paths]
    return [_edge_rows(files, p) for p in files.paths]


def _edge_rows(files: ChunkFiles, path: Path) -> int:
    if files.fmt.name == "numpy":
        arr = opening.open_npy(path)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise InputError(path, f"edge array must have shape (num_edges, 2), found {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise InputError(path, f"edge array must hold integers, found dtype {arr.dtype}")
        return int(arr.shape[0])
    pf = opening.open_parquet(path)
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
        opening.release_arrow_memory()
        return arr[:, 0].copy(), arr[:, 1].copy()
    if name == "numpy":
        arr = np.asarray(opening.open_npy(path)[piece.start:piece.stop])
        return arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
    n = piece.stop - piece.start
    src, dst = np.empty(n, np.int64), np.empty(n, np.int64)

    def fill(k: int, batch) -> None:
        for out, cname, col in zip((src, dst), batch.schema.names, batch.columns):
            if col.null_count:
                raise InputError(path, f"edge column '{cname}' has a null value in row "
                                       f"{piece.start + k + first_null(col)}")
            out[k:k + len(col)] = col.to_numpy()   # widened to int64 in the copy

    rows = ParquetRows(path, None, row_bytes=16)
    try:
        rows.read(piece.start, piece.stop, fill)
    finally:
        rows.close()
    opening.release_arrow_memory()
    return src, dst

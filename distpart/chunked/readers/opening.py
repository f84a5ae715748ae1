"""Opening chunk files (NumPy, Parquet, CSV text, HDF5) with errors that name the file.

Every reader opens files through here, so a missing or unreadable file is always an
InputError naming it, never a library traceback; tests count opens by patching this module.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...errors import InputError


def stat_file(path: Path) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None


def open_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (ValueError, OSError, EOFError) as e:
        raise InputError(path, f"not a readable .npy file: {e}") from None


def open_parquet(path: Path, memory_map: bool = True, pre_buffer: bool = True, buffer_size: int = 0,
                  metadata=None):
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        return pq.ParquetFile(str(path), memory_map=memory_map, pre_buffer=pre_buffer, buffer_size=buffer_size,
                              metadata=metadata)
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"not a readable Parquet file: {one_line(e)}") from None


def one_line(error: BaseException) -> str:
    """A library's message on one line: an error is one line naming the file, and Arrow's
    Parquet messages run over several ("Couldn't deserialize thrift: ...\nDeserializing page
    header failed.")."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())


def open_text(path: Path):
    """A CSV file for positioned reads. Not memory-mapped: a scan of a large file would
    otherwise leave all of it counted in the process's resident memory."""
    import pyarrow as pa
    try:
        return pa.OSFile(str(path), "r")
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except (pa.ArrowException, OSError) as e:
        raise InputError(path, f"cannot read: {e}") from None


def open_h5(path: Path):
    import h5py
    try:
        return h5py.File(path, "r")
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    except OSError as e:
        raise InputError(path, f"not a readable HDF5 file: {e}") from None


def release_arrow_memory() -> None:
    """Give the memory pyarrow freed back to the system. Its allocator (mimalloc) otherwise
    keeps it for pyarrow's own reuse, where NumPy, which allocates everything that follows a
    read (the exchange's buffers), cannot use it, and the stage's peak grows."""
    import pyarrow as pa
    pa.default_memory_pool().release_unused()

"""One file written by every rank at once (MPI-IO): the collective open that truncates, and
writes at an offset in pieces small enough for 32-bit MPI counts.

Step 1 writes its `<ntype>.txt` files and KaMinPar's ParHIP input this way: each rank knows
its byte offset (a prefix sum), so no rank gathers another's data.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Type

import numpy as np

from ..errors import DistpartError

if TYPE_CHECKING:
    from mpi4py.MPI import File, Intracomm

WRITE_PIECE = 1 << 30  # bytes per MPI-IO call: keeps counts far below 2**31


@contextmanager
def open_for_writing(comm: Intracomm, path: "str | Path", error: Type[DistpartError]) -> Iterator[File]:
    """Open (create) `path` for writing by every rank of `comm`, emptied first so an older,
    longer file leaves no stale tail. Collective: a failed open raises `error` naming the
    file on every rank."""
    from mpi4py import MPI
    try:
        fh = MPI.File.Open(comm, str(path), MPI.MODE_WRONLY | MPI.MODE_CREATE)
    except MPI.Exception as e:
        raise error(path, f"cannot open for writing: {e.Get_error_string()}") from None
    try:
        fh.Set_size(0)
        yield fh
    finally:
        fh.Close()


def write_at(fh: File, offset: int, data: np.ndarray) -> None:
    """Write `data`'s bytes at byte `offset`, at most WRITE_PIECE bytes per call."""
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    for a in range(0, len(raw), WRITE_PIECE):
        fh.Write_at(offset + a, raw[a:a + WRITE_PIECE])

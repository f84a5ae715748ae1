"""Cutting chunk files into pieces: the unit of reading.

Every list of chunk files is seen as one concatenated array and cut into one contiguous
block per rank, so the work is balanced whatever the number and sizes of the files. A piece
is a slice of one file, in rows, or in bytes for CSV (which cannot be indexed by row).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import numpy as np


@dataclass(frozen=True)
class Piece:
    """Units [start, stop) of file `file` (rows, or bytes for CSV) in a ChunkFiles list."""

    file: int
    start: int
    stop: int


def block_bounds(total: int, nranks: int) -> np.ndarray:
    """Boundaries of `nranks` near-equal contiguous blocks of [0, total), int64, length nranks+1:
    block i starts at i * total // nranks."""
    # As q*i + r*i // nranks (total = q*nranks + r): i * total itself passes 2**63 for totals
    # near int64's range, and r * i stays below nranks**2.
    q, r = divmod(int(total), int(nranks))
    i = np.arange(nranks + 1, dtype=np.int64)
    return q * i + (r * i) // nranks


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

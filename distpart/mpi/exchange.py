"""Moving rows between ranks: bounded-size buffer `Alltoallv` and the distributed owner lookup.

Every array that crosses ranks goes through `exchange` or `lookup`. They send raw bytes
(never pickles) in rounds so that no rank sends or receives more than `max_bytes` in one
`Alltoallv` call, which also keeps every MPI count and displacement below 2**31 on MPI
libraries without the MPI-4 large-count calls (Open MPI 4.1 is MPI 3.1: mpi4py 4's
`Alltoallv_c` there casts counts to int and fails past 2**31 - 1). The result does not
depend on the number of rounds: rows arrive grouped by source rank, each source's rows in
the order it sent them, exactly as one unbounded Alltoallv would deliver them.
`MAX_MPI_COUNT` is read at every call, so a test can lower it to force the split.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, List, Sequence, Tuple

import numpy as np

from ..arrays import exclusive_cumsum, group_by_owner
from ..errors import DistpartError

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

MAX_MPI_COUNT = 2**31 - 1
DEFAULT_MAX_BYTES = 256 << 20


# ---------------------------------------------------------------- pure helpers

def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + n) for each (s, n), vectorised."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return (np.arange(total, dtype=np.int64) - np.repeat(ends - lengths, lengths)
            + np.repeat(np.asarray(starts, dtype=np.int64), lengths))


def rounds_needed(send_counts: np.ndarray, recv_counts: np.ndarray, row_bytes: int,
                  max_bytes: int) -> int:
    """Rounds that keep every Alltoallv of this rank within `max_bytes` each way.

    Round j sends rows [c*j//k, c*(j+1)//k) of each peer's c rows: at most c/k + 1 per peer,
    so a round carries up to one extra row per peer beyond the average; that slack is taken
    out of the budget. (The cap is also kept below 2**31 so counts and displacements fit.)
    """
    rows = max(int(np.sum(send_counts)), int(np.sum(recv_counts)))
    largest = max(int(np.max(send_counts, initial=0)), int(np.max(recv_counts, initial=0)))
    return rounds_for(rows, largest, len(send_counts), row_bytes, max_bytes)


def rounds_for(rows: int, largest: int, peers: int, row_bytes: int, max_bytes: int) -> int:
    """`rounds_needed` of a rank that sends or receives at most `rows` rows in all and
    `largest` from or to one peer. Never smaller for larger `rows` or `largest`: with the
    maxima over all ranks it is every rank's agreed count."""
    row_bytes = max(int(row_bytes), 1)
    max_bytes = min(int(max_bytes), MAX_MPI_COUNT)
    if rows == 0:
        return 1
    budget = max_bytes - peers * row_bytes
    if budget < row_bytes:  # a tiny cap: one row per peer per round is the best there is
        return max(int(largest), 1)
    return max(1, -(-rows * row_bytes // budget))


def round_slice(counts: np.ndarray, j: int, rounds: int) -> Tuple[np.ndarray, np.ndarray]:
    """Rows [lo, hi) of each peer's `counts` rows that round j of `rounds` carries:
    c*j//rounds up to c*(j+1)//rounds, so the rounds tile every peer's rows in order."""
    # Python ints: c * j can pass 2**63 when a tiny cap makes `rounds` huge (one per row).
    cs = [int(c) for c in np.asarray(counts).reshape(-1)]
    lo = np.array([c * j // rounds for c in cs], dtype=np.int64)
    hi = np.array([c * (j + 1) // rounds for c in cs], dtype=np.int64)
    return lo, hi


class CountOverflow(RuntimeError):
    """An Alltoallv count or displacement past MPI's int: a bug in the round split, so not
    a DistpartError (the CLI aborts the whole job on it instead of leaving ranks waiting)."""


def mpi_counts(byte_counts: np.ndarray) -> Tuple[List[int], List[int]]:
    """(counts, displacements) of one Alltoallv side as Python ints, each at most `MAX_MPI_COUNT`.

    Checked here so that the failure names the limit (past 2**31 - 1 mpi4py's own error
    says only that an integer does not fit in 'int').
    """
    counts = np.asarray(byte_counts, dtype=np.int64).reshape(-1)
    displs = exclusive_cumsum(counts)
    end = int(displs[-1] + counts[-1]) if len(counts) else 0
    if end > MAX_MPI_COUNT:
        raise CountOverflow(f"an Alltoallv would move {end} bytes, more than MPI's int count "
                            f"({MAX_MPI_COUNT}) allows in one call")
    return counts.tolist(), displs.tolist()


def row_bytes_of(col: np.ndarray) -> int:
    """Bytes of one row of `col` (all axes after the first)."""
    return int(col.dtype.itemsize * int(np.prod(col.shape[1:], dtype=np.int64)))


# ---------------------------------------------------------------- MPI

def alltoallv_grouped(comm: Intracomm, columns: Sequence[np.ndarray], send_counts: np.ndarray,
                      order: "np.ndarray | None" = None,
                      max_bytes: int = DEFAULT_MAX_BYTES) -> Tuple[List[np.ndarray], np.ndarray]:
    """Send rows to ranks; rows for rank d are rows `order[sdispl[d]:sdispl[d]+send_counts[d]]`
    of every column (or that slice itself when `order` is None).

    Returns (received columns, receive counts per source rank). Collective.

    If `columns` is a list, each entry is set to None once sent: a caller that passes the
    only references (`exchange(comm, owner, [a, b])` after `del a, b`) gets each input
    freed while the outputs fill, instead of holding inputs and outputs at once.
    """
    nranks = comm.Get_size()
    send_counts = np.ascontiguousarray(send_counts, dtype=np.int64)
    recv_counts = np.empty(nranks, dtype=np.int64)
    comm.Alltoall(send_counts, recv_counts)
    row_bytes = sum(row_bytes_of(c) for c in columns)
    # One reduction agrees on the rounds and checks the columns' forms (max key == min key).
    key = _forms_key(columns)
    rounds, high, low = allreduce_max(comm, np.array(
        [rounds_needed(send_counts, recv_counts, row_bytes, max_bytes), key, -key])).tolist()
    if high != -low:
        _explain_mismatch(comm, columns)
    return alltoallv_planned(comm, columns, send_counts, recv_counts, int(rounds), order), recv_counts


def alltoallv_planned(comm: Intracomm, columns: Sequence[np.ndarray], send_counts: np.ndarray,
                      recv_counts: np.ndarray, rounds: int, order: "np.ndarray | None" = None) -> List[np.ndarray]:
    """`alltoallv_grouped`'s data rounds, for a caller that already knows what every rank
    receives and the agreed number of rounds (a fixed pattern, e.g. a halo refresh): only
    the Alltoallv calls. Every rank must pass the same columns' forms. Collective."""
    from mpi4py import MPI

    sdispl, rdispl = exclusive_cumsum(send_counts), exclusive_cumsum(recv_counts)
    outs = [np.empty((int(recv_counts.sum()), *c.shape[1:]), dtype=c.dtype) for c in columns]
    for j in range(rounds):
        s_lo, s_hi = round_slice(send_counts, j, rounds)
        r_lo, r_hi = round_slice(recv_counts, j, rounds)
        # In one round every row goes and arrives in order: no index arrays, and rows are
        # received straight into the output (this is the common case and the memory peak).
        whole = rounds == 1
        if whole:
            take = order
        else:
            take = concat_ranges(sdispl + s_lo, s_hi - s_lo)
            if order is not None:
                take = order[take]
            place = concat_ranges(rdispl + r_lo, r_hi - r_lo)
        for c, out in enumerate(outs):
            col = columns[c]
            rb = row_bytes_of(col)
            rows = col if take is None else col[take]
            send = np.ascontiguousarray(rows).reshape(-1).view(np.uint8)
            del rows
            recv = out if whole else np.empty((len(place), *col.shape[1:]), dtype=col.dtype)
            rview = recv.reshape(-1).view(np.uint8)
            comm.Alltoallv([send, mpi_counts((s_hi - s_lo) * rb), MPI.BYTE],
                           [rview, mpi_counts((r_hi - r_lo) * rb), MPI.BYTE])
            del send
            if not whole:
                out[place] = recv
            if whole and isinstance(columns, list):
                columns[c] = None
            del col
    return outs


class ColumnMismatch(DistpartError):
    """Ranks tried to exchange columns of different dtypes or row shapes (a bug or bad output)."""


def _forms(columns: Sequence[np.ndarray]) -> List[Tuple[str, Tuple[int, ...]]]:
    return [(np.dtype(c.dtype).str, tuple(int(x) for x in c.shape[1:])) for c in columns]


def _forms_key(columns: Sequence[np.ndarray]) -> int:
    """A 56-bit digest of the columns' (dtype, row shape) list, the same on every rank that has
    it (so key and -key fit int64). Every rank must send the same forms: raw bytes of different
    widths would be cut into rows differently on each side (MPI_ERR_TRUNCATE, or silent garbage)."""
    return int.from_bytes(hashlib.blake2b(repr(_forms(columns)).encode(), digest_size=7).digest(), "little")


def _explain_mismatch(comm: Intracomm, columns: Sequence[np.ndarray]) -> None:
    """Raise ColumnMismatch naming each rank's forms (every rank calls it: the keys differed).
    The forms are a few short strings, so a lowercase allgather is fine on this path."""
    forms = _forms(columns)
    everyone = comm.allgather(forms)
    for i in range(max(len(f) for f in everyone)):
        seen = {tuple(f[i]) if i < len(f) else None for f in everyone}
        if len(seen) > 1:
            detail = ", ".join(f"rank {r}: {f[i][0]} {f[i][1]}" if i < len(f) else f"rank {r}: no column"
                               for r, f in enumerate(everyone))
            raise ColumnMismatch(f"ranks disagree on the dtype or row shape of exchanged column {i} ({detail})")
    raise ColumnMismatch(f"ranks disagree on the exchanged columns ({everyone})")


def exchange(comm: Intracomm, owner: np.ndarray, columns: Sequence[np.ndarray],
             max_bytes: int = DEFAULT_MAX_BYTES) -> Tuple[List[np.ndarray], np.ndarray]:
    """Send row i of every column to rank owner[i]. Returns (received columns, counts per source)."""
    order, counts = group_by_owner(np.asarray(owner), comm.Get_size())
    return alltoallv_grouped(comm, columns, counts, order, max_bytes)


def lookup(comm: Intracomm, keys: np.ndarray, bounds: np.ndarray, table: np.ndarray,
           max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """Distributed table lookup: table row for each key, answered by the key's owner rank.

    Rank r holds `table` for keys [bounds[r], bounds[r+1]) (row k - bounds[r] for key k);
    every key must be in [bounds[0], bounds[-1]). Collective.
    """
    keys = np.asarray(keys, dtype=np.int64)
    owner = np.searchsorted(bounds, keys, side="right") - 1
    order, counts = group_by_owner(owner, comm.Get_size())
    del owner  # each temporary is dropped as soon as the next exists: lookups run on big arrays
    (queries,), recv_counts = alltoallv_grouped(comm, [keys], counts, order, max_bytes)
    queries -= bounds[comm.Get_rank()]
    answers = [table[queries]]
    del queries
    (back,), _ = alltoallv_grouped(comm, answers, recv_counts, None, max_bytes)
    result = np.empty((len(keys), *table.shape[1:]), dtype=table.dtype)
    result[order] = back
    return result


def _allreduce(comm: Intracomm, arr: np.ndarray, op: str) -> np.ndarray:
    """Elementwise `op` (an MPI.Op's name) over ranks of an int64 array (buffer-based)."""
    from mpi4py import MPI
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    out = np.empty_like(arr)
    comm.Allreduce(arr, out, op=getattr(MPI, op))
    return out


def allreduce_sum(comm: Intracomm, arr: np.ndarray) -> np.ndarray:
    """Elementwise sum over ranks of an int64 array (buffer-based)."""
    return _allreduce(comm, arr, "SUM")


def allreduce_max(comm: Intracomm, arr: np.ndarray) -> np.ndarray:
    """Elementwise maximum over ranks of an int64 array (buffer-based)."""
    return _allreduce(comm, arr, "MAX")


def exscan_sum(comm: Intracomm, arr: np.ndarray) -> np.ndarray:
    """Elementwise sum over lower ranks (zeros on rank 0) of an int64 array."""
    from mpi4py import MPI
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    out = np.zeros_like(arr)
    comm.Exscan(arr, out, op=MPI.SUM)
    if comm.Get_rank() == 0:
        out[...] = 0  # MPI leaves rank 0's Exscan output undefined
    return out


def allgather_int64(comm: Intracomm, arr: np.ndarray) -> np.ndarray:
    """Stack every rank's equal-shaped int64 array: shape (nranks, *arr.shape)."""
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    out = np.empty((comm.Get_size(), *arr.shape), dtype=np.int64)
    comm.Allgather(arr, out)
    return out

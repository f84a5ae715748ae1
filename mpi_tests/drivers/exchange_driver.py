"""Run under mpiexec: checks exchange() and lookup() against their serial meaning.

Every rank builds the same global data from a shared seed, does its share through MPI
and compares with the answer computed serially; it exits 1 on any mismatch.
"""
import sys

import numpy as np
from mpi4py import MPI

from distpart.mpi.exchange import exchange, lookup

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rng = np.random.default_rng(42)
failures = []

# Global rows: each rank r holds rows of n_r items with 3 columns of different dtypes.
counts = rng.integers(0, 500, size)
counts[size // 2] = 0  # a rank with nothing to send
all_owner = [rng.integers(0, size, c) for c in counts]
all_ids = [np.arange(c, dtype=np.int64) + 10_000 * r for r, c in enumerate(counts)]
all_feat = [rng.standard_normal((c, 3)).astype(np.float16) for c in counts]
all_flag = [rng.integers(0, 2, c).astype(bool) for c in counts]

for max_bytes in (64, 1000, 1 << 28):  # many rounds, a few, one
    (ids, feat, flag), recv_counts = exchange(
        comm, all_owner[rank], [all_ids[rank], all_feat[rank], all_flag[rank]], max_bytes)
    # Expected: rows for this rank, grouped by source rank, in each source's order.
    want = [(all_ids[s][all_owner[s] == rank], all_feat[s][all_owner[s] == rank],
             all_flag[s][all_owner[s] == rank]) for s in range(size)]
    if not np.array_equal(ids, np.concatenate([w[0] for w in want])):
        failures.append(f"ids differ (max_bytes={max_bytes})")
    if not np.array_equal(feat.view(np.uint16), np.concatenate([w[1] for w in want]).view(np.uint16)):
        failures.append(f"float16 rows differ (max_bytes={max_bytes})")
    if not np.array_equal(flag, np.concatenate([w[2] for w in want])):
        failures.append(f"bool rows differ (max_bytes={max_bytes})")
    if not np.array_equal(recv_counts, [len(w[0]) for w in want]):
        failures.append("receive counts differ")

# lookup: a table of 1000 keys split unevenly (rank 0 may hold none).
table_all = rng.integers(-10**12, 10**12, (1000, 2))
bounds = np.sort(np.concatenate([[0, 1000], rng.integers(0, 1000, size - 1)]))
bounds[1] = bounds[0] if size > 1 else bounds[1]
mine = table_all[bounds[rank]:bounds[rank + 1]]
keys = rng.integers(0, 1000, 777 + rank)
for max_bytes in (100, 1 << 28):
    got = lookup(comm, keys, bounds, mine, max_bytes)
    if not np.array_equal(got, table_all[keys]):
        failures.append(f"lookup differs (max_bytes={max_bytes})")



class CountingComm:
    """COMM_WORLD, recording the bytes this rank sends and receives in each Alltoallv."""

    def __init__(self, comm):
        self._comm, self.calls = comm, []

    def Alltoallv(self, send, recv):
        self.calls.append((sum(send[1][0]), sum(recv[1][0])))
        return self._comm.Alltoallv(send, recv)

    def __getattr__(self, name):
        return getattr(self._comm, name)


# The per-call cap: no Alltoallv moves more than max_bytes in or out of a rank (a row is 8 bytes).
# 1000 rows are 125 rounds at 64 bytes on one rank: as many rounds as the cap needs prove it.
ROWS = 1000
for max_bytes in (64, 1000, 4096):
    counting = CountingComm(comm)
    big = rng.integers(0, size, ROWS + 100 * rank)
    exchange(counting, big, [np.arange(len(big), dtype=np.int64)], max_bytes)
    worst = max(max(c) for c in counting.calls)
    if worst > max_bytes:
        failures.append(f"an Alltoallv moved {worst} bytes with max_bytes={max_bytes}")
    if len(counting.calls) < ROWS * 8 // max_bytes // size:
        failures.append(f"too few rounds ({len(counting.calls)}) for max_bytes={max_bytes}")

# Ranks sending different dtypes in one column get the same clear error, never a truncation.
if size > 1:
    from distpart.mpi.exchange import ColumnMismatch
    col = np.zeros(10, dtype=np.float32 if rank == 0 else np.float64)
    try:
        exchange(comm, np.full(10, (rank + 1) % size), [col])
        failures.append("a dtype disagreement was not noticed")
    except ColumnMismatch as e:
        if "rank 0: <f4 ()" not in str(e) or "rank 1: <f8 ()" not in str(e):
            failures.append(f"unclear mismatch message: {e}")

if failures:
    print(f"rank {rank}: " + "; ".join(failures), file=sys.stderr)
everyone = comm.allgather(len(failures))
if rank == 0:
    print("exchange checks:", "FAILED" if any(everyone) else "passed")
sys.exit(1 if any(everyone) else 0)

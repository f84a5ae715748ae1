"""Run under mpiexec: exchange() and lookup() with MPI's int count limit lowered to a few
hundred bytes, so every call is split into many Alltoallv rounds as one past 2**31 - 1
bytes would be; and the int64 reductions on values past 2**31.

Every rank builds the same global data from a shared seed and compares what arrives with
the serial answer; it exits 1 on any mismatch.
"""
import sys

import numpy as np
from mpi4py import MPI

from distpart.mpi import exchange as ex

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
LIMIT = 256  # bytes: the default max_bytes (256 MiB) no longer bounds anything, only this
ex.MAX_MPI_COUNT = LIMIT
rng = np.random.default_rng(7)
failures = []


class CountingComm:
    """COMM_WORLD, recording the largest end (displacement + count) of each Alltoallv side."""

    def __init__(self, comm):
        self._comm, self.calls = comm, []

    def Alltoallv(self, send, recv):
        ends = [max((d + c for c, d in zip(*side[1])), default=0) for side in (send, recv)]
        self.calls.append(ends)
        return self._comm.Alltoallv(send, recv)

    def __getattr__(self, name):
        return getattr(self._comm, name)


# Rows of three columns (8, 12 and 1 bytes); one rank sends nothing, ranks send unequal amounts.
counts = rng.integers(200, 900, size)
counts[size // 2] = 0
owner = [rng.integers(0, size, c) for c in counts]
ids = [np.arange(c, dtype=np.int64) + 2**33 + 10**6 * r for r, c in enumerate(counts)]
feat = [rng.standard_normal((c, 3)).astype(np.float32) for c in counts]
flag = [rng.integers(0, 2, c).astype(np.uint8) for c in counts]

counting = CountingComm(comm)
(got_ids, got_feat, got_flag), recv_counts = ex.exchange(counting, owner[rank], [ids[rank], feat[rank], flag[rank]])
want = [(ids[s][owner[s] == rank], feat[s][owner[s] == rank], flag[s][owner[s] == rank]) for s in range(size)]
if not np.array_equal(got_ids, np.concatenate([w[0] for w in want])):
    failures.append("ids differ")
if not np.array_equal(got_feat.view(np.uint32), np.concatenate([w[1] for w in want]).view(np.uint32)):
    failures.append("float32 rows differ")
if not np.array_equal(got_flag, np.concatenate([w[2] for w in want])):
    failures.append("uint8 rows differ")
if recv_counts.tolist() != [len(w[0]) for w in want]:
    failures.append(f"receive counts differ: {recv_counts.tolist()}")
worst = max((max(c) for c in counting.calls), default=0)
if worst > LIMIT:
    failures.append(f"an Alltoallv side ended at byte {worst}, past the limit {LIMIT}")
moved = max(int(counts[rank]), len(got_ids)) * 21
if len(counting.calls) < 3 * (moved // LIMIT):  # three columns, each split
    failures.append(f"only {len(counting.calls)} Alltoallv calls for {moved} bytes at {LIMIT} per call")

# lookup: keys past 2**31 in a table split unevenly over ranks, answered under the same limit.
n = 3000
first = 2**31 + 5
table = np.stack([np.arange(n, dtype=np.int64) * 3 + 2**32, -np.arange(n, dtype=np.int64)], axis=1)
cuts = np.sort(rng.integers(0, n, size - 1))
bounds = np.concatenate([[0], cuts, [n]]).astype(np.int64) + first
mine = table[bounds[rank] - first:bounds[rank + 1] - first]
keys = rng.integers(first, first + n, 500 + 37 * rank)
got = ex.lookup(comm, keys, bounds, mine)
if not np.array_equal(got, table[keys - first]):
    failures.append("lookup differs")

# A limit below one row per peer of the widest column cannot be met: a clear error, not a hang.
ex.MAX_MPI_COUNT = 8 * size - 1
try:
    ex.exchange(comm, np.arange(size * 2) % size, [np.arange(size * 2, dtype=np.int64)])
    failures.append("a limit below one row per peer was not refused")
except ex.CountOverflow as e:
    if f"({8 * size - 1})" not in str(e):
        failures.append(f"unclear overflow message: {e}")
ex.MAX_MPI_COUNT = LIMIT

# The int64 collectives on values past 2**31 (sums of counts and offsets over ranks).
mine = np.array([3 * 10**9 + rank, 2**31 - 1, -(2**40)], dtype=np.int64)
every = np.array([[3 * 10**9 + r, 2**31 - 1, -(2**40)] for r in range(size)], dtype=np.int64)
if ex.allreduce_sum(comm, mine).tolist() != every.sum(axis=0).tolist():
    failures.append("allreduce_sum differs")
if ex.allreduce_max(comm, mine).tolist() != every.max(axis=0).tolist():
    failures.append("allreduce_max differs")
if ex.exscan_sum(comm, mine).tolist() != every[:rank].sum(axis=0).tolist():
    failures.append("exscan_sum differs")
if ex.allgather_int64(comm, mine).tolist() != every.tolist():
    failures.append("allgather_int64 differs")

if failures:
    print(f"rank {rank}: " + "; ".join(failures), file=sys.stderr)
everyone = comm.allgather(len(failures))
if rank == 0:
    print(f"exchange_large checks: {'FAILED' if any(everyone) else 'passed'} "
          f"({len(counting.calls)} Alltoallv calls on rank 0)")
sys.exit(1 if any(everyone) else 0)

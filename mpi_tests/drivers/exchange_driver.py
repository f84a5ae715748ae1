"""Run under mpiexec: checks exchange() and lookup() against their serial meaning.

Every rank builds the same global data from a shared seed, does its share through MPI
and compares with the answer computed serially; it exits 1 on any mismatch.
"""
import sys

import numpy as np
from mpi4py import MPI

from distpart.exchange import exchange, lookup

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

if failures:
    print(f"rank {rank}: " + "; ".join(failures), file=sys.stderr)
everyone = comm.allgather(len(failures))
if rank == 0:
    print("exchange checks:", "FAILED" if any(everyone) else "passed")
sys.exit(1 if any(everyone) else 0)

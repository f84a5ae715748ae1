"""How an MPI driver script ends: every rank's failures on stderr, one verdict line from
rank 0, and the same exit status on every rank (so mpiexec's status is the test's)."""
from __future__ import annotations

import sys
from typing import List, NoReturn


def finish(comm, failures: List[str], what: str) -> NoReturn:
    rank = comm.Get_rank()
    if failures:
        print(f"rank {rank}: " + "; ".join(failures), file=sys.stderr)
    bad = comm.allreduce(len(failures))
    if rank == 0:
        print(f"{what} checks:", "FAILED" if bad else "passed")
    sys.exit(1 if bad else 0)

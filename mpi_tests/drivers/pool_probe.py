"""Run under mpiexec by test_rank_pool.py: what a rank sees of the process it runs in.

Every rank prints its rank, its argv and its peak RSS in MiB, warns once (a warning Python
shows once per process), and with `grow` first allocates and frees 200 MiB; with `bug` rank 1
raises instead (a bug: an exception nobody catches).
"""
import resource
import sys
import warnings

import numpy as np
from mpi4py import MPI

rank = MPI.COMM_WORLD.Get_rank()
if "grow" in sys.argv[1:]:
    block = np.ones(200 << 20, dtype=np.uint8)
    del block
if "bug" in sys.argv[1:] and rank == 1:
    raise RuntimeError("a bug on rank 1")
warnings.warn("pool probe warning", UserWarning)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
print(f"rank {rank} argv {sys.argv[1:]} peak {peak}", flush=True)
MPI.COMM_WORLD.Barrier()

"""Run under mpiexec: the ParMETIS binding on hand-built graphs, with the real library.

Checks: the library loads and passes the same-MPI guard; a 2-D grid graph split over all
ranks gets a valid, balanced partition into P = R and 2R parts; the same graph with every
vertex on the first rank(s) and the rest empty (which ParMETIS itself rejects) still works.
"""

import numpy as np
from mpi4py import MPI

from distpart.assign import parmetis
from outcome import finish  # noqa: E402 (this folder is on sys.path)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
lib = parmetis.load()
failures = []

side = 40
n = side * side
ids = np.arange(n).reshape(side, side)
pairs = np.concatenate([np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], 1),
                        np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], 1)])
both = np.concatenate([pairs, pairs[:, ::-1]])


def partition(vtxdist, nparts, vwgt=None):
    lo, hi = vtxdist[rank], vtxdist[rank + 1]
    mine = both[(both[:, 0] >= lo) & (both[:, 0] < hi)]
    mine = mine[np.lexsort((mine[:, 1], mine[:, 0]))]
    xadj = np.concatenate([[0], np.cumsum(np.bincount(mine[:, 0] - lo, minlength=hi - lo))])
    adjncy = mine[:, 1]
    w = None if vwgt is None else vwgt[lo:hi]
    part = parmetis.part_kway(lib, comm, vtxdist, xadj, adjncy, w, nparts, 1.05, seed=1)
    return np.concatenate(comm.allgather(part))


for label, vtxdist in [("even", (np.arange(size + 1) * n) // size),
                       ("empty ranks", np.array([0] + [n // 2] * (size - 1) + [n]) if size > 1 else np.array([0, n]))]:
    for nparts in (size, 2 * size):
        part = partition(vtxdist, nparts)
        sizes = np.bincount(part, minlength=nparts)
        if len(part) != n or part.min() < 0 or part.max() >= nparts:
            failures.append(f"{label}, P={nparts}: invalid partition IDs")
        elif nparts > 1 and sizes.max() > 1.05 * n / nparts + 1:
            failures.append(f"{label}, P={nparts}: unbalanced {sizes.tolist()}")
        cut = int((part[pairs[:, 0]] != part[pairs[:, 1]]).sum())
        if nparts > 1 and cut > 4 * side * nparts:   # a grid cut into P blocks cuts O(side * P) edges
            failures.append(f"{label}, P={nparts}: cut {cut} too large")

# Two constraints: the left half of the grid weighs on constraint 1 only.
vwgt = np.stack([np.ones(n, np.int64), (np.arange(n) % side < side // 2).astype(np.int64)], 1)
part = partition((np.arange(size + 1) * n) // size, 2 * size, vwgt)
for c in range(2):
    loads = np.bincount(part, weights=vwgt[:, c], minlength=2 * size)
    if loads.max() > 1.08 * loads.mean():
        failures.append(f"constraint {c} unbalanced: {loads.tolist()}")

finish(comm, failures, "parmetis")

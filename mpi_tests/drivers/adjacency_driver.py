"""Run under mpiexec: the partitioner's graph (build_csr) equals a serial reference.

The bundled example (CSV, NumPy and Parquet edges, 4 edge types, duplicates and self loops)
is read with a tiny message cap, so every edge type comes in many pieces and the ranks get
different numbers of them; rows must be the symmetrized simple graph, sorted, in-degrees
the input's, in 32-bit and 64-bit indices.
"""
import shutil
import tempfile
from pathlib import Path

import numpy as np
from mpi4py import MPI

from distpart.assign.adjacency import build_csr, piece_rows, type_offsets
from distpart.chunked.metadata import load_metadata
from distpart.synthetic import example_graph, read_whole_graph
from outcome import finish  # noqa: E402 (this folder is on sys.path)

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
folder = Path(tempfile.mkdtemp(prefix="adjacency-")) if rank == 0 else None
folder = comm.bcast(str(example_graph(folder / "g", scale=2).parent) if rank == 0 else None)
meta = load_metadata(folder)
offsets = type_offsets(meta)
n = int(offsets[-1])
ref = read_whole_graph(Path(folder) / "metadata.json")
us, vs = [], []
for etype, (src, dst) in ref["edges"].items():
    s, _, d = etype.split(":")
    us.append(src + offsets[meta.ntype_id(s)])
    vs.append(dst + offsets[meta.ntype_id(d)])
u, v = np.concatenate(us), np.concatenate(vs)
want_in = np.bincount(v, minlength=n)
keep = u != v
pairs = np.unique(np.concatenate([np.stack([u[keep], v[keep]], 1), np.stack([v[keep], u[keep]], 1)]), axis=0)

failures = []
max_bytes = 1 << 14
assert piece_rows(max_bytes) < 2000, "the cap must cut the example into many pieces"
for dtype in (np.int32, np.int64):
    csr = build_csr(comm, meta, max_bytes, index_dtype=dtype)
    lo, hi = int(csr.vtxdist[rank]), int(csr.vtxdist[rank + 1])
    if csr.xadj.dtype != dtype or csr.adjncy.dtype != dtype:
        failures.append(f"{np.dtype(dtype)}: got {csr.xadj.dtype}/{csr.adjncy.dtype}")
    mine = pairs[(pairs[:, 0] >= lo) & (pairs[:, 0] < hi)]
    want_xadj = np.concatenate([[0], np.cumsum(np.bincount(mine[:, 0] - lo, minlength=hi - lo))])
    if not np.array_equal(csr.xadj, want_xadj) or not np.array_equal(csr.adjncy, mine[:, 1]):
        failures.append(f"{np.dtype(dtype)}: rows differ from the symmetrized simple graph")
    if not np.array_equal(csr.in_degree, want_in[lo:hi]):
        failures.append(f"{np.dtype(dtype)}: in-degrees differ")

comm.Barrier()
if rank == 0:
    shutil.rmtree(Path(folder).parent, ignore_errors=True)
finish(comm, failures, "adjacency")

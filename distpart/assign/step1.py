"""Step 1's one interface to a graph partitioner, as kaminpar-dist's `initial_partitioner.h`
and `factories.h` give one to its initial partitioners.

A method is a module (`parmetis`, `kaminpar`, `multilevel`) with:

- `ALGO_NAME`: what `partition_meta.json` calls its assignments;
- `setup(meta, balance, rank, **options) -> Setup`: its own refusals and what it needs of
  the graph (integer width, vertex order, weight columns), run on every rank before any work;
  an optional `refuse_balance(meta, balance)` runs first, for balance options it cannot meet;
- `partition(comm, graph, vwgt, k, imbalance, seed, setup, max_bytes, progress) -> parts`:
  the blocks of this rank's vertices [graph.lo, graph.hi), in the input's numbering.

`run_method` does what every method needs once: the option checks, the distributed CSR
(`adjacency.build_csr`; in blocks of equal size, or cut by load for a method whose result
does not depend on the blocks, `Setup.vertex_blocks`), the vertex weights of the balance
options (`balance.vertex_weights`) without the constraints nobody can meet (rank 0 prints
them), and the split of the partition back into per-type blocks (`split_by_type`).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, List, Optional

import numpy as np

from ..chunked.blocks import rank_bounds
from ..chunked.readers import block_bounds
from ..mpi.collective import agreed
from ..mpi.exchange import allreduce_sum
from .adjacency import build_csr, load_blocks, type_offsets
from .assignment import Assignment, NodeBlock
from .balance import check_options, usable_constraints, vertex_weights
from .ordering import degrees, hubs_first

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ..chunked.metadata import GraphMeta
    from ..run.progress import Progress
    from .adjacency import DistributedCSR, Renumbering
    from .balance import BalanceOptions


@dataclass
class Setup:
    """What a method asks of the shared prologue, and what it keeps for its `partition`."""

    index_dtype: "np.dtype | type" = np.int64   # of the CSR's xadj/adjncy
    vertex_order: str = "input"                 # "degree": hubs first (`ordering`)
    # "equal": as many vertices on every rank; "load": as many adjacency entries + vertices
    # (`adjacency.load_blocks`), for a method whose result does not depend on the blocks
    vertex_blocks: str = "equal"
    # (meta, balance, offsets, lo, hi, in_degree) -> (weights (hi - lo, ncon), column names)
    weights: Callable = vertex_weights
    context: Any = None                         # the method's own (a loaded library, options)


@dataclass
class Step1Graph:
    """The graph every method partitions: the symmetrized homogeneous graph (node types one
    after the other), this rank's rows, and how its vertices map back to the input."""

    meta: "GraphMeta"
    csr: "DistributedCSR"
    names: List[str]                        # the vertex-weight columns kept
    lo: int                                 # this rank's input vertices [lo, hi)
    hi: int
    in_degree: np.ndarray                   # of this rank's input vertices
    numbering: "Optional[Renumbering]" = None   # the CSR's numbering, if not the input's


def run_method(comm: "Intracomm", meta: "GraphMeta", num_parts: int, balance: "BalanceOptions",
               module: ModuleType, seed: int, max_bytes: int, progress: "Progress",
               **options: Any) -> Assignment:
    """Step 1 by the graph partitioner `module` (see the module docstring). Collective."""
    rank = comm.Get_rank()
    with agreed(comm):
        refuse = getattr(module, "refuse_balance", None)
        if refuse is not None:
            refuse(meta, balance)
        check_options(meta, balance)
        setup = module.setup(meta, balance, rank, **options)
    graph = build_graph(comm, meta, setup, max_bytes, progress)
    with agreed(comm):
        vwgt, names = setup.weights(meta, balance, type_offsets(meta), graph.lo, graph.hi, graph.in_degree)
    if names:
        keep, notes = usable_constraints(allreduce_sum(comm, vwgt.sum(axis=0)), names, num_parts,
                                         balance.imbalances(names))
        if rank == 0:
            for note in notes:
                print(f"assign: constraint {note}", flush=True)
        vwgt, names = vwgt[:, keep], [n for n, k in zip(names, keep) if k]
    if vwgt.shape[1] == 0:  # every column dropped: balance node counts
        vwgt, names = np.ones((graph.hi - graph.lo, 1), dtype=np.int64), ["nodes"]
    graph.names = names
    parts = module.partition(comm, graph, vwgt, num_parts, balance.imbalances(names), seed, setup,
                             max_bytes, progress)
    return split_by_type(comm, meta, num_parts, module.ALGO_NAME, parts, graph.lo, graph.hi)


def build_graph(comm: "Intracomm", meta: "GraphMeta", setup: Setup, max_bytes: int,
                progress: "Progress") -> Step1Graph:
    """The distributed CSR of the symmetrized homogeneous graph, in the order and blocks
    `setup` asks for. Collective."""
    numbering = in_degree = blocks = None
    if setup.vertex_order == "degree":
        degree, in_degree = degrees(comm, meta, max_bytes, progress)
        numbering = hubs_first(comm, degree)
        del degree
    elif setup.vertex_blocks == "load":
        blocks = load_blocks(comm, meta, max_bytes, progress)
    csr = build_csr(comm, meta, max_bytes, progress, index_dtype=setup.index_dtype, numbering=numbering,
                    blocks=blocks)
    # The input's blocks, whatever the CSR's numbering (the weights and the result are in it).
    vtxdist = block_bounds(int(type_offsets(meta)[-1]), comm.Get_size()) if numbering is not None else csr.vtxdist
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    return Step1Graph(meta, csr, [], lo, hi, csr.in_degree if in_degree is None else in_degree, numbering)


def split_by_type(comm: "Intracomm", meta: "GraphMeta", num_parts: int, algo_name: str,
                  part: np.ndarray, lo: int, hi: int) -> Assignment:
    """The Assignment whose partitions of homogeneous IDs [lo, hi) (node types one after the
    other, as the partitioners number them) are `part`: one NodeBlock per type. Collective."""
    offsets = type_offsets(meta)
    blocks = {}
    for t, ntype in enumerate(meta.node_types):
        n = meta.num_nodes(ntype)
        a, b = (int(np.clip(x - offsets[t], 0, n)) for x in (lo, hi))
        blocks[ntype] = NodeBlock(a, part[a + offsets[t] - lo: b + offsets[t] - lo], rank_bounds(comm, a, n))
    return Assignment(num_parts, algo_name, blocks)

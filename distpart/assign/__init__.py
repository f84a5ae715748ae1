"""Step 1: the partition of every node.

`assignment` is the step's product (`Assignment`, DGL's `<ntype>.txt` and
`partition_meta.json`, read and written) and the random method; the rest is what the graph
partitioners need: `adjacency` builds the distributed CSR, `ordering` puts hubs first, `nonempty` fills empty partitions, `objective`
weighs the edges by what training fetches (`--objective fetch`), `options`
checks Step 1's option values while the command line is parsed,
`balance` turns balance options into vertex weights, `native` is the ctypes plumbing of
the METIS-family bindings, `metis` binds serial METIS, `parhip` writes the graph KaMinPar
reads. The graph partitioners share one interface (`step1`): `parmetis` (ParMETIS),
`kaminpar` (KaMinPar, run by rank 0) and `multilevel/` (our own distributed multilevel
method). Dispatch and the checks import only `assignment` from here. `compute_assignment`
below is the one place that picks a method.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

__all__ = ["METHODS", "compute_assignment"]

if TYPE_CHECKING:
    from pathlib import Path

    from mpi4py.MPI import Intracomm

    from ..chunked.metadata import GraphMeta
    from ..run.progress import Progress
    from .assignment import Assignment
    from .balance import BalanceOptions
    from .objective import Objective

# Step 1's methods, as `--method` names them.
METHODS = ("multilevel", "parmetis", "kaminpar", "random")


def compute_assignment(comm: "Intracomm", meta: "GraphMeta", num_parts: int, method: str,
                       balance: "BalanceOptions", seed: int = 0, max_bytes: Optional[int] = None,
                       progress: "Optional[Progress]" = None, *, vertex_order: str = "degree",
                       threads: Optional[int] = None, work_dir: "str | Path" = ".",
                       vcycles: Optional[int] = None, objective: "Optional[Objective]" = None) -> "Assignment":
    """Step 1 by the named method: the one place that chooses, for the command line and
    `partition_graph`. Collective. Each method's module is imported only when chosen
    (KaMinPar and ParMETIS are optional at run time). Whatever the method, no partition is
    left empty where the graph has nodes enough (`nonempty`). `objective` (default: the edge
    cut) is what the partitioner minimises (`objective`; `fetch` and `vol` with multilevel only)."""
    from ..mpi.exchange import DEFAULT_MAX_BYTES
    from .nonempty import fill_empty_partitions
    max_bytes = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    if method not in METHODS:
        raise ValueError(f"unknown Step 1 method {method!r}; choose one of {', '.join(METHODS)}")
    if objective is not None and objective.name != "cut" and method != "multilevel":
        from ..errors import InputError
        raise InputError(None, f"--objective {objective.name} needs --method multilevel (--method {method} "
                               f"minimises the edge cut)")
    if method == "random":
        from .assignment import random_assignment
        assignment = random_assignment(comm, meta, num_parts, seed)
    else:
        from importlib import import_module

        from ..run.progress import Progress
        from .step1 import run_method
        options = {"kaminpar": dict(threads=threads, work_dir=work_dir),
                   "multilevel": dict(vcycles=vcycles, objective=objective),
                   "parmetis": dict(vertex_order=vertex_order)}[method]
        assignment = run_method(comm, meta, num_parts, balance, import_module(f".{method}", __name__), seed,
                                max_bytes, progress or Progress.off(), **options)
    return fill_empty_partitions(comm, meta, assignment, progress)

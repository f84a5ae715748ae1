"""distpart: MPI-parallel partitioning of DGL chunked graphs for distributed GNN training.

The package reads as the pipeline, one folder per part, each depending only on those
before it (tests/test_import_order.py enforces the order):

- `errors`, `paths`, `arrays`: what every part needs (error kinds, output names, array primitives);
- `mpi/`: every MPI collective the other parts call;
- `run/`: what keeps a run safe and visible (progress, stage stats, locks, output folders, resume);
- `chunked/`: DGL's chunked input format, read, checked and written;
- `assign/`: Step 1, the partition of every node;
- `partitions/`: the output format (DGL's partitions), written and read back;
- `dispatch/`: Step 2, moving and relabelling nodes, edges and features, writing partitions;
- `check/`: verify and report an output;
- `synthetic/`: example and benchmark inputs;
- `launch/`: `distpart launch`, a job across machines (host lists, the mpiexec plan, the probe);
- `steps`: the pipeline's steps on plain values, shared by the command line and `partition_graph`;
- `commands`, `api`: each `distpart` subcommand as one function, and `partition_graph`;
- `cli`: the `distpart` command (its parser, MPI start-up, exit codes);
- `dgltools/`: scripts that stand in for DGL's `tools/` folder (`distpart tools-path`).

Besides the `distpart` command, the package offers a DGL-free loading API for its outputs
(`load_partition`, `load_partition_feats`, `load_partition_book`, `load_orig_ids`), DGL's
in-memory `partition_graph`, the chunk writer `write_graph` and the heterogeneous/homogeneous
ID converter `IdConverter`. They are resolved on first use, so `import distpart` imports
neither mpi4py nor torch nor pyarrow.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_LAZY = {
    "load_partition": "partitions.loader",
    "load_partition_feats": "partitions.loader",
    "load_partition_book": "partitions.loader",
    "load_orig_ids": "partitions.loader",
    "partition_graph": "api",
    "write_graph": "chunked.write",
    "IdConverter": "chunked.ids",
    "IdRangeError": "chunked.ids",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""distpart: MPI-parallel partitioning of DGL chunked graphs for distributed GNN training.

Besides the `distpart` command, the package offers a DGL-free loading API for its
outputs (`load_partition`, `load_partition_feats`, `load_partition_book`,
`load_orig_ids`, from `distpart.loader`), DGL's in-memory `partition_graph` (from
`distpart.api`) and the heterogeneous/homogeneous ID converter `IdConverter` (from
`distpart.ids`). They are resolved on first use, so `import distpart` imports neither
mpi4py nor torch nor pyarrow.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LOADER_API = ("load_partition", "load_partition_feats", "load_partition_book", "load_orig_ids")
_LAZY = {"partition_graph": "api", "IdConverter": "ids", "IdRangeError": "ids"}
__all__ = ["__version__", *_LOADER_API, *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LOADER_API:
        from . import loader

        return getattr(loader, name)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

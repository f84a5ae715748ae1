"""Refusing a run that cannot finish: output size and memory estimated from the metadata
before any work, and disk errors while writing turned into one clear message.

A job that dies after an hour because the output file system filled up wastes the hour;
the estimates below are cheap (metadata only) and printed with the refusal so the user
can judge them. They are estimates: `--no-space-check` skips the disk check where a file
system reports free space wrongly (quotas, some parallel file systems).
"""
from __future__ import annotations

import errno
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from .errors import InputError, OutputError
from .metadata import GraphMeta
from .readers import FeatureSource

# Bytes per item in a partition's files (graph.dgl with _ID/_TYPE/inner flags, orig IDs).
_EDGE_BYTES = 8 + 4 + 1 + 8              # _ID, _TYPE, inner_edge, orig_eids
# Each sparse format stored: COO src + dst; CSR/CSC indices + edge IDs, and an indptr entry
# per (inner or halo) node.
_FORMAT_EDGE_BYTES, _INDPTR_BYTES = 16, 8
_NODE_BYTES = 8 + 4 + 1 + 8              # _ID, _TYPE, inner_node, orig_nids
_HALO_BYTES = 8 + 4 + 1
# Dispatch's peak per rank, measured (1M nodes / 10M edges, 2 ranks: 578 MB): about 115 B
# per edge and 40 B per node held by the rank, plus twice its share of feature rows
# (received rows and the output buffer), plus the interpreter and libraries.
_RSS_PER_EDGE, _RSS_PER_NODE, _RSS_BASE = 120, 40, 150 << 20


def feature_bytes(meta: GraphMeta) -> int:
    """Bytes of every node and edge feature (from file headers; nothing is read)."""
    total = 0
    for group in (meta.node_data, meta.edge_data):
        for feats in group.values():
            for files in feats.values():
                source = FeatureSource(files)
                total += source.rows * source.row_bytes
    return total


def estimate_output_bytes(meta: GraphMeta, num_parts: int, graph_formats: Sequence[str] = ("coo",)) -> int:
    """Expected size of all partition files; halo nodes are estimated from the edge count."""
    nodes, edges = sum(meta.node_counts), sum(meta.edge_counts)
    halo = min(int(edges * (1 - 1 / num_parts)), nodes * (num_parts - 1))
    sparse = sum(edges * _FORMAT_EDGE_BYTES + (0 if f == "coo" else (nodes + halo) * _INDPTR_BYTES)
                 for f in graph_formats)
    return sparse + edges * _EDGE_BYTES + nodes * _NODE_BYTES + halo * _HALO_BYTES + feature_bytes(meta)


def estimate_peak_rss(meta: GraphMeta, nranks: int) -> int:
    """Expected peak resident memory of one rank during dispatch."""
    nodes, edges = sum(meta.node_counts), sum(meta.edge_counts)
    per_rank = (edges * _RSS_PER_EDGE + nodes * _RSS_PER_NODE + 2 * feature_bytes(meta)) / nranks
    return int(per_rank) + _RSS_BASE


def gib(n: float) -> str:
    """Bytes for people: '812 KiB', '3.4 MiB', '1.25 GiB'."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{int(n)} B"


def check_space(out_dir: Path, need: int) -> None:
    """Refuse when the file system holding `out_dir` has less free space than `need`."""
    probe = Path(out_dir)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need:
        raise InputError(out_dir, f"the output needs about {gib(need)} but its file system has "
                                  f"{gib(free)} free; free space or choose another folder "
                                  f"(--no-space-check skips this estimate)")


def check_memory(estimate: int, limit_gb: float) -> None:
    if estimate > limit_gb * 2**30:
        raise InputError(None, f"dispatch needs about {gib(estimate)} per rank but --max-memory-gb is "
                               f"{limit_gb:g}; use more ranks (memory per rank falls as 1/R)")


@contextmanager
def writing(path: "str | os.PathLike[str]") -> Iterator[None]:
    """Turn an OS error while writing `path` into an OutputError with a clear message."""
    try:
        yield
    except OSError as e:
        if isinstance(e, (FileNotFoundError, IsADirectoryError)) or e.errno is None:
            raise
        where = getattr(e, "filename", None) or path
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OutputError(where, f"no space left on the output's file system while writing "
                                     f"({os.strerror(e.errno)}); free space and run again") from None
        raise OutputError(where, f"cannot write: {e.strerror or e}") from None


# glibc's mallopt parameter number, and the threshold distpart fixes it at.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20


def return_freed_memory_to_the_os() -> bool:
    """Make glibc serve every allocation of 1 MiB or more with its own mmap, returned to
    the OS when freed. By default glibc raises its mmap threshold each time such a block is
    freed (up to 32 MiB), so the stages' many medium arrays (pieces, exchange buffers) end
    up on the heap, whose freed space it keeps: measured on a 2M-node/20M-edge graph, the
    partitioner's graph then peaked at 41-47 bytes per input edge per rank instead of 26-30.
    A user's own MALLOC_MMAP_THRESHOLD_ wins. Returns whether the setting was applied."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False

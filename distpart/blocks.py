"""This rank's block of the input graph: edges with their global edge IDs, checked as read.

Each edge type's files are cut into one contiguous block per rank (see `readers`); the
rank's block covers a contiguous range of edge IDs whose start is a prefix sum over
ranks. Row counts per file and endpoint ranges are checked here, as the data is read, so
that `dispatch` and `verify` catch bad input without a separate pass over the edges.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from .arrays import first_outside
from .collective import agreed
from .errors import InputError
from .exchange import allgather_int64, allreduce_sum, exscan_sum
from .metadata import EdgeType, GraphMeta
from .progress import Progress
from .readers import edge_file_sizes, pieces_of_block, read_edge_piece

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


@dataclass
class EdgeBlock:
    """Edges [start, start + len(src)) of one edge type, endpoints as per-type node IDs."""

    start: int
    src: np.ndarray
    dst: np.ndarray

    @property
    def orig_ids(self) -> np.ndarray:
        return np.arange(self.start, self.start + len(self.src), dtype=np.int64)


def read_edge_block(comm: Intracomm, meta: GraphMeta, etype: EdgeType, progress: Optional[Progress] = None,
                    weight: float = 1.0) -> EdgeBlock:
    """Read and check this rank's block of `etype`'s edges. Collective.

    Each piece read advances `progress` by `weight` per edge (the caller's share of its task).
    """
    progress = progress or Progress.off()
    files = etype.files
    n_src, n_dst = meta.num_nodes(etype.src), meta.num_nodes(etype.dst)
    rows_per_file = np.zeros(len(files.paths), dtype=np.int64)
    srcs, dsts = [], []
    with agreed(comm):
        pieces = pieces_of_block(edge_file_sizes(files), comm.Get_rank(), comm.Get_size())
        for piece in pieces:
            src, dst = read_edge_piece(files, piece)
            path = files.paths[piece.file]
            row0 = None if files.fmt.name == "csv" else piece.start
            _check_range(src, n_src, path, f"source node type '{etype.src}'", row0)
            _check_range(dst, n_dst, path, f"destination node type '{etype.dst}'", row0)
            rows_per_file[piece.file] += len(src)
            progress.advance(len(src) * weight)
            srcs.append(src)
            dsts.append(dst)
    totals = allreduce_sum(comm, rows_per_file)
    with agreed(comm):
        for path, found, declared in zip(files.paths, totals, etype.chunk_counts):
            if found != declared:
                raise InputError(path, f"has {found} edges but num_edges_per_chunk for "
                                       f"'{etype.name}' says {declared}")
    src = np.concatenate(srcs) if srcs else np.empty(0, np.int64)
    dst = np.concatenate(dsts) if dsts else np.empty(0, np.int64)
    start = int(exscan_sum(comm, np.array([len(src)]))[0])
    return EdgeBlock(start, src, dst)


def _check_range(ids: np.ndarray, n: int, path, what: str, row0) -> None:
    bad = first_outside(ids, n)
    if bad is None:
        return
    at = f" at row {row0 + bad}" if row0 is not None else ""
    raise InputError(path, f"edge endpoint {int(ids[bad])}{at} is outside [0, {n}) of the {what}")


def rank_bounds(comm: Intracomm, start: int, total: int) -> np.ndarray:
    """Boundaries (length nranks+1) of contiguous per-rank ID blocks, from each rank's start."""
    starts = allgather_int64(comm, np.array([start]))[:, 0]
    return np.concatenate([starts, [total]]).astype(np.int64)

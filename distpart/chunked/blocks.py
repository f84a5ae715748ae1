"""This rank's block of the input graph: edges with their global edge IDs, checked as read.

Each edge type's files are cut into one contiguous block per rank (see `readers`); the
rank's block covers a contiguous range of edge IDs whose start is a prefix sum over
ranks. Row counts per file and endpoint ranges are checked here, as the data is read, so
that `dispatch` and `verify` catch bad input without a separate pass over the edges.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

import numpy as np

from ..arrays import first_outside, id_dtype
from ..mpi.collective import agreed
from ..errors import InputError
from ..mpi.exchange import allgather_int64, allreduce_max, allreduce_sum, exscan_sum
from .metadata import EdgeType, GraphMeta
from ..run.progress import Progress
from .readers import edge_file_sizes, pieces_of_block, read_edge_piece, split_pieces

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm


@dataclass
class EdgePiece:
    """Consecutive edges of one type read together, endpoints as per-type node IDs."""

    src: np.ndarray
    dst: np.ndarray


@dataclass
class EdgeBlock:
    """Edges [start, start + len(src)) of one edge type, endpoints as per-type node IDs."""

    start: int
    src: np.ndarray
    dst: np.ndarray

    @property
    def orig_ids(self) -> np.ndarray:
        return np.arange(self.start, self.start + len(self.src), dtype=np.int64)


def edge_pieces(comm: Intracomm, meta: GraphMeta, etype: EdgeType, max_rows: Optional[int] = None,
                progress: Optional[Progress] = None, weight: float = 1.0) -> Iterator[EdgePiece]:
    """This rank's block of `etype`'s edges, read and checked in pieces of at most about
    `max_rows` edges (None: one piece per file piece), in edge-ID order. Collective: every
    rank yields the same number of pieces (empty ones when its block is used up), so a
    consumer may run a collective per piece; after the last piece the per-file edge counts
    are checked against the metadata.

    Each piece read advances `progress` by `weight` per edge (the caller's share of its task).
    """
    progress = progress or Progress.off()
    files = etype.files
    n_src, n_dst = meta.num_nodes(etype.src), meta.num_nodes(etype.dst)
    rows_per_file = np.zeros(len(files.paths), dtype=np.int64)
    with agreed(comm):
        pieces = pieces_of_block(edge_file_sizes(files), comm.Get_rank(), comm.Get_size())
        # CSV pieces are byte ranges: about 16 bytes per line of two IDs is a fair guess.
        unit = 16 if files.fmt.name == "csv" else 1
        if max_rows is not None:
            pieces = split_pieces(pieces, max_rows * unit)
    count = int(allreduce_max(comm, np.array([len(pieces)]))[0])
    for k in range(count):
        with agreed(comm):
            if k < len(pieces):
                piece = pieces[k]
                src, dst = read_edge_piece(files, piece)
                path = files.paths[piece.file]
                row0 = None if files.fmt.name == "csv" else piece.start
                _check_range(src, n_src, path, f"source node type '{etype.src}'", row0)
                _check_range(dst, n_dst, path, f"destination node type '{etype.dst}'", row0)
                rows_per_file[piece.file] += len(src)
                progress.advance(len(src) * weight)
            else:
                src = dst = np.empty(0, np.int64)
        yield EdgePiece(src, dst)
    totals = allreduce_sum(comm, rows_per_file)
    with agreed(comm):
        for path, found, declared in zip(files.paths, totals, etype.chunk_counts):
            if found != declared:
                raise InputError(path, f"has {found} edges but {etype.counts_key} for "
                                       f"'{etype.name}' says {declared}")


def read_edge_block(comm: Intracomm, meta: GraphMeta, etype: EdgeType, progress: Optional[Progress] = None,
                    weight: float = 1.0) -> EdgeBlock:
    """Read and check this rank's block of `etype`'s edges, in one piece. Collective."""
    srcs, dsts = [], []
    for piece in edge_pieces(comm, meta, etype, None, progress, weight):
        srcs.append(piece.src)
        dsts.append(piece.dst)
    src = np.concatenate(srcs) if len(srcs) > 1 else srcs[0] if srcs else np.empty(0, np.int64)
    dst = np.concatenate(dsts) if len(dsts) > 1 else dsts[0] if dsts else np.empty(0, np.int64)
    start = int(exscan_sum(comm, np.array([len(src)]))[0])
    return EdgeBlock(start, src, dst)


def read_block_pieces(comm: Intracomm, meta: GraphMeta, etype: EdgeType, max_rows: int,
                      progress: Optional[Progress] = None,
                      weight: float = 1.0) -> Tuple[List[Tuple[np.ndarray, np.ndarray]], int]:
    """This rank's block of `etype` as non-empty (src, dst) pieces of at most about `max_rows`
    edges, endpoints in the narrowest dtype holding their type's IDs (`id_dtype`), and the
    block's first edge ID: the block without a second, concatenated copy. Collective."""
    src_dtype, dst_dtype = id_dtype(meta.num_nodes(etype.src)), id_dtype(meta.num_nodes(etype.dst))
    pieces = []
    for piece in edge_pieces(comm, meta, etype, max_rows, progress, weight):
        if len(piece.src):
            pieces.append((piece.src.astype(src_dtype), piece.dst.astype(dst_dtype)))
    start = int(exscan_sum(comm, np.array([sum(len(s) for s, _ in pieces)]))[0])
    return pieces, start


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

"""Row counts the metadata leaves out, read from the files themselves.

GSProcessing's metadata has no `num_edges_per_chunk` (DGL's tools count edges as they read
them), and a hand-made one may lack per-file counts; `count_rows` fills them in before any
stage needs them: Parquet and NumPy files from their footers and headers (cheap), CSV edge
files by reading them once (pyarrow's parser, in bounded pieces), node types counted from
their `raw_id_mappings` Parquet footers. The files are spread over ranks and the counts summed
(one buffer-based Allreduce), so every rank ends with the same, complete `GraphMeta`. Counts
the metadata does declare are checked against the files where they are read (`validate`,
`blocks`), except raw_id_mappings' `row_counts`, which are checked here.
"""
from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from typing import TYPE_CHECKING, ContextManager, List, Optional, Tuple

import numpy as np

from ..errors import InputError
from ..mpi.collective import agreed
from ..mpi.exchange import allreduce_sum
from .metadata import INT64_MAX, ChunkFiles, EdgeType, GraphMeta
from .readers import edge_file_sizes, opening, pieces_of_block, read_csv_ints, split_pieces

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

# CSV edge files are counted by parsing them in pieces of this many bytes: memory follows
# the piece (about 16 bytes a line read, 16 bytes a row decoded), not the file.
CSV_COUNT_PIECE_BYTES = 16 << 20


def count_rows(meta: GraphMeta, comm: Optional[Intracomm] = None) -> GraphMeta:
    """`meta` with every node and edge count known. Collective over `comm` (None: this
    process alone, without MPI). Raises InputError, on every rank, for an unreadable file,
    a count that disagrees with `num_edges_per_type`, or raw_id_mappings `row_counts` that
    disagree with their files."""
    if meta.counted and not meta.node_count_files:
        return meta
    rank, size = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    # Every file list to count, in one order on every rank; each rank counts its share.
    groups: List[Tuple[ChunkFiles, bool]] = [(e.files, True) for e in meta.edge_types if e.chunk_counts is None]
    groups += [(files, False) for files in meta.node_count_files.values()]
    offsets = np.cumsum([0] + [len(files.paths) for files, _ in groups])
    found = np.zeros(int(offsets[-1]), dtype=np.int64)
    with _agreed(comm):
        for (files, edges), first in zip(groups, offsets):
            if files.fmt.name == "csv":
                found[first:first + len(files.paths)] = _csv_rows(files, rank, size)
                continue
            for i in range(len(files.paths)):
                if (first + i) % size == rank:
                    found[first + i] = _file_rows(files, i, edges)
    if comm is not None:
        found = allreduce_sum(comm, found)
    counts = [tuple(int(c) for c in found[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]
    with _agreed(comm):
        return _completed(meta, counts)


def _completed(meta: GraphMeta, counted: List[Tuple[int, ...]]) -> GraphMeta:
    """`meta` with the counted files' counts in place (in `count_rows`' order: the edge types
    without counts, then the node types counted from raw_id_mappings), checked against what
    the JSON declares."""
    todo = iter(counted)
    edge_types: List[EdgeType] = []
    for etype in meta.edge_types:
        if etype.chunk_counts is None:
            counts = next(todo)
            if etype.declared_total is not None and sum(counts) != etype.declared_total:
                raise InputError(f"{meta.path}: num_edges_per_type",
                                 f"says {etype.declared_total} edges of type '{etype.name}' but its "
                                 f"{len(counts)} files hold {sum(counts)}")
            etype = dataclasses.replace(etype, chunk_counts=counts, counts_key="its count at the start of the run")
        edge_types.append(etype)
    node_chunk_counts = list(meta.node_chunk_counts)
    for ntype, files in meta.node_count_files.items():
        counts = next(todo)
        for path, n, declared in zip(files.paths, counts, files.row_counts or counts):
            if n != declared:
                raise InputError(path, f"has {n} rows but row_counts of raw_id_mappings.{ntype} says {declared}")
        node_chunk_counts[meta.ntype_id(ntype)] = counts
    total = sum(sum(c) for c in node_chunk_counts if c is not None)
    if total > INT64_MAX:
        raise InputError(meta.path, f"the node counts add up to {total}, more than int64 IDs can number")
    total = sum(sum(e.chunk_counts or ()) for e in edge_types)
    if total > INT64_MAX:
        raise InputError(meta.path, f"the edge counts add up to {total}, more than int64 IDs can number")
    return dataclasses.replace(meta, edge_types=tuple(edge_types), node_chunk_counts=tuple(node_chunk_counts))


def _file_rows(files: ChunkFiles, i: int, edges: bool) -> int:
    """Rows of file i of a Parquet or NumPy list, from its footer or header."""
    if not edges:
        # A node ID map: any columns (GSProcessing's original IDs are strings); only its rows count.
        return int(opening.open_parquet(files.paths[i]).metadata.num_rows)
    return edge_file_sizes(dataclasses.replace(files, paths=(files.paths[i],)))[0]  # checks shape and dtype too


def _csv_rows(files: ChunkFiles, rank: int, size: int) -> List[int]:
    """This rank's share of the rows of each CSV edge file: its block of their bytes, parsed
    (every field checked as the edge reader checks it); the counts are summed over ranks."""
    rows = [0] * len(files.paths)
    sizes = edge_file_sizes(files)
    for piece in split_pieces(pieces_of_block(sizes, rank, size), CSV_COUNT_PIECE_BYTES):
        rows[piece.file] += len(read_csv_ints(files.paths[piece.file], piece.start, piece.stop, 2,
                                              files.fmt.delimiter))
        opening.release_arrow_memory()
    return rows


def _agreed(comm: Optional[Intracomm]) -> ContextManager[None]:
    return agreed(comm) if comm is not None else nullcontext()

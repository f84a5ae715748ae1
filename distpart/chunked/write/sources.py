"""What the streamed inputs (b) and (c) share: an edge source read in batches, the checks
of its endpoint IDs, node counts from the sources, and writing the sources out.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...errors import InputError
from ..metadata import INT64_MAX
from .files import PathLike
from .writer import ChunkedGraphWriter, check_file_names, rows_per_batch


def note_printer(notes: Optional[Callable[[str], None]]) -> Callable[[str], None]:
    return notes or (lambda text: print(f"distpart chunk: note: {text}", file=sys.stderr, flush=True))


class NpyFile:
    """A .npy file read by rows with positioned reads. Not memory-mapped: every mapped page
    read would stay counted in the process's resident memory until the file is closed, which
    for a 21 GB edge_index.npy is the whole file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                self.shape, fortran, self.dtype = read(f)
                self.offset = f.tell()
        except (OSError, ValueError) as e:
            raise InputError(path, f"not a readable .npy file: {e}") from None
        if fortran and len(self.shape) > 1:
            raise InputError(path, "is stored in Fortran order; save it in C order (np.ascontiguousarray)")
        if self.dtype.hasobject:
            raise InputError(path, "holds Python objects, not numbers")
        self.ndim = len(self.shape)
        self.tail = tuple(self.shape[1:])
        self.row_items = int(np.prod(self.tail, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.shape[0]) if self.shape else 0

    def items(self, start: int, count: int) -> np.ndarray:
        """`count` elements from flat element `start` on."""
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * self.dtype.itemsize)
            out = np.fromfile(f, dtype=self.dtype, count=count)
        if len(out) != count:
            raise InputError(self.path, f"is shorter than its header says ({self.shape})")
        return out

    def rows(self, a: int, b: int) -> np.ndarray:
        return self.items(a * self.row_items, (b - a) * self.row_items).reshape((b - a,) + self.tail)


def open_npy(path: Path) -> NpyFile:
    return NpyFile(path)


@dataclass
class EdgeSource:
    """One relation's input: how to stream it, and what its first pass found."""

    etype: str
    path: Path
    rows: int = 0
    features: Dict[str, Tuple[np.dtype, Tuple[int, ...]]] = field(default_factory=dict)
    max_src: int = -1
    max_dst: int = -1
    batches: Callable[[], Iterator[Tuple[np.ndarray, np.ndarray, Dict[str, np.ndarray], int]]] = None  # type: ignore[assignment]



def check_range(ids: np.ndarray, n: int, what: str, ntype: str, error: Callable[..., Exception],
                 where: Optional[PathLike] = None, first_row: int = 0) -> None:
    """Raise naming the first ID outside [0, n) of `ntype` and its row (min/max first: no copy
    unless something is wrong)."""
    if not len(ids) or (int(ids.min()) >= 0 and int(ids.max()) < n):
        return
    bad = int(np.flatnonzero((ids < 0) | (ids >= n))[0])
    problem = f"{what} {int(ids[bad])} at row {first_row + bad} is outside [0, {n}) of node type '{ntype}'"
    raise error(where, problem) if where is not None else error(problem)




def as_int64(ids: np.ndarray, path: Path, etype: str, end: str, first_row: int) -> np.ndarray:
    """Endpoint IDs as int64. An unsigned ID above int64's range is refused with its value as
    the file holds it (a plain cast would wrap it to a negative number)."""
    if ids.dtype.kind == "u" and ids.dtype.itemsize >= 8 and len(ids) and int(ids.max()) > INT64_MAX:
        bad = int(np.flatnonzero(ids > INT64_MAX)[0])
        raise InputError(path, f"{end} ID {int(ids[bad])} at row {first_row + bad} of edge type '{etype}' "
                               f"is above {INT64_MAX}, the largest node ID (node IDs are int64)")
    return ids.astype(np.int64, copy=False)


def check_negative(src: np.ndarray, dst: np.ndarray, path: Path, etype: str, first_row: int) -> None:
    s, _, d = etype.split(":")
    for ids, end, ntype in ((src, "source", s), (dst, "destination", d)):
        if len(ids) and int(ids.min()) < 0:
            bad = int(np.flatnonzero(ids < 0)[0])
            raise InputError(path, f"{end} ID {int(ids[bad])} at row {first_row + bad} of edge type "
                                   f"'{etype}' is negative")


def count_nodes(ntypes: Sequence[str], sources: Sequence[EdgeSource], node_feats: Mapping[str, Mapping[str, Path]],
                 known: Mapping[str, int], say: Callable[[str], None]) -> Dict[str, int]:
    """Each node type's count: given, else a feature's rows, else the largest endpoint + 1;
    then every endpoint is checked against it."""
    counts: Dict[str, int] = {}
    for ntype in ntypes:
        largest = max([s.max_src for s in sources if s.etype.split(":")[0] == ntype]
                      + [s.max_dst for s in sources if s.etype.split(":")[2] == ntype] + [-1])
        feat_rows = {name: len(open_npy(p)) for name, p in node_feats.get(ntype, {}).items()}
        if ntype in known:
            counts[ntype] = int(known[ntype])
        elif feat_rows:
            counts[ntype] = next(iter(feat_rows.values()))
        else:
            counts[ntype] = largest + 1
            say(f"node type '{ntype}': {largest + 1} nodes (the largest endpoint + 1; give "
                f"--num-nodes {ntype}=N if the type has isolated nodes beyond that)")
        for name, rows in feat_rows.items():
            if rows != counts[ntype]:
                raise InputError(node_feats[ntype][name], f"has {rows} rows but node type '{ntype}' has "
                                                          f"{counts[ntype]} nodes")
    for s in sources:
        src_t, _, dst_t = s.etype.split(":")
        for largest, end, ntype in ((s.max_src, "source", src_t), (s.max_dst, "destination", dst_t)):
            if largest >= counts[ntype]:
                _find_out_of_range(s, end, ntype, counts[ntype])
    return counts


def _find_out_of_range(source: EdgeSource, end: str, ntype: str, n: int) -> None:
    """Name the first endpoint outside [0, n) and its row (a second pass, only on error)."""
    for src, dst, _, first in source.batches():
        check_range(src if end == "source" else dst, n, f"{end} ID", ntype, InputError, source.path, first)
    raise AssertionError("an endpoint was out of range in the first pass but not in the second")


def write_sources(out_dir: PathLike, counts: Mapping[str, int], sources: Sequence[EdgeSource],
                   node_feats: Mapping[str, Mapping[str, Path]], *, num_chunks: int, edge_format: str,
                   graph_name: str, overwrite: bool, batch_bytes: int, inputs: Sequence[PathLike]) -> Path:
    try:
        check_file_names(num_chunks, edge_format, {s.etype: s.features for s in sources}, node_feats)
    except ValueError as e:
        raise InputError(None, str(e)) from None
    writer = ChunkedGraphWriter(out_dir, num_chunks=num_chunks, edge_format=edge_format,
                                graph_name=graph_name, overwrite=overwrite,
                                inputs=[*inputs, *(s.path for s in sources),
                                        *(p for feats in node_feats.values() for p in feats.values())])
    for ntype, n in counts.items():
        writer.add_node_type(ntype, n)
    for source in sources:
        sink = writer.relation(source.etype, source.rows, source.features)
        for src, dst, feats, _ in source.batches():
            sink.write(src, dst, feats)
        sink.close()
    for ntype, feats in node_feats.items():
        for name, path in feats.items():
            values = open_npy(path)
            if values.ndim < 1:
                raise InputError(path, "holds a single value, not one row per node")
            try:
                sink = writer.node_feature(ntype, name, values.dtype, values.tail)
            except ValueError as e:
                raise InputError(path, str(e)) from None
            step = rows_per_batch(values.dtype.itemsize * values.row_items, batch_bytes)
            for a in range(0, len(values), step):
                sink.write(values.rows(a, min(len(values), a + step)))
            sink.close()
    return writer.finish()

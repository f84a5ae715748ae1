"""Graph files holding one homogeneous graph, as `dgl.save_graphs` writes them: a partition's
graph.dgl, with its COO, CSR and CSC matrices and node/edge data.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, Mapping, Optional, Sequence

import numpy as np

from ...errors import InputError, OutputError, PathLike
from .records import (MIN_NAMED_ARRAY_BYTES, U64, Pieces, Reader, open_binary, release_pages, storable_dtype,
                      to_storable, write_storable, write_string)

_GRAPH_FILE_MAGIC = 0xDD2E4FF046B4A13F
_HETEROGRAPH_MAGIC = 0xDD589FBE35224ABF
_METAGRAPH_MAGIC = 0xDD3C5FFE20046ABF
_UNITGRAPH_MAGIC = 0xDD2E60F0F6B4A127
_COO_MAGIC = 0xDD61FFD305DFF127
_CSR_MAGIC = 0xDD6CD31205DFF127

_GRAPH_FILE_VERSION = 2
_HETEROGRAPH_KIND = 2
_HEADER_BLOCK = 4096
CPU = 1

_COO, _CSR, _CSC = 1, 2, 4
# IDs range-checked at a time (a memory-mapped array's pages are released after each piece).
_CHECK_ROWS = 1 << 20
_ALL_FORMATS = _COO | _CSR | _CSC
# The sparse formats a graph file can hold, in the order DGL writes them (save_graphs'
# `formats` names; `--graph-formats` of DGL's dispatch).
GRAPH_FORMATS = ("coo", "csr", "csc")
_FORMAT_BITS = {"coo": _COO, "csr": _CSR, "csc": _CSC}
# DGL marks a format word that is a bit set with bit 32; older DGL wrote one enum value.
_FORMAT_BITS_FLAG = 1 << 32
_LEGACY_FORMAT_ENUM = {1: _COO, 2: _CSR, 3: _CSC}


@dataclass
class PartitionGraph:
    """One homogeneous graph of a graph.dgl file, in COO.

    `src`/`dst` are int64 local node IDs indexed by local edge ID; `ndata`/`edata` rows
    are indexed by local node / edge ID.
    """

    num_nodes: int
    src: np.ndarray
    dst: np.ndarray
    ndata: dict[str, np.ndarray] = field(default_factory=dict)
    edata: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def num_edges(self) -> int:
        return len(self.src)


def graph_formats(names: Iterable[str]) -> tuple[str, ...]:
    """`names` (e.g. "csc", "coo") as a tuple in DGL's saving order; unknown or none refused."""
    wanted = [name.strip().lower() for name in names]
    unknown = sorted(set(wanted) - set(GRAPH_FORMATS))
    if unknown or not wanted:
        raise InputError(None, f"graph formats must be some of {', '.join(GRAPH_FORMATS)}; "
                               f"got {', '.join(wanted) if wanted else 'none'}")
    return tuple(name for name in GRAPH_FORMATS if name in wanted)


def write_graph(
    path: PathLike,
    num_nodes: int,
    src: "np.ndarray | Pieces",
    dst: "np.ndarray | Pieces",
    ndata: Mapping[str, "np.ndarray | Pieces"],
    edata: Mapping[str, "np.ndarray | Pieces"],
    formats: Sequence[str] = ("coo",),
) -> None:
    """Write one homogeneous graph as `dgl.save_graphs(path, [g], formats)` does.

    Edge i is `src[i] -> dst[i]` in local node IDs; every ndata (edata) array needs one
    row per node (edge). Feature dtypes are converted by `to_storable`. `formats` are the
    sparse matrices stored (`GRAPH_FORMATS`); the default, COO, is what DGL saves for a
    graph built from edge lists. Whatever is stored, DGL may build the others on load.

    Any array may be given as `Pieces` (e.g. int32 local IDs, stored as int64 piece by
    piece): COO is then written without the whole array in memory; CSR and CSC need it.
    """
    path = os.fspath(path)
    formats = graph_formats(formats)
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    src = _edge_endpoints(src, num_nodes, "src")
    dst = _edge_endpoints(dst, num_nodes, "dst")
    if "csr" in formats or "csc" in formats:  # sorted by row: the whole columns are needed
        src, dst = (x.materialize() if isinstance(x, Pieces) else x for x in (src, dst))
    if len(src) != len(dst):
        raise ValueError(f"src has {len(src)} edges, dst {len(dst)}")
    ndata = _graph_data(ndata, num_nodes, "node")
    edata = _graph_data(edata, len(src), "edge")

    with open(path, "wb") as f:
        header = struct.pack("<QQQQ", _GRAPH_FILE_MAGIC, _GRAPH_FILE_VERSION, _HETEROGRAPH_KIND, 1)
        f.write(header.ljust(_HEADER_BLOCK, b"\0"))
        # The record starts after this u64 and the (empty) label vector.
        record_pos = _HEADER_BLOCK + 2 * U64.size
        f.write(struct.pack("<QQ", record_pos, 0))

        f.write(U64.pack(_HETEROGRAPH_MAGIC))
        _write_metagraph(f)
        f.write(U64.pack(1))  # one relation graph
        f.write(U64.pack(_UNITGRAPH_MAGIC))
        # Saved formats as asked; allowed: all, so DGL can build the others on demand.
        saved = sum(_FORMAT_BITS[name] for name in formats)
        f.write(struct.pack("<qq", saved | _FORMAT_BITS_FLAG, _ALL_FORMATS | _FORMAT_BITS_FLAG))
        if "coo" in formats:
            _write_metagraph(f)
            f.write(struct.pack("<Qqq", _COO_MAGIC, num_nodes, num_nodes))  # num_cols first
            write_storable(f, src)
            write_storable(f, dst)
            write_storable(f, np.empty(0, np.int64))  # no data array: edge i has ID i
            f.write(struct.pack("<??", False, False))  # row_sorted, col_sorted: not claimed
        # CSR is indexed by source, CSC by destination (the CSR of the reversed graph).
        for name, rows, cols in (("csr", src, dst), ("csc", dst, src)):
            if name in formats:
                _write_metagraph(f)
                _write_csr(f, num_nodes, rows, cols)
        f.write(struct.pack("<Qq", 1, num_nodes))  # num_verts_per_type
        for per_type in (ndata, edata):
            f.write(struct.pack("<QQ", 1, len(per_type)))
            for key, arr in per_type.items():
                write_string(f, key)
                write_storable(f, arr)
        for names in (["_N"], ["_E"]):
            f.write(U64.pack(len(names)))
            for name in names:
                write_string(f, name)
        # Trailer: the graph offsets as a length-prefixed blob, then the blob's length.
        blob = struct.pack("<QQ", 1, record_pos)
        f.write(U64.pack(len(blob)) + blob + U64.pack(len(blob)))


def read_graph(path: PathLike, mmap: bool = False) -> PartitionGraph:
    """Read a graph file holding one homogeneous graph.

    Reads files DGL wrote too, in any of `GRAPH_FORMATS`, as COO in local edge-ID order;
    a graph saved in several formats must hold the same edges in each. With `mmap=True`,
    the arrays stored as read are memory-mapped views (COO and node/edge data), checked
    piece by piece with their pages released (`release_pages`), so a caller walking them in
    pieces never holds the whole graph.
    """
    path = os.fspath(path)
    with open_binary(path) as f:
        base = np.memmap(path, dtype=np.uint8, mode="r") if mmap and os.path.getsize(path) else None
        reader = Reader(f, path, base)
        reader.magic(_GRAPH_FILE_MAGIC, "DGL graph file")
        version, kind, num_graphs = reader.u64(), reader.u64(), reader.u64()
        if (version, kind) != (_GRAPH_FILE_VERSION, _HETEROGRAPH_KIND):
            raise OutputError(
                path,
                f"graph file version {version}, type {kind}: only DGL's heterograph "
                f"format (version {_GRAPH_FILE_VERSION}, type {_HETEROGRAPH_KIND}) is read",
            )
        if num_graphs != 1:
            raise OutputError(path, f"holds {num_graphs} graphs, expected 1")
        reader.seek(_HEADER_BLOCK)
        record_pos = reader.u64()
        reader.seek(record_pos)  # skips the labels

        reader.magic(_HETEROGRAPH_MAGIC, "graph record")
        _read_metagraph(reader)
        num_relations = reader.u64()
        if num_relations != 1:
            raise OutputError(path, f"graph has {num_relations} relation graphs, expected 1")
        src, dst, num_src, num_dst = _read_unit_graph(reader)
        num_verts = [reader.i64() for _ in range(reader.count(8))]
        if num_verts != [num_src] or num_dst != num_src:
            raise OutputError(
                path,
                f"node counts disagree: {num_verts} per type, {num_src}x{num_dst} adjacency",
            )
        num_nodes = num_src
        ndata = _read_single_type_data(reader, num_nodes, "node")
        edata = _read_single_type_data(reader, len(src), "edge")
        # The type names carry nothing for a homogeneous graph, but DGL reads them, so
        # a file cut short inside them is corrupt.
        for _ in range(2):
            for _ in range(reader.count(8)):
                reader.string()
        # DGL skips the trailer when loading every graph, but only a complete write ends
        # with it.
        trailer = struct.unpack("<QQQQ", reader.take(32))
        if trailer != (16, 1, record_pos, 16):
            raise reader.fail(f"bad trailer {trailer}, expected (16, 1, {record_pos}, 16)")
        return PartitionGraph(num_nodes, src, dst, ndata, edata)


def _write_csr(f: BinaryIO, num_nodes: int, rows: np.ndarray, cols: np.ndarray) -> None:
    """The CSR matrix DGL's COOToCSR builds: within a row, edges in ID order; data = IDs."""
    # A stable sort keeps edge-ID order within each row, as DGL's conversion does, so
    # the bytes equal DGL's; `data` maps each position back to its edge ID.
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype="<i8")
    np.cumsum(np.bincount(rows, minlength=num_nodes), out=indptr[1:])
    f.write(struct.pack("<Qqq", _CSR_MAGIC, num_nodes, num_nodes))  # num_cols first
    write_storable(f, indptr)
    write_storable(f, cols[order])
    write_storable(f, order.astype("<i8", copy=False))
    f.write(struct.pack("<?", False))  # sorted (columns within a row): not claimed


def _write_metagraph(f: BinaryIO) -> None:
    """The metagraph of a homogeneous graph: one node type with one self-loop edge type."""
    f.write(struct.pack("<QQqq", _METAGRAPH_MAGIC, _CSR_MAGIC, 1, 1))
    for values in ([0, 1], [0], [0]):  # indptr, indices, data
        write_storable(f, np.array(values, dtype="<i8"))
    f.write(struct.pack("<?", False))  # sorted


def _edge_endpoints(ids: "np.ndarray | Pieces", num_nodes: int, name: str) -> "np.ndarray | Pieces":
    if isinstance(ids, Pieces):
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise ValueError(f"{name} must be a 1-D integer array, got {ids.dtype} {ids.shape}")
        for piece in ids.pieces():
            _check_endpoints(piece, num_nodes, name)
        return Pieces(np.dtype("<i8"), ids.shape, ids.pieces)
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a 1-D integer array, got {ids.dtype} {ids.shape}")
    _check_endpoints(ids, num_nodes, name)
    return np.ascontiguousarray(ids, dtype="<i8")


def _check_endpoints(ids: np.ndarray, num_nodes: int, name: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"{name} holds node IDs outside [0, {num_nodes})")


def _graph_data(data: Mapping[str, "np.ndarray | Pieces"], num_rows: int,
                what: str) -> "dict[str, np.ndarray | Pieces]":
    out = {}
    for key, arr in data.items():
        if isinstance(arr, Pieces):
            if storable_dtype(arr.dtype) != arr.dtype.newbyteorder("<"):
                raise ValueError(f"{what} data {key!r} given as Pieces of unstorable dtype {arr.dtype}")
        else:
            arr = to_storable(arr, f"{what} data {key!r}")
        if arr.shape[0] != num_rows:
            raise ValueError(f"{what} data {key!r} has {arr.shape[0]} rows, expected {num_rows}")
        out[key] = arr
    return out


def _read_metagraph(reader: Reader) -> None:
    """Read a graph record's metagraph and insist it is homogeneous."""
    reader.magic(_METAGRAPH_MAGIC, "metagraph")
    reader.magic(_CSR_MAGIC, "metagraph CSR matrix")
    reader.i64()  # num_cols
    num_types = reader.i64()
    _, indices, _ = (reader.array() for _ in range(3))
    reader.take(1)  # sorted flag
    if num_types != 1 or len(indices) != 1:
        raise OutputError(
            reader.path,
            f"holds a heterogeneous graph ({num_types} node types, {len(indices)} edge "
            "types); a partition graph is homogeneous",
        )


def _read_unit_graph(reader: Reader) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Read a UnitGraph: (src, dst) in edge-ID order, number of sources, of destinations."""
    reader.magic(_UNITGRAPH_MAGIC, "unit graph")
    saved = reader.i64()
    reader.i64()  # formats DGL may create later: irrelevant to reading
    saved = saved & 0xFFFFFFFF if saved & _FORMAT_BITS_FLAG else _LEGACY_FORMAT_ENUM.get(saved, 0)
    if not saved & _ALL_FORMATS:
        raise reader.fail(f"unit graph saved in no known sparse format (code {saved})")
    edges: Optional[tuple[np.ndarray, np.ndarray, int, int]] = None
    for fmt in (_COO, _CSR, _CSC):  # the order DGL writes them in
        if saved & fmt:
            _read_metagraph(reader)
            found = _read_sparse(reader, fmt)
            if edges is None:
                edges = found
            elif not _same_edges(edges, found):
                # DGL would serve whichever format an operation picks: all must agree.
                first = next(n for n in GRAPH_FORMATS if saved & _FORMAT_BITS[n])
                name = next(n for n, b in _FORMAT_BITS.items() if b == fmt)
                raise reader.fail(f"the {name.upper()} matrix holds other edges than the "
                                  f"{first.upper()} matrix")
    assert edges is not None
    return edges


def _same_edges(a: tuple[np.ndarray, np.ndarray, int, int],
                b: tuple[np.ndarray, np.ndarray, int, int]) -> bool:
    return a[2:] == b[2:] and np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def _read_sparse(reader: Reader, fmt: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Read one sparse matrix as (src, dst, num_src, num_dst), edges in ID order."""
    is_coo = fmt == _COO
    reader.magic(_COO_MAGIC if is_coo else _CSR_MAGIC, "COO matrix" if is_coo else "CSR matrix")
    num_cols, num_rows = reader.i64(), reader.i64()
    if num_rows < 0 or num_cols < 0:
        raise reader.fail(f"sparse matrix of negative shape {num_rows}x{num_cols}")
    first, second, data = (reader.array() for _ in range(3))
    reader.take(2 if is_coo else 1)  # sortedness flags
    if is_coo:
        rows, cols = first, second
    else:
        rows = _expand_indptr(reader, first, num_rows, len(second))
        cols = second
    # A CSC matrix is the CSR of the reversed graph: its rows are destinations.
    src, dst = (cols, rows) if fmt == _CSC else (rows, cols)
    num_src, num_dst = (num_cols, num_rows) if fmt == _CSC else (num_rows, num_cols)
    src = _local_ids(reader, src, num_src, "source node IDs")
    dst = _local_ids(reader, dst, num_dst, "destination node IDs")
    if len(src) != len(dst):
        raise reader.fail(f"{len(src)} sources but {len(dst)} destinations")
    if len(data):
        src, dst = _in_edge_id_order(reader, src, dst, data)
    return src, dst, num_src, num_dst


def _expand_indptr(reader: Reader, indptr: np.ndarray, num_rows: int, nnz: int) -> np.ndarray:
    if indptr.dtype.kind not in "iu":
        raise reader.fail(f"CSR indptr of type {indptr.dtype}")
    indptr = indptr.astype(np.int64, copy=False)
    if (
        indptr.shape != (num_rows + 1,)
        or indptr[0] != 0
        or indptr[-1] != nnz
        or (np.diff(indptr) < 0).any()
    ):
        raise reader.fail(f"invalid CSR indptr for {num_rows} rows and {nnz} entries")
    return np.repeat(np.arange(num_rows, dtype=np.int64), np.diff(indptr))


def _local_ids(reader: Reader, ids: np.ndarray, limit: int, what: str) -> np.ndarray:
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise reader.fail(f"{what} are not a 1-D integer array ({ids.dtype} {ids.shape})")
    for lo in range(0, ids.size, _CHECK_ROWS):
        piece = ids[lo:lo + _CHECK_ROWS]
        if piece.min() < 0 or piece.max() >= limit:
            raise reader.fail(f"{what} outside [0, {limit})")
        release_pages(piece)
    return ids.astype(np.int64, copy=False)


def _in_edge_id_order(
    reader: Reader, src: np.ndarray, dst: np.ndarray, eids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Reorder edges stored in matrix order so that position i holds edge ID i."""
    eids = _local_ids(reader, eids, len(src), "edge IDs")
    order = np.full(len(src), -1, dtype=np.int64)
    order[eids] = np.arange(len(src), dtype=np.int64)
    if len(eids) != len(src) or (order < 0).any():
        raise reader.fail("edge IDs of the sparse matrix are not a permutation")
    return src[order], dst[order]


def _read_single_type_data(reader: Reader, num_rows: int, what: str) -> dict[str, np.ndarray]:
    """Read vector<vector<(name, array)>> of a homogeneous graph: one inner vector."""
    num_types = reader.count(8)
    if num_types != 1:
        raise reader.fail(f"{what} data for {num_types} types, expected 1")
    data: dict[str, np.ndarray] = {}
    for _ in range(reader.count(MIN_NAMED_ARRAY_BYTES)):
        key = reader.string()
        arr = reader.array()
        if arr.ndim == 0 or arr.shape[0] != num_rows:
            raise reader.fail(
                f"{what} data {key!r} has shape {arr.shape}, expected {num_rows} rows"
            )
        data[key] = arr
    return data

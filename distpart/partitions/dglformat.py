"""DGL's binary file formats, read and written with plain numpy.

This module owns the byte layout of the three kinds of file a DGL partition is made of
(shared/spec/dgl-partition-format.md, "Binary layout"):

* NDArray records (`write_array` / `read_array`),
* tensor dicts, as `dgl.data.save_tensors` writes them (`TensorDictWriter`,
  `write_tensor_dict`, `read_tensor_dict`),
* graph files holding one homogeneous graph, as `dgl.save_graphs` writes them
  (`write_graph`, `read_graph`),

and the dtype rules (`to_storable`) that keep every array we write loadable by DGL 2.x
running on torch 2.2. It knows nothing about partitions, MPI or torch. All files are
little-endian whatever the host.
"""

from __future__ import annotations

import io
import math
import os
import struct
from dataclasses import dataclass, field
from types import TracebackType
from typing import BinaryIO, Iterable, Mapping, Optional, Sequence, Type

import numpy as np

from ..errors import InputError, OutputError, PathLike

_NDARRAY_MAGIC = 0xDD5E40F096B4A13F
_TENSOR_DICT_MAGIC = 0xDD5A9FBE3FA2443F
_GRAPH_FILE_MAGIC = 0xDD2E4FF046B4A13F
_HETEROGRAPH_MAGIC = 0xDD589FBE35224ABF
_METAGRAPH_MAGIC = 0xDD3C5FFE20046ABF
_UNITGRAPH_MAGIC = 0xDD2E60F0F6B4A127
_COO_MAGIC = 0xDD61FFD305DFF127
_CSR_MAGIC = 0xDD6CD31205DFF127

_GRAPH_FILE_VERSION = 2
_HETEROGRAPH_KIND = 2
_HEADER_BLOCK = 4096
_CPU = 1

_COO, _CSR, _CSC = 1, 2, 4
_ALL_FORMATS = _COO | _CSR | _CSC
# The sparse formats a graph file can hold, in the order DGL writes them (save_graphs'
# `formats` names; `--graph-formats` of DGL's dispatch).
GRAPH_FORMATS = ("coo", "csr", "csc")
_FORMAT_BITS = {"coo": _COO, "csr": _CSR, "csc": _CSC}
# DGL marks a format word that is a bit set with bit 32; older DGL wrote one enum value.
_FORMAT_BITS_FLAG = 1 << 32
_LEGACY_FORMAT_ENUM = {1: _COO, 2: _CSR, 3: _CSC}

# DLPack type codes.
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT = 0, 1, 2, 4
_KIND_TO_DL = {"i": _DL_INT, "u": _DL_UINT, "f": _DL_FLOAT}
_DL_TO_KIND = {code: kind for kind, code in _KIND_TO_DL.items()}

_STORABLE = frozenset(np.dtype(t) for t in ("i1", "i2", "i4", "i8", "u1", "f2", "f4", "f8"))
# torch 2.2, which every DGL 2.1 array passes through, has no uint16/32/64.
_WIDENED = {np.dtype("u2"): np.dtype("i4"), np.dtype("u4"): np.dtype("i8")}
_INT64_MAX = np.iinfo(np.int64).max

_ARRAY_HEAD = struct.Struct("<QQiiiBBH")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
# Smallest encoding of a (string, array) pair, to reject absurd counts before allocating.
_MIN_NAMED_ARRAY_BYTES = _U64.size + _ARRAY_HEAD.size + _I64.size


def storable_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype `to_storable` gives an array of `dtype` (uint64 assumed to fit int64)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.dtype(np.uint8)
    if dtype.kind == "u" and dtype.itemsize == 8:
        return np.dtype(np.int64)
    native = dtype.newbyteorder("=")
    return np.dtype(_WIDENED.get(native, native)).newbyteorder("<")


def to_storable(arr: np.ndarray, name: str) -> np.ndarray:
    """Return `arr` as an array DGL can load: a storable dtype, C-contiguous, little-endian.

    bool becomes uint8, uint16 int32, uint32 int64 (lossless); uint64 becomes int64 only
    when every value fits. A 0-d array becomes shape [1] because DGL reads 0-d arrays back
    as garbage. No copy is made when `arr` already qualifies. `name` (a file or feature
    name) is used in the InputError raised for dtypes DGL cannot load.
    """
    arr = np.asarray(arr)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    dtype = arr.dtype
    if dtype.kind == "b":
        arr = arr.view(np.uint8)  # numpy bools are exactly the bytes 0 and 1
    elif dtype.kind == "u" and dtype.itemsize == 8:
        if arr.size and int(arr.max()) > _INT64_MAX:
            raise InputError(
                name,
                f"uint64 values up to {int(arr.max())} do not fit in int64, the widest "
                "integer type DGL (torch 2.2) can load; store them as int64 or float64",
            )
        arr = arr.astype(np.int64)
    elif dtype.newbyteorder("=") in _WIDENED:
        arr = arr.astype(_WIDENED[dtype.newbyteorder("=")])
    elif dtype.newbyteorder("=") not in _STORABLE:
        raise InputError(
            name,
            f"dtype {dtype} cannot be stored in a DGL file; supported: bool, "
            "int8/16/32/64, uint8/16/32 (uint16/32 widened), uint64 (when it fits "
            "int64), float16/32/64",
        )
    little = arr.dtype.newbyteorder("<")
    if arr.dtype != little:
        arr = arr.astype(little)
    return np.ascontiguousarray(arr)


def write_array(f: BinaryIO, arr: np.ndarray, name: str = "array") -> None:
    """Write one NDArray record; `arr` goes through `to_storable` first."""
    _write_storable(f, to_storable(arr, name))


def read_array(f: io.BufferedIOBase) -> np.ndarray:
    """Read one NDArray record at the current position of the binary file `f`.

    bfloat16 arrays (numpy has no such type) come back widened to float32, exactly.
    """
    return _Reader(f, getattr(f, "name", "<stream>")).array()


class TensorDictWriter:
    """Writes a tensor dict one tensor at a time, so callers can free each feature after.

    The count is part of the header, so it is announced up front::

        with TensorDictWriter(path, len(names)) as w:
            for name in names:
                w.add(name, load(name))

    Adding more tensors than announced, or fewer by the end of the block, raises
    ValueError; on any error the partial file is removed, since DGL would reject it.
    """

    def __init__(self, path: PathLike, num_tensors: int) -> None:
        if num_tensors < 0:
            raise ValueError(f"num_tensors must be >= 0, got {num_tensors}")
        self.path = os.fspath(path)
        self.num_tensors = num_tensors
        self._keys: set[str] = set()
        self._f: Optional[BinaryIO] = None

    def __enter__(self) -> TensorDictWriter:
        self._f = open(self.path, "wb")
        # DGL's loader ignores the first count and trusts the vector length after it.
        self._f.write(struct.pack("<QQQ", _TENSOR_DICT_MAGIC, self.num_tensors, self.num_tensors))
        return self

    def add(self, key: str, arr: np.ndarray) -> None:
        """Append tensor `key`; its dtype is converted by `to_storable`."""
        if self._f is None:
            raise RuntimeError("TensorDictWriter.add called outside its `with` block")
        if len(self._keys) == self.num_tensors:
            raise ValueError(
                f"{self.path}: more than the {self.num_tensors} announced tensors added"
            )
        if key in self._keys:
            raise ValueError(f"{self.path}: tensor {key!r} added twice")
        arr = to_storable(arr, key)
        _write_string(self._f, key)
        _write_storable(self._f, arr)
        self._keys.add(key)

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        assert self._f is not None
        self._f.close()
        self._f = None
        if exc_type is not None:
            os.remove(self.path)
        elif len(self._keys) != self.num_tensors:
            os.remove(self.path)
            raise ValueError(
                f"{self.path}: {len(self._keys)} tensors added, {self.num_tensors} announced"
            )


def write_tensor_dict(path: PathLike, tensors: Mapping[str, np.ndarray]) -> None:
    """Write `tensors` as a DGL tensor dict, keys in the mapping's order."""
    with TensorDictWriter(path, len(tensors)) as writer:
        for key, arr in tensors.items():
            writer.add(key, arr)


def read_tensor_dict(path: PathLike, mmap: bool = False) -> dict[str, np.ndarray]:
    """Read a DGL tensor dict (as written by `dgl.data.save_tensors`).

    With `mmap=True` the arrays are read-only np.memmap views into the file, so large
    features are paged in on use instead of read whole (zero-size arrays, and bfloat16
    ones, which are widened to float32 as by `read_array`, are plain arrays).
    """
    path = os.fspath(path)
    with _open(path) as f:
        reader = _Reader(f, path)
        reader.magic(_TENSOR_DICT_MAGIC, "DGL tensor dict")
        reader.u64()  # DGL ignores this copy of the count; so do we
        base = np.memmap(path, dtype=np.uint8, mode="r") if mmap else None
        tensors: dict[str, np.ndarray] = {}
        for _ in range(reader.count(_MIN_NAMED_ARRAY_BYTES)):
            key = reader.string()
            if key in tensors:
                raise OutputError(path, f"tensor {key!r} appears twice")
            tensors[key] = reader.array(base)
        return tensors


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
    src: np.ndarray,
    dst: np.ndarray,
    ndata: Mapping[str, np.ndarray],
    edata: Mapping[str, np.ndarray],
    formats: Sequence[str] = ("coo",),
) -> None:
    """Write one homogeneous graph as `dgl.save_graphs(path, [g], formats)` does.

    Edge i is `src[i] -> dst[i]` in local node IDs; every ndata (edata) array needs one
    row per node (edge). Feature dtypes are converted by `to_storable`. `formats` are the
    sparse matrices stored (`GRAPH_FORMATS`); the default, COO, is what DGL saves for a
    graph built from edge lists. Whatever is stored, DGL may build the others on load.
    """
    path = os.fspath(path)
    formats = graph_formats(formats)
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    src = _edge_endpoints(src, num_nodes, "src")
    dst = _edge_endpoints(dst, num_nodes, "dst")
    if len(src) != len(dst):
        raise ValueError(f"src has {len(src)} edges, dst {len(dst)}")
    ndata = _graph_data(ndata, num_nodes, "node")
    edata = _graph_data(edata, len(src), "edge")

    with open(path, "wb") as f:
        header = struct.pack("<QQQQ", _GRAPH_FILE_MAGIC, _GRAPH_FILE_VERSION, _HETEROGRAPH_KIND, 1)
        f.write(header.ljust(_HEADER_BLOCK, b"\0"))
        # The record starts after this u64 and the (empty) label vector.
        record_pos = _HEADER_BLOCK + 2 * _U64.size
        f.write(struct.pack("<QQ", record_pos, 0))

        f.write(_U64.pack(_HETEROGRAPH_MAGIC))
        _write_metagraph(f)
        f.write(_U64.pack(1))  # one relation graph
        f.write(_U64.pack(_UNITGRAPH_MAGIC))
        # Saved formats as asked; allowed: all, so DGL can build the others on demand.
        saved = sum(_FORMAT_BITS[name] for name in formats)
        f.write(struct.pack("<qq", saved | _FORMAT_BITS_FLAG, _ALL_FORMATS | _FORMAT_BITS_FLAG))
        if "coo" in formats:
            _write_metagraph(f)
            f.write(struct.pack("<Qqq", _COO_MAGIC, num_nodes, num_nodes))  # num_cols first
            _write_storable(f, src)
            _write_storable(f, dst)
            _write_storable(f, np.empty(0, np.int64))  # no data array: edge i has ID i
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
                _write_string(f, key)
                _write_storable(f, arr)
        for names in (["_N"], ["_E"]):
            f.write(_U64.pack(len(names)))
            for name in names:
                _write_string(f, name)
        # Trailer: the graph offsets as a length-prefixed blob, then the blob's length.
        blob = struct.pack("<QQ", 1, record_pos)
        f.write(_U64.pack(len(blob)) + blob + _U64.pack(len(blob)))


def read_graph(path: PathLike) -> PartitionGraph:
    """Read a graph file holding one homogeneous graph.

    Reads files DGL wrote too, in any of `GRAPH_FORMATS`, as COO in local edge-ID order;
    a graph saved in several formats must hold the same edges in each.
    """
    path = os.fspath(path)
    with _open(path) as f:
        reader = _Reader(f, path)
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


# ---------------------------------------------------------------------------- writing


def _write_string(f: BinaryIO, text: str) -> None:
    data = text.encode("utf-8")
    f.write(_U64.pack(len(data)))
    f.write(data)


def _write_storable(f: BinaryIO, arr: np.ndarray) -> None:
    """Write an array that already went through `to_storable`."""
    head = _ARRAY_HEAD.pack(
        _NDARRAY_MAGIC, 0, _CPU, 0, arr.ndim, _KIND_TO_DL[arr.dtype.kind], arr.itemsize * 8, 1
    )
    f.write(head)
    f.write(struct.pack(f"<{arr.ndim}q", *arr.shape))
    f.write(_I64.pack(arr.nbytes))
    # Straight from the array's buffer: no bytes copy of a possibly huge feature.
    f.write(memoryview(arr.reshape(-1).view(np.uint8)))


def _write_csr(f: BinaryIO, num_nodes: int, rows: np.ndarray, cols: np.ndarray) -> None:
    """The CSR matrix DGL's COOToCSR builds: within a row, edges in ID order; data = IDs."""
    # A stable sort keeps edge-ID order within each row, as DGL's conversion does, so
    # the bytes equal DGL's; `data` maps each position back to its edge ID.
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype="<i8")
    np.cumsum(np.bincount(rows, minlength=num_nodes), out=indptr[1:])
    f.write(struct.pack("<Qqq", _CSR_MAGIC, num_nodes, num_nodes))  # num_cols first
    _write_storable(f, indptr)
    _write_storable(f, cols[order])
    _write_storable(f, order.astype("<i8", copy=False))
    f.write(struct.pack("<?", False))  # sorted (columns within a row): not claimed


def _write_metagraph(f: BinaryIO) -> None:
    """The metagraph of a homogeneous graph: one node type with one self-loop edge type."""
    f.write(struct.pack("<QQqq", _METAGRAPH_MAGIC, _CSR_MAGIC, 1, 1))
    for values in ([0, 1], [0], [0]):  # indptr, indices, data
        _write_storable(f, np.array(values, dtype="<i8"))
    f.write(struct.pack("<?", False))  # sorted


def _edge_endpoints(ids: np.ndarray, num_nodes: int, name: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a 1-D integer array, got {ids.dtype} {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"{name} holds node IDs outside [0, {num_nodes})")
    return np.ascontiguousarray(ids, dtype="<i8")


def _graph_data(data: Mapping[str, np.ndarray], num_rows: int, what: str) -> dict[str, np.ndarray]:
    out = {}
    for key, arr in data.items():
        arr = to_storable(arr, f"{what} data {key!r}")
        if arr.shape[0] != num_rows:
            raise ValueError(f"{what} data {key!r} has {arr.shape[0]} rows, expected {num_rows}")
        out[key] = arr
    return out


# ---------------------------------------------------------------------------- reading


def _open(path: str) -> io.BufferedReader:
    try:
        return open(path, "rb")
    except OSError as e:
        raise OutputError(path, f"cannot open: {e.strerror}") from None


class _Reader:
    """Sequential little-endian reads from a binary file; every error names the file."""

    def __init__(self, f: io.BufferedIOBase, path: str) -> None:
        self.f = f
        self.path = path
        start = f.tell()
        self.size = f.seek(0, os.SEEK_END)
        f.seek(start)

    def fail(self, problem: str) -> OutputError:
        return OutputError(
            self.path, f"{problem} (at byte {self.f.tell()}; corrupt or truncated file?)"
        )

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise self.fail(f"file ends {n - len(data)} bytes early")
        return data

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def remaining(self) -> int:
        return self.size - self.f.tell()

    def seek(self, pos: int) -> None:
        if pos > self.size:
            raise self.fail(f"offset {pos} lies past the end of the file ({self.size} bytes)")
        self.f.seek(pos)

    def magic(self, expected: int, what: str) -> None:
        found = self.u64()
        if found != expected:
            raise self.fail(f"not a {what}: magic number {found:#x}, expected {expected:#x}")

    def count(self, min_item_bytes: int) -> int:
        """A vector length, checked against the bytes left so corruption cannot OOM us."""
        n = self.u64()
        if n * min_item_bytes > self.remaining():
            raise self.fail(f"vector of {n} items cannot fit in the {self.remaining()} bytes left")
        return n

    def string(self) -> str:
        raw = self.take(self.count(1))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("string is not UTF-8") from None

    def array_header(self) -> tuple[np.dtype, tuple[int, ...], int, bool]:
        """dtype, shape and byte size of the next array, and whether it is bfloat16."""
        magic, _, device, _, ndim, code, bits, lanes = _ARRAY_HEAD.unpack(
            self.take(_ARRAY_HEAD.size)
        )
        if magic != _NDARRAY_MAGIC:
            raise self.fail(f"not an NDArray: magic number {magic:#x}")
        if device != _CPU or lanes != 1 or not 0 <= ndim <= 32:
            raise self.fail(f"bad NDArray header (device {device}, lanes {lanes}, ndim {ndim})")
        shape = struct.unpack(f"<{ndim}q", self.take(8 * ndim))
        if any(d < 0 for d in shape):
            raise self.fail(f"negative NDArray shape {shape}")
        is_bf16 = (code, bits) == (_DL_BFLOAT, 16)
        # numpy has no bfloat16: read its raw 16-bit patterns, widened in `array`.
        kind = "u" if is_bf16 else _DL_TO_KIND.get(code)
        if kind is None or bits not in (8, 16, 32, 64) or (kind == "f" and bits == 8):
            raise self.fail(f"unsupported NDArray type code {code}, {bits} bits")
        dtype = np.dtype(f"<{kind}{bits // 8}")
        nbytes = self.i64()
        if nbytes != math.prod(shape) * dtype.itemsize:
            raise self.fail(f"NDArray of shape {shape} and {dtype} claims {nbytes} bytes")
        if nbytes > self.remaining():
            raise self.fail(f"NDArray of {nbytes} bytes but only {self.remaining()} left")
        return dtype, shape, nbytes, is_bf16

    def array(self, base: Optional[np.memmap] = None) -> np.ndarray:
        """Read the next array, or map it as a view of `base` (the whole file mapped)."""
        dtype, shape, nbytes, is_bf16 = self.array_header()
        if base is not None:
            start = self.f.tell()
            arr = base[start : start + nbytes].view(dtype).reshape(shape)
            self.f.seek(nbytes, os.SEEK_CUR)
        else:
            arr = np.empty(shape, dtype)
            if self.f.readinto(memoryview(arr.reshape(-1).view(np.uint8))) != nbytes:
                raise self.fail("NDArray data cut short")
        if is_bf16:
            # bfloat16 is the upper half of a float32: widening is exact.
            arr = (arr.astype("<u4") << 16).view("<f4")
        return arr


def _read_metagraph(reader: _Reader) -> None:
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


def _read_unit_graph(reader: _Reader) -> tuple[np.ndarray, np.ndarray, int, int]:
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


def _read_sparse(reader: _Reader, fmt: int) -> tuple[np.ndarray, np.ndarray, int, int]:
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


def _expand_indptr(reader: _Reader, indptr: np.ndarray, num_rows: int, nnz: int) -> np.ndarray:
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


def _local_ids(reader: _Reader, ids: np.ndarray, limit: int, what: str) -> np.ndarray:
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise reader.fail(f"{what} are not a 1-D integer array ({ids.dtype} {ids.shape})")
    if ids.size and (ids.min() < 0 or ids.max() >= limit):
        raise reader.fail(f"{what} outside [0, {limit})")
    return ids.astype(np.int64, copy=False)


def _in_edge_id_order(
    reader: _Reader, src: np.ndarray, dst: np.ndarray, eids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Reorder edges stored in matrix order so that position i holds edge ID i."""
    eids = _local_ids(reader, eids, len(src), "edge IDs")
    order = np.full(len(src), -1, dtype=np.int64)
    order[eids] = np.arange(len(src), dtype=np.int64)
    if len(eids) != len(src) or (order < 0).any():
        raise reader.fail("edge IDs of the sparse matrix are not a permutation")
    return src[order], dst[order]


def _read_single_type_data(reader: _Reader, num_rows: int, what: str) -> dict[str, np.ndarray]:
    """Read vector<vector<(name, array)>> of a homogeneous graph: one inner vector."""
    num_types = reader.count(8)
    if num_types != 1:
        raise reader.fail(f"{what} data for {num_types} types, expected 1")
    data: dict[str, np.ndarray] = {}
    for _ in range(reader.count(_MIN_NAMED_ARRAY_BYTES)):
        key = reader.string()
        arr = reader.array()
        if arr.ndim == 0 or arr.shape[0] != num_rows:
            raise reader.fail(
                f"{what} data {key!r} has shape {arr.shape}, expected {num_rows} rows"
            )
        data[key] = arr
    return data

"""NDArray records, the unit of every DGL binary file, and the dtype rules that keep every
array we write loadable by DGL 2.x running on torch 2.2 (`to_storable`).

`Reader` reads a file sequentially; every error it raises names the file and the byte.
"""
from __future__ import annotations

import io
import math
import mmap
import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterable, Optional, Tuple

import numpy as np

from ...errors import InputError, OutputError

NDARRAY_MAGIC = 0xDD5E40F096B4A13F

CPU = 1

# DLPack type codes.
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT = 0, 1, 2, 4
_KIND_TO_DL = {"i": _DL_INT, "u": _DL_UINT, "f": _DL_FLOAT}
_DL_TO_KIND = {code: kind for kind, code in _KIND_TO_DL.items()}

_STORABLE = frozenset(np.dtype(t) for t in ("i1", "i2", "i4", "i8", "u1", "f2", "f4", "f8"))
# torch 2.2, which every DGL 2.1 array passes through, has no uint16/32/64.
_WIDENED = {np.dtype("u2"): np.dtype("i4"), np.dtype("u4"): np.dtype("i8")}
_INT64_MAX = np.iinfo(np.int64).max

ARRAY_HEAD = struct.Struct("<QQiiiBBH")
U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")
# Smallest encoding of a (string, array) pair, to reject absurd counts before allocating.
MIN_NAMED_ARRAY_BYTES = U64.size + ARRAY_HEAD.size + I64.size


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
    write_storable(f, to_storable(arr, name))


def read_array(f: io.BufferedIOBase) -> np.ndarray:
    """Read one NDArray record at the current position of the binary file `f`.

    bfloat16 arrays (numpy has no such type) come back widened to float32, exactly.
    """
    return Reader(f, getattr(f, "name", "<stream>")).array()


def write_string(f: BinaryIO, text: str) -> None:
    data = text.encode("utf-8")
    f.write(U64.pack(len(data)))
    f.write(data)


# Rows converted at a time when a `Pieces` array is written: bounds the conversion's copy.
_WRITE_ROWS = 1 << 20


@dataclass(frozen=True)
class Pieces:
    """An array written as consecutive pieces, each converted to `dtype` as it is written, so
    the whole array never exists in memory: 1-D int32 pieces stored as int64, or IDs made
    range by range. `pieces()` yields the pieces in order (it may be called more than once);
    their lengths must add up to `shape[0]`."""

    dtype: np.dtype
    shape: Tuple[int, ...]
    pieces: Callable[[], Iterable[np.ndarray]]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    @staticmethod
    def of(arrays: Iterable[np.ndarray], dtype: "np.dtype | str") -> "Pieces":
        """The concatenation of `arrays` (same row shape) stored as `dtype`."""
        arrays = list(arrays)
        tail = tuple(arrays[0].shape[1:]) if arrays else ()
        return Pieces(np.dtype(dtype), (sum(len(a) for a in arrays), *tail), lambda: iter(arrays))

    def materialize(self) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        at = 0
        for piece in self.pieces():
            out[at:at + len(piece)] = piece
            at += len(piece)
        return out


def write_storable(f: BinaryIO, arr: "np.ndarray | Pieces") -> None:
    """Write an array that already went through `to_storable`, or `Pieces` of a storable dtype."""
    if isinstance(arr, Pieces):
        _write_pieces(f, arr)
        return
    head = ARRAY_HEAD.pack(
        NDARRAY_MAGIC, 0, CPU, 0, arr.ndim, _KIND_TO_DL[arr.dtype.kind], arr.itemsize * 8, 1
    )
    f.write(head)
    f.write(struct.pack(f"<{arr.ndim}q", *arr.shape))
    f.write(I64.pack(arr.nbytes))
    # Straight from the array's buffer: no bytes copy of a possibly huge feature.
    f.write(memoryview(arr.reshape(-1).view(np.uint8)))


def _write_pieces(f: BinaryIO, arr: Pieces) -> None:
    dtype = arr.dtype.newbyteorder("<")
    if dtype.newbyteorder("=") not in _STORABLE:
        raise ValueError(f"Pieces of dtype {dtype} cannot be stored")
    row = int(np.prod(arr.shape[1:], dtype=np.int64))
    head = ARRAY_HEAD.pack(NDARRAY_MAGIC, 0, CPU, 0, arr.ndim, _KIND_TO_DL[dtype.kind], dtype.itemsize * 8, 1)
    f.write(head)
    f.write(struct.pack(f"<{arr.ndim}q", *arr.shape))
    f.write(I64.pack(arr.shape[0] * row * dtype.itemsize))
    rows = 0
    for piece in arr.pieces():
        if tuple(piece.shape[1:]) != tuple(arr.shape[1:]):
            raise ValueError(f"a piece of row shape {piece.shape[1:]} in Pieces of shape {arr.shape}")
        for lo in range(0, len(piece), _WRITE_ROWS):
            part = np.ascontiguousarray(piece[lo:lo + _WRITE_ROWS], dtype=dtype)
            f.write(memoryview(part.reshape(-1).view(np.uint8)))
        rows += len(piece)
    if rows != arr.shape[0]:
        raise ValueError(f"Pieces of {arr.shape[0]} rows yielded {rows}")


def open_binary(path: str) -> io.BufferedReader:
    try:
        return open(path, "rb")
    except OSError as e:
        raise OutputError(path, f"cannot open: {e.strerror}") from None


def release_pages(arr: np.ndarray) -> None:
    """Drop the pages under a memory-mapped, read-only array from this process's resident set
    (the file's pages stay cached; touched again, they are read back). A check that walks a
    mapped file piece by piece and releases each piece holds one piece, not the file. No-op
    for other arrays."""
    mm = getattr(arr, "_mmap", None)
    if mm is None or arr.nbytes == 0 or not hasattr(mm, "madvise"):
        return
    offset = arr.ctypes.data - np.frombuffer(mm, np.uint8).ctypes.data
    lo = offset // mmap.PAGESIZE * mmap.PAGESIZE
    mm.madvise(mmap.MADV_DONTNEED, lo, offset + arr.nbytes - lo)


class Reader:
    """Sequential little-endian reads from a binary file; every error names the file. With
    `base` (the whole file memory-mapped), arrays are views of it instead of copies."""

    def __init__(self, f: io.BufferedIOBase, path: str, base: Optional[np.memmap] = None) -> None:
        self.f = f
        self.path = path
        self.base = base
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
        return int(U64.unpack(self.take(8))[0])

    def i64(self) -> int:
        return int(I64.unpack(self.take(8))[0])

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
        magic, _, device, _, ndim, code, bits, lanes = ARRAY_HEAD.unpack(
            self.take(ARRAY_HEAD.size)
        )
        if magic != NDARRAY_MAGIC:
            raise self.fail(f"not an NDArray: magic number {magic:#x}")
        if device != CPU or lanes != 1 or not 0 <= ndim <= 32:
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
        base = self.base if base is None else base
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


"""Tensor dicts, as `dgl.data.save_tensors` writes them: node_feat.dgl, edge_feat.dgl,
orig_nids.dgl and orig_eids.dgl of a partition.
"""
from __future__ import annotations

import os
import struct
from types import TracebackType
from typing import BinaryIO, Mapping, Optional, Type

import numpy as np

from ...errors import OutputError, PathLike
from .records import MIN_NAMED_ARRAY_BYTES, Pieces, Reader, open_binary, to_storable, write_storable, write_string

_TENSOR_DICT_MAGIC = 0xDD5A9FBE3FA2443F


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

    def add(self, key: str, arr: "np.ndarray | Pieces") -> None:
        """Append tensor `key`; its dtype is converted by `to_storable` (`Pieces` are written
        piece by piece, in their own dtype)."""
        if self._f is None:
            raise RuntimeError("TensorDictWriter.add called outside its `with` block")
        if len(self._keys) == self.num_tensors:
            raise ValueError(
                f"{self.path}: more than the {self.num_tensors} announced tensors added"
            )
        if key in self._keys:
            raise ValueError(f"{self.path}: tensor {key!r} added twice")
        if not isinstance(arr, Pieces):
            arr = to_storable(arr, key)
        write_string(self._f, key)
        write_storable(self._f, arr)
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
            # A failing run's cleanup on another rank may have removed it (and its folder)
            # already: gone is what is wanted, and a second error would hide the first.
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
        elif len(self._keys) != self.num_tensors:
            os.remove(self.path)
            raise ValueError(
                f"{self.path}: {len(self._keys)} tensors added, {self.num_tensors} announced"
            )


def write_tensor_dict(path: PathLike, tensors: Mapping[str, "np.ndarray | Pieces"]) -> None:
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
    with open_binary(path) as f:
        reader = Reader(f, path)
        reader.magic(_TENSOR_DICT_MAGIC, "DGL tensor dict")
        reader.u64()  # DGL ignores this copy of the count; so do we
        base = np.memmap(path, dtype=np.uint8, mode="r") if mmap else None
        tensors: dict[str, np.ndarray] = {}
        for _ in range(reader.count(MIN_NAMED_ARRAY_BYTES)):
            key = reader.string()
            if key in tensors:
                raise OutputError(path, f"tensor {key!r} appears twice")
            tensors[key] = reader.array(base)
        return tensors



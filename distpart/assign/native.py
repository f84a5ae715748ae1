"""The ctypes plumbing the METIS-family bindings (`parmetis`, `metis`) share: a loaded
library and its integer and real widths (`NativeLibrary`), finding it (`find_native`) and
the file really loaded (`loaded_path`), arrays for a probe call at unknown widths
(`padded`), and silencing what C code prints (`silenced`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence, Type

import numpy as np

from ..errors import DistpartError
from ..run.signals import undone_if_stuck


@dataclass(frozen=True)
class NativeLibrary:
    """A loaded METIS-family library (ParMETIS, METIS) and the C types of its idx_t and real_t."""

    path: str
    handle: ctypes.CDLL
    idx_bits: int
    real_bits: int

    @property
    def idx_dtype(self) -> np.dtype:
        return np.dtype(np.int32 if self.idx_bits == 32 else np.int64)

    @property
    def real_dtype(self) -> np.dtype:
        return np.dtype(np.float32 if self.real_bits == 32 else np.float64)

    @property
    def idx_max(self) -> int:
        return int(np.iinfo(self.idx_dtype).max)


def find_native(env: Mapping[str, str], variable: str, name: str, error: Type[DistpartError],
                missing: str) -> str:
    """Path of a METIS-family library: `$variable` if set (it must exist), else the system's
    `lib<name>`; else `error(missing)`."""
    explicit = env.get(variable)
    if explicit:
        if not Path(explicit).is_file():
            raise error(f"{variable}={explicit}: file does not exist")
        return explicit
    found = ctypes.util.find_library(name)
    if found:
        return found
    raise error(missing)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def loaded_path(handle: ctypes.CDLL, symbol: str, fallback: str) -> str:
    """The file the dynamic loader really took `symbol` from (symlinks resolved)."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:
        return fallback
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    addr = ctypes.cast(getattr(handle, symbol), ctypes.c_void_p)
    if not dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return fallback
    return str(Path(os.fsdecode(info.dli_fname)).resolve())


def padded(values: Sequence, dtype: np.dtype) -> np.ndarray:
    """`values` in `dtype`, zero-padded to twice their length: a library reading them at
    another width reads only our memory (and then rejects the values), not past the buffer."""
    a = np.zeros(2 * len(values), dtype=dtype)
    a[:len(values)] = values
    return a


@contextmanager
def silenced() -> Iterator[None]:
    """Redirect file descriptors 1 and 2 to /dev/null (C code prints there, not to sys.stdout).
    A stop that ends the process from inside the call gives them back first, so its line is seen."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    libc = ctypes.CDLL(None)
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)

    def restore() -> None:
        libc.fflush(None)
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)

    try:
        with undone_if_stuck(restore):
            yield
    finally:
        restore()
        for copy in saved:
            os.close(copy)

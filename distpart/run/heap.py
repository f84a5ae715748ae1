"""How the C heap serves the large NumPy temporaries of the iterative phases.

glibc's malloc serves every block above its mmap threshold (128 KiB, rising to at most
32 MiB) with a fresh `mmap` and returns it with `munmap` on free. An iterative method that
allocates and frees arrays of millions of entries per iteration then pays a page fault for
every 4 KiB of every temporary, every time. `reused_heap` makes malloc serve those blocks
from the heap and keep freed memory for the next allocation (`M_MMAP_MAX` 0, a high
`M_TRIM_THRESHOLD`), and gives the memory back (`malloc_trim`) and restores glibc's defaults
when the phase ends. The results are the same bytes; the cost is some fragmentation (both
measured in benchmarks/results/step1_history.md). Anywhere but glibc (musl, macOS) it does
nothing.

`DISTPART_HEAP=default` leaves malloc alone (to compare, or if a system's allocator is
already tuned through `GLIBC_TUNABLES` or `LD_PRELOAD`).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator, Optional

__all__ = ["reused_heap", "ENV"]

ENV = "DISTPART_HEAP"
# mallopt parameter numbers (malloc.h) and glibc's defaults, restored at the end.
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536
# Free memory at the heap's top stays mapped during the phase up to this (mallopt takes an
# int): in effect always, so the phase's own high-water mark decides how much there is.
PHASE_TRIM_THRESHOLD = 2**31 - 1


@lru_cache(maxsize=1)
def _glibc() -> Optional[ctypes.CDLL]:
    """The process's C library if it is glibc (mallopt and malloc_trim exist), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # glibc only  # noqa: B018
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None


@contextmanager
def reused_heap() -> Iterator[bool]:
    """Inside: large blocks come from the heap and freed ones are reused (yields True), or
    nothing changes (yields False: not glibc, or DISTPART_HEAP=default). Not reentrant in
    effect: an inner use ends the outer one's setting early, so wrap whole phases only."""
    libc = None if os.environ.get(ENV, "").strip().lower() == "default" else _glibc()
    if libc is None:
        yield False
        return
    ok = libc.mallopt(M_MMAP_MAX, 0) == 1
    ok = libc.mallopt(M_TRIM_THRESHOLD, PHASE_TRIM_THRESHOLD) == 1 and ok
    try:
        yield ok
    finally:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)

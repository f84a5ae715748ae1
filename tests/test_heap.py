"""run.heap: inside `reused_heap` a large block freed and allocated again costs no page
faults; outside it (before, after, or with DISTPART_HEAP=default) every allocation of it
faults its pages in again. Measured with the process's minor-fault count, on raw malloc
blocks (NumPy may ask for huge pages, which would hide the count)."""
from __future__ import annotations

import ctypes
import ctypes.util
import resource

import pytest

from distpart.run import heap

SIZE = 48 << 20   # above glibc's largest dynamic mmap threshold (32 MiB)
PAGES = SIZE // 4096

libc = heap._glibc()
pytestmark = pytest.mark.skipif(libc is None, reason="not glibc: reused_heap does nothing there")


def faults_of_a_block() -> int:
    """Minor faults of malloc + touching every page + free of one SIZE block."""
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = libc.malloc(SIZE)
    assert p
    ctypes.memset(p, 1, SIZE)
    libc.free(p)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_a_block_freed_inside_is_reused_without_faults_and_defaults_come_back(monkeypatch) -> None:
    monkeypatch.delenv(heap.ENV, raising=False)
    assert faults_of_a_block() > PAGES // 2 and faults_of_a_block() > PAGES // 2   # mmap each time
    with heap.reused_heap() as active:
        assert active
        faults_of_a_block()                      # the heap grows once
        assert faults_of_a_block() < PAGES // 20
    assert faults_of_a_block() > PAGES // 2      # mmap again: glibc's defaults restored


def test_distpart_heap_default_leaves_malloc_alone(monkeypatch) -> None:
    monkeypatch.setenv(heap.ENV, "default")
    with heap.reused_heap() as active:
        assert not active
        faults_of_a_block()
        assert faults_of_a_block() > PAGES // 2

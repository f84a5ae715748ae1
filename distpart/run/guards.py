"""Refusing a run that cannot finish, and disk errors while writing turned into one clear
message.

A job that dies after an hour because the output file system filled up wastes the hour. The
checks here compare the estimates of `chunked.estimate` (cheap: metadata only) with the free
space and the memory limit, and print them with the refusal so the user can judge them.
They are estimates: `--no-space-check` skips the disk check where a file system reports
free space wrongly (quotas, some parallel file systems).
"""
from __future__ import annotations

import errno
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from ..errors import InputError, OutputError

def gib(n: float) -> str:
    """Bytes for people: '812 KiB', '3.4 MiB', '1.25 GiB'."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{int(n)} B"


def check_space(out_dir: Path, need: int) -> None:
    """Refuse when the file system holding `out_dir` has less free space than `need`."""
    probe = Path(out_dir)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need:
        raise InputError(out_dir, f"the output needs about {gib(need)} but its file system has "
                                  f"{gib(free)} free; free space or choose another folder "
                                  f"(--no-space-check skips this estimate)")


def check_memory(estimate: int, limit_gb: float, stage: str = "dispatch",
                 advice: str = "use more ranks (memory per rank falls as 1/R)") -> None:
    """Refuse when `stage`'s estimated peak per rank exceeds --max-memory-gb."""
    if estimate > limit_gb * 2**30:
        raise InputError(None, f"{stage} needs about {gib(estimate)} per rank but --max-memory-gb is "
                               f"{limit_gb:g}; {advice}")


def check_stage_memory(estimates: Mapping[str, int], limit_gb: float, whole_graph: Sequence[str] = ()) -> None:
    """Refuse, naming the stage with the largest estimate, when any stage's estimated peak
    per rank exceeds --max-memory-gb; the message lists every stage's estimate. Stages in
    `whole_graph` hold the whole graph in one process: more ranks do not help them."""
    over = {s: e for s, e in estimates.items() if e > limit_gb * 2**30}
    if not over:
        return
    stage = max(over, key=over.__getitem__)
    listed = ", ".join(f"{s} {gib(e)}" for s, e in estimates.items())
    advice = ("use a method that spreads the graph over the ranks (--method multilevel)" if stage in whole_graph
              else "use more ranks (memory per rank falls as 1/R)")
    check_memory(over[stage], limit_gb, stage, f"{advice} (estimates per rank: {listed})")


@contextmanager
def writing(path: "str | os.PathLike[str]") -> Iterator[None]:
    """Turn an OS error while writing `path` into an OutputError with a clear message."""
    try:
        yield
    except OSError as e:
        if isinstance(e, (FileNotFoundError, IsADirectoryError)) or e.errno is None:
            raise
        where = getattr(e, "filename", None) or path
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OutputError(where, f"no space left on the output's file system while writing "
                                     f"({os.strerror(e.errno)}); free space and run again") from None
        raise OutputError(where, f"cannot write: {e.strerror or e}") from None


# glibc's mallopt parameter number, and the threshold distpart fixes it at.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20


def return_freed_memory_to_the_os() -> bool:
    """Make glibc serve every allocation of 1 MiB or more with its own mmap, returned to
    the OS when freed. By default glibc raises its mmap threshold each time such a block is
    freed (up to 32 MiB), so the stages' many medium arrays (pieces, exchange buffers) end
    up on the heap, whose freed space it keeps, and Step 1's peak grows by half (commit b43850a).
    A user's own MALLOC_MMAP_THRESHOLD_ wins. Returns whether the setting was applied."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False

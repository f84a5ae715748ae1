"""Keeping ranks in step when something fails: `agreed`.

SPMD code hangs if one rank raises while the others wait in a collective. Every rank-local
step that can fail on bad input therefore runs inside `agreed(comm)`: at its end all ranks
learn whether any rank failed (one Allreduce of a flag), and if one did, they exchange their
verdicts and every rank raises the same error. A verdict is a short control message, the
one place where a pickled lowercase call is used.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional, Tuple

import numpy as np

from ..errors import DistpartError, InputError, OutputError

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

_KINDS = {"InputError": InputError, "OutputError": OutputError}


@contextmanager
def agreed(comm: Intracomm) -> Iterator[None]:
    """Run a rank-local block; raise on every rank the first error any rank hit in it.

    Only DistpartError is agreed on; other exceptions are bugs and propagate (the CLI then
    aborts the whole job so that no rank hangs).
    """
    verdict: Optional[Tuple[str, Optional[str], str, str]] = None
    try:
        yield
    except DistpartError as e:
        where = getattr(e, "where", None)
        verdict = (type(e).__name__, where, getattr(e, "problem", str(e)), str(e))
    from mpi4py import MPI
    # The common case, no failure, costs one small collective; a pickled allgather is two.
    failures = np.array([verdict is not None], dtype=np.int32)
    comm.Allreduce(MPI.IN_PLACE, [failures, MPI.INT32_T], op=MPI.SUM)
    if not failures[0]:
        return
    verdicts = comm.allgather(verdict)
    failed = [(rank, v) for rank, v in enumerate(verdicts) if v is not None]
    if failed:
        rank, (kind, where, problem, text) = failed[0]
        cls = _KINDS.get(kind)
        err = cls(where, problem) if cls else DistpartError(text)
        err.rank = rank  # type: ignore[attr-defined]
        raise err

"""How a command ends, on one process or on every rank: the one error policy of `distpart`
(cli) and of DGL's tools (dgltools.backend).

- A user error (DistpartError) is agreed on by all ranks, printed once as `LABEL: error:
  ...` by rank 0 (in a mismatched launch every process is a rank 0: only the launcher's rank 0
  speaks), and every rank returns EXIT_USER_ERROR.
- A stop asked for from outside (Ctrl-C, a scheduler's SIGTERM; `signals`) is one line per
  rank and 128 + the signal, for the commands that route stops (`stop_line`); elsewhere it
  is handled as the next case.
- Any other exception is a bug: the rank prints its traceback and aborts the whole MPI job
  (`mpi.failure`), so no rank is left waiting in a collective.
"""
from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from ..errors import EXIT_USER_ERROR, DistpartError
from ..mpi.failure import abort_on_bug
from ..mpi.world import check_world, launcher_rank, library_name
from .progress import Progress, rank_tag
from .signals import Stopped, last_words, leave_stopped

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

__all__ = ["EXIT_USER_ERROR", "Job", "alone", "on_every_rank"]


def alone(label: str, body: Callable[[], Optional[int]]) -> int:
    """Run a command that needs no MPI: a DistpartError is one line `LABEL: error: ...` and
    EXIT_USER_ERROR; else `body`'s exit status (None: 0)."""
    try:
        return body() or 0
    except DistpartError as e:
        print(f"{label}: error: {e}", file=sys.stderr, flush=True)
        return EXIT_USER_ERROR


@dataclass
class Job:
    """One SPMD command on every rank of MPI's world. `label` starts its error lines
    ("distpart assign", "pm_dglpart"); `progress` is where rank 0 also logs them (the
    command may replace it once its log file is open)."""

    comm: "Intracomm"
    label: str
    host: str
    library: str
    progress: Progress = field(default_factory=Progress.off)

    @classmethod
    def world(cls, label: str) -> "Job":
        from mpi4py import MPI
        return cls(MPI.COMM_WORLD, label, MPI.Get_processor_name(), library_name(MPI.Get_library_version()))

    @property
    def rank(self) -> int:
        return self.comm.Get_rank()

    @property
    def size(self) -> int:
        return self.comm.Get_size()

    @property
    def tag(self) -> str:
        return rank_tag(self.rank, self.size, self.host)


def on_every_rank(job: Job, body: Callable[[], None], *, stop_line: Optional[Callable[[Stopped], str]] = None,
                  outputs: Iterable[Optional[Path]] = (), inputs: Iterable[Optional[Path]] = (),
                  log_file: Optional[Path] = None) -> int:
    """Run `body` on every rank under the module docstring's policy; 0 when it returns.
    `outputs`, `inputs` and `log_file` say where a bug's record may go (`abort_on_bug`)."""
    rank, size = job.rank, job.size

    def say_stopped(stop: Stopped) -> None:
        message = f"{job.label}: {stop_line(stop)}"
        # Every rank says it: the launcher may end rank 0 before it speaks when another
        # rank took the signal first.
        print(message if rank == 0 else f"{job.tag} {message}", file=sys.stderr, flush=True)
        if rank == 0:
            job.progress.say(message, to_stream=False)

    try:
        # Before any collective or file: a size-1 world under a many-process launcher is a
        # mismatch, and each such process must stop on its own.
        check_world(size, os.environ, job.library)
        if stop_line is None:
            body()
        else:
            with last_words(say_stopped):
                body()
    except DistpartError as e:
        if rank == 0 and (size > 1 or launcher_rank(os.environ) in (None, 0)):
            message = f"{job.label}: error: {e}"
            print(message, file=sys.stderr, flush=True)
            job.progress.say(message, to_stream=False)
        return EXIT_USER_ERROR
    except BaseException as e:
        if stop_line is not None and isinstance(e, (Stopped, KeyboardInterrupt)):
            # The user's or the scheduler's choice: one line, 128 + the signal, the lock
            # released (folder_locks), nothing published that was not complete.
            stop = e if isinstance(e, Stopped) else Stopped(signal.SIGINT)
            say_stopped(stop)
            return leave_stopped(stop.exit_code, size)
        # A bug: say why where the user will see it, then stop every rank.
        abort_on_bug(job.comm, e, job.tag, job.label, outputs=outputs, inputs=inputs, log_file=log_file)
    finally:
        job.progress.close()
    return 0

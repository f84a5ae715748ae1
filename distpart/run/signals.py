"""A stop asked for from outside: Ctrl-C (SIGINT) and a scheduler's cancel or time limit
(SIGTERM) end the run as the user's choice, not as an error or a bug.

`route_stops_to_main_thread` runs first on every rank, before MPI, NumPy or Arrow start a
thread: it blocks both signals, and every thread started later inherits the block, so no
thread ever runs a handler for them, and one watcher thread takes them with `sigwait` and
raises them in the main thread as `Stopped`. Why not the plain Python handler: while METIS
or ParMETIS run, GKlib installs its own SIGTERM handler (`gk_sigtrap`) and turns the signal
into METIS_ERROR, which read as "METIS failed" with the bad-input exit status; with the
signal blocked everywhere, GKlib never sees it and the stop lands when the call returns.

`Stopped` unwinds the run like any other exception (the folder lock is released, nothing
half-written is published), and the CLI prints one line and exits 128 + the signal (130,
143), as shells do.
"""
from __future__ import annotations

import _thread
import os
import signal
import sys
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """The run was stopped by a signal. A BaseException, as KeyboardInterrupt: no `except
    Exception` on the way may take it for a failure to recover from."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signal.Signals(signum).name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


# What the watcher took, for the main thread's handler (interrupt_main's own signal is SIGINT
# before Python 3.10).
_taken: "list[int]" = []


def _raise(signum: int, frame: object) -> None:
    raise Stopped(_taken.pop() if _taken else signum)


_routed = False


def route_stops_to_main_thread() -> None:
    """Block SIGINT and SIGTERM in this thread and every thread it starts from now on, and
    raise them in the main thread from one watcher thread. Once per process, from the main
    thread, before anything starts a thread; elsewhere a no-op."""
    global _routed
    if _routed or threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    threading.Thread(target=_forward_stops, name="distpart-stops", daemon=True).start()
    _routed = True


def _forward_stops() -> None:
    while True:
        _taken.append(signal.sigwait(STOP_SIGNALS))
        _thread.interrupt_main()


def unblock_stops() -> None:
    """In a child process started from a rank (it inherits the block): take the signals again."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


# Commands whose interrupted run `--resume` continues.
_RESUMABLE = ("assign", "dispatch", "pipeline")


def stopped_message(stop: Stopped, args: object) -> str:
    """The one line a stopped run prints (after `distpart COMMAND: `)."""
    what = "interrupted" if stop.signum == signal.SIGINT else "terminated"
    line = f"{what} ({stop.name}); nothing unfinished was published"
    if getattr(args, "command", None) in _RESUMABLE:
        line += ": rerun the same command with --resume to continue"
    return line


def leave_stopped(exit_code: int, world_size: int) -> int:
    """How a stopped rank leaves. Alone, it returns the exit status. With other ranks, some
    may wait in a collective the signal never let them leave, and MPI_Finalize would wait
    for them: the rank ends here, its streams flushed, and the launcher ends the others."""
    if world_size == 1:
        return exit_code
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(exit_code)

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

A main thread waiting inside MPI (a collective another rank will never join, because that
rank took the signal first and left) never gets back to Python to raise it, and the
launcher SIGKILLs it a second later with its lock still held. So the watcher gives the main
thread `GRACE_S` to take the stop; past that it claims the stop itself, runs what the
enclosing blocks registered with `undone_if_stuck` (release the lock, withdraw a published
config), says the stop line (`last_words`), and ends the process.
"""
from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, List

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Under Open MPI's 1 s between ending the job's other ranks with SIGTERM and with SIGKILL.
GRACE_S = 0.5


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


# Who handles a stop: the main thread (it raises Stopped) or the watcher (the main thread is
# stuck); whichever takes this first. Once taken, later signals change nothing.
_claim = threading.Lock()
_claimed_by_main = threading.Event()
_undo: List[Callable[[], None]] = []
_last_words: List[Callable[["Stopped"], None]] = []


def _raise(signum: int, frame: object) -> None:
    if not _claim.acquire(blocking=False):
        threading.Event().wait()  # the watcher ends the process
    _claimed_by_main.set()
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
        signum = signal.sigwait(STOP_SIGNALS)
        if _claim.locked():
            continue  # a stop is being handled already
        _taken.append(signum)
        _thread.interrupt_main()
        if not _claimed_by_main.wait(GRACE_S) and _claim.acquire(blocking=False):
            _stop_here(Stopped(signum))


def _stop_here(stop: Stopped) -> None:
    """The main thread is stuck: do what its unwinding would have done, then end the process."""
    for action in reversed(list(_undo)):
        try:
            action()
        except Exception:
            pass  # the stop goes on; what was left is what a SIGKILL would leave
    for say in _last_words:
        say(stop)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(stop.exit_code)


@contextmanager
def undone_if_stuck(action: Callable[[], None]) -> Iterator[None]:
    """Within the block, a stop that finds the main thread stuck runs `action` before the
    process ends (what the block's own unwinding would do)."""
    _undo.append(action)
    try:
        yield
    finally:
        _undo.remove(action)


@contextmanager
def last_words(say: Callable[[Stopped], None]) -> Iterator[None]:
    """Within the block, a stop that finds the main thread stuck is reported by `say`."""
    _last_words.append(say)
    try:
        yield
    finally:
        _last_words.remove(say)


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

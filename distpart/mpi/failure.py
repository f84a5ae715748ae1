"""A rank's last words: when an unexpected exception (a bug, not a DistpartError) stops one
rank, its reason must reach the user whichever host the rank ran on; then the whole job aborts.

This module owns that path for `distpart` (cli.main) and DGL's tools (dgltools.backend).
Under MPICH across hosts, a rank that printed its traceback and called MPI_Abort at once
could end the job with exit 1 and no message: the abort tore the job down while the
traceback still sat in the pipe to that host's MPI proxy. So `abort_on_bug`, before MPI_Abort:

1. writes the traceback to stderr, then one line: `PREFIX: error: [rank r/R host] Reason
   (unexpected: traceback above and in FILE; stopping every rank)`;
2. makes the reason durable: a record `distpart-error-rank<r>.txt` (first line `[rank r/R
   host] Reason`, then the command, time and traceback) in the run's output folder, which
   every rank sees, or else beside `--log-file`; and the one line appended to `--log-file`
   where this rank's host sees that file;
3. flushes stdout and stderr, then waits at most DRAIN_S until the proxy has read them (the
   pipe is empty: a proxy forwards what it read before it handles the abort that follows);
4. calls MPI_Abort.

Every step is best effort and bounded: nothing here may raise or wait forever, or the
other ranks would be left waiting in a collective.
"""
from __future__ import annotations

import array
import datetime
import fcntl
import os
import shlex
import stat
import sys
import termios
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, NoReturn, Optional

if TYPE_CHECKING:
    from mpi4py.MPI import Comm

RECORD_PREFIX = "distpart-error-rank"
DRAIN_S = 5.0            # longest wait for the launcher to read our stdout/stderr
SETTLE_S = 0.2           # then this long for it to pass on what it read
MAX_REASON = 500         # characters of the exception's text in the one-line reason
# Bytes written to a socket but not yet taken by its peer (Linux SIOCOUTQ; TIOCOUTQ's value).
_OUTQ = getattr(termios, "TIOCOUTQ", None)


def reason_of(error: BaseException) -> str:
    """The exception as one line, `Type: message`, cut to MAX_REASON characters."""
    text = " ".join("".join(traceback.format_exception_only(type(error), error)).split())
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 3] + "..."


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def record_folder(outputs: Iterable[Optional[Path]], inputs: Iterable[Optional[Path]] = (),
                  log_file: Optional[Path] = None) -> Optional[Path]:
    """Where this rank writes its record: the first of `outputs` (the run's output folders,
    on the file system every rank shares) that exists and is writable, else the folder of
    `log_file` if this rank sees that file; never a folder inside one of `inputs`."""
    never = []
    for p in inputs:
        if p is not None:
            p = Path(p).resolve()
            never.append(p.parent if p.is_file() else p)
    candidates = [*outputs, Path(log_file).parent if log_file is not None and Path(log_file).is_file() else None]
    for folder in candidates:
        try:
            if folder is None or not Path(folder).is_dir() or not os.access(folder, os.W_OK | os.X_OK):
                continue
            if not any(_inside(Path(folder).resolve(), n) for n in never):
                return Path(folder)
        except OSError:
            continue
    return None


def write_record(folder: Path, rank: int, tag: str, error: BaseException, tb: str) -> Optional[Path]:
    """`folder/distpart-error-rank<r>.txt`: `<tag> <reason>`, the command, time, host PID and
    traceback (a previous run's record of this rank is replaced); None if it cannot be written."""
    path = Path(folder) / f"{RECORD_PREFIX}{rank}.txt"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = (f"{tag} {reason_of(error)}\ncommand: {shlex.join(sys.argv)}\ntime: {now}, PID {os.getpid()}\n\n{tb}")
    try:
        from ..paths import write_file   # no link followed; whole or not at all
        return write_file(path, text.encode("utf-8", "replace"), "error record")
    except Exception:  # a record is a plus; the abort must go on
        return None


def append_line(log_file: Path, line: str) -> bool:
    """Append `line` to an existing log file (never create one: on another host the path may
    not be the file rank 0 writes); False if that cannot be done."""
    try:
        fd = os.open(log_file, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    try:
        os.write(fd, (line + "\n").encode("utf-8", "replace"))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def unread_bytes(fd: int) -> int:
    """Bytes written to `fd` that its reader has not taken yet: a pipe's (FIONREAD) or a
    socket's (SIOCOUTQ); 0 for a file, a terminal or a closed descriptor."""
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode):
            request = termios.FIONREAD
        elif stat.S_ISSOCK(mode) and _OUTQ is not None:
            request = _OUTQ
        else:
            return 0
        buf = array.array("i", [0])
        fcntl.ioctl(fd, request, buf, True)
        return max(buf[0], 0)
    except OSError:
        return 0


def wait_until_read(fds: Iterable[int] = (1, 2), limit: float = DRAIN_S, step: float = 0.01) -> bool:
    """Wait until nothing written to `fds` is left unread, at most `limit` seconds; True if so."""
    fds = list(fds)
    deadline = time.monotonic() + limit
    while any(unread_bytes(fd) for fd in fds):
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)
    return True


def _say(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # a closed or broken stderr must not stop the abort
        pass


def report_bug(error: BaseException, rank: int, tag: str, prefix: str, folder: Optional[Path] = None,
               log_file: Optional[Path] = None, drain: float = DRAIN_S) -> str:
    """Steps 1 to 3 of the module docstring; returns the one line it printed."""
    tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    _say(f"{tag} {tb}")
    record = write_record(folder, rank, tag, error, tb) if folder is not None else None
    where = f"traceback above and in {record}" if record else "traceback above"
    line = f"{prefix}: error: {tag} {reason_of(error)} (unexpected: {where}; stopping every rank)"
    if log_file is not None:
        append_line(Path(log_file), line)
    _say(line + "\n")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # as in _say
            pass
    if wait_until_read(limit=drain):
        time.sleep(SETTLE_S)
    return line


def abort_on_bug(comm: "Comm", error: BaseException, tag: str, prefix: str,
                 outputs: Iterable[Optional[Path]] = (), inputs: Iterable[Optional[Path]] = (),
                 log_file: Optional[Path] = None) -> NoReturn:
    """Report `error` (see the module docstring; the record goes to `record_folder(outputs,
    inputs, log_file)`), then abort every rank of `comm`'s job with status 1. Never returns."""
    try:
        try:
            folder = record_folder(outputs, inputs, log_file)
        except Exception:  # a place for the record is a plus; the message on stderr is not optional
            folder = None
        report_bug(error, comm.Get_rank(), tag, prefix, folder, log_file)
    finally:
        try:
            comm.Abort(1)
        finally:
            os._exit(1)     # Abort does not return; if it did, or failed, this rank must still stop

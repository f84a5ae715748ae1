"""One run per output folder: a lock file naming its holder (host, PID, start time), held
with `flock` for the run's whole life.

Two runs writing one folder (a double submission, or a launcher/library mismatch that
starts N one-rank jobs) interleave their partition files and leave output that looks
complete but is not. Rank 0 takes `<folder>/.distpart.lock` before anything in the folder
is touched and removes it when the run ends, also on error.

Holding the lock is an exclusive `flock` on the open lock file, not the file's existence:
the kernel (or the NFS lock manager) drops it when the holder dies, so a lock a killed run
left behind is simply a file nobody holds, and taking it over is the same atomic `flock`
that any start does: of many runs started at once against such a file exactly one wins,
with no window between "is it stale?" and "take it". After winning, the taker checks that
the path still names the file it locked (a releasing holder unlinks it first), and rewrites
the content: host, PID and command, for people and for the refusal message. The content is
never trusted for exclusion, so any content (garbage, a huge PID) is only a note. Two
conservative rules stay: a file naming a live process on this host, or a process on another
host, is never taken over even when unlocked (an older distpart, a file system whose locks do
not reach across hosts); and where the file system has no locks at all, a leftover lock is
refused with the command to remove it, since no takeover could be atomic there.

File operations only; `folder_locks` runs them on rank 0 and makes every rank agree.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import stat
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Sequence

from ..errors import DistpartError, InputError
from ..mpi.collective import agreed
from ..paths import OWNER_MARKER
from .signals import undone_if_stuck

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

LOCK_NAME = ".distpart.lock"
_PID_LIMIT = 1 << 22          # Linux's largest pid_max; also keeps os.kill away from OverflowError
# flock errors that mean "this file system has no locks", not "someone holds it".
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: enough to find the run, and to tell whether it still lives."""

    host: str
    pid: int
    started: str                 # local time, for people
    proc_start: Optional[int]    # /proc/<pid>/stat start time (clock ticks after boot), Linux
    command: str

    def describe(self) -> str:
        return f"host {self.host}, PID {self.pid}, started {self.started}, running `{self.command}`"


def _proc_stat(pid: int) -> Optional[List[str]]:
    """Fields 3.. of /proc/<pid>/stat (state first), or None where /proc does not tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    return stat[stat.rindex(")") + 2:].split()


def process_start(pid: int) -> Optional[int]:
    """The kernel's start time of process `pid`, or None where /proc does not tell."""
    fields = _proc_stat(pid)
    return int(fields[19]) if fields else None


def is_zombie(pid: int) -> bool:
    """A killed process nobody has reaped yet (its parent died too): gone, though kill(pid, 0)
    still succeeds. Containers whose PID 1 does not reap leave these for a long time."""
    fields = _proc_stat(pid)
    return bool(fields) and fields[0] in ("Z", "X")


def current_holder(command: str) -> Holder:
    pid = os.getpid()
    return Holder(socket.gethostname(), pid, time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                  process_start(pid), command)


def is_stale(holder: Holder, host: Optional[str] = None) -> bool:
    """True when the holder ran on this host and its process is gone (PID free or reused)."""
    if holder.host != (host or socket.gethostname()):
        return False
    if not 0 < holder.pid < _PID_LIMIT:   # no process can have it: the file is damaged
        return True
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, under another user
    if is_zombie(holder.pid):
        return True
    return holder.proc_start is not None and process_start(holder.pid) not in (None, holder.proc_start)


def parse_holder(text: str) -> Optional[Holder]:
    """The holder a lock file's text names, or None for anything else (empty, garbage)."""
    try:
        data = json.loads(text)
        return Holder(str(data["host"]), int(data["pid"]), str(data["started"]),
                      None if data.get("proc_start") is None else int(data["proc_start"]),
                      str(data.get("command", "")))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


def read_holder(path: Path) -> Optional[Holder]:
    try:
        return parse_holder(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


class FolderLock:
    """The lock of one folder, held by this process from `acquire` to `release`."""

    def __init__(self, folder: Path, holder: Holder) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.holder = holder
        self.notes: List[str] = []
        self._fd: Optional[int] = None
        self._created: List[Path] = []     # folders this lock made, deepest first
        self._had_marker = False
        self._was_empty = False             # an existing folder with nothing in it

    def acquire(self) -> "FolderLock":
        missing = [self.folder, *self.folder.parents]
        self._created = [d for d in missing[:next((i for i, d in enumerate(missing) if d.exists()), len(missing))]]
        self._had_marker = (self.folder / OWNER_MARKER).exists()
        self._was_empty = self.folder.is_dir() and not any(self.folder.iterdir())
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise InputError(self.folder, "exists and is not a folder") from None
        except OSError as e:
            raise InputError(self.folder, f"cannot create the folder: {e.strerror}") from None
        for _ in range(100):  # retried only when the file is replaced under us, which is rare
            fd, created = self._open()
            if fd is None:
                continue
            try:
                if self._lock(fd, created) and self._still_at_path(fd):
                    self._take(fd, created)
                    self._fd, fd = fd, None
                    return self
            finally:
                if fd is not None:
                    os.close(fd)
        raise InputError(self.path, "keeps being replaced by other runs; start again")

    def _open(self) -> "tuple[Optional[int], bool]":
        """(descriptor, whether we created the file); (None, False) if it vanished meanwhile.

        Never follows a link and never blocks (a FIFO), and nothing is written before the
        flock is held and the path is known to be a regular file: a link at the lock path
        must not lead the lock's text into another file, the input included."""
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o644), True
        except FileExistsError:
            pass
        except OSError as e:
            raise InputError(self.folder, f"cannot write in the folder: {e.strerror}") from None
        try:
            fd = os.open(self.path, os.O_RDWR | _NO_FOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None, False
        except OSError as e:
            if e.errno == errno.ELOOP or self.path.is_symlink():
                self._refuse_not_regular()
            raise InputError(self.path, f"cannot open the lock file: {e.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self._refuse_not_regular()
        return fd, False

    def _refuse_not_regular(self) -> None:
        """A lock path that is a link (dangling or not), a FIFO, a device or a folder: refused
        untouched, since only a regular file distpart made can be a lock."""
        if self.path.is_symlink():
            what = f"is a symbolic link (to {os.readlink(self.path)})"
        else:
            what = "is not a regular file"
        raise InputError(self.path, f"{what}: distpart's lock must be a regular file it made itself, "
                                    f"so it writes nothing through this; remove it and start again")

    def _lock(self, fd: int, created: bool) -> bool:
        """Take the flock, or raise the refusal naming whoever holds it."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            other = parse_holder(_read_all(fd))
            if other is None or is_stale(other):
                # Its content is a dead run's (or not yet written): a live run is taking it over.
                raise InputError(self.folder, "is in use by another distpart run, which is taking "
                                              "over a stale lock right now") from None
            raise InputError(self.folder, f"is in use by another distpart run ({other.describe()})") from None
        except OSError as e:
            if e.errno not in _NO_LOCKS:
                raise InputError(self.path, f"cannot lock: {e.strerror}") from None
            if created:
                return True   # O_EXCL made it ours; without locks that is all there is
            self._refuse_without_locks(fd)
            return False

    def _still_at_path(self, fd: int) -> bool:
        """A holder unlinks the file when it releases: our flock must be on the file the path
        names now, not on an unlinked one."""
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)

    def _take(self, fd: int, created: bool) -> None:
        """Make the locked file ours: refuse a file that a live or remote run still names,
        note what is taken over, write our holder."""
        if not created:
            text = _read_all(fd)
            other = parse_holder(text)
            if other is None:
                content = "an empty lock file" if not text.strip() else "a lock file that named no run"
                self.notes.append(f"replaced {content} (no process held it)")
            elif other.host != socket.gethostname():
                raise InputError(self.folder, f"is in use by another distpart run ({other.describe()}); "
                                              f"if that run is dead (it ran on another host, so this "
                                              f"cannot be checked from here), delete {self.path} and "
                                              f"start again")
            elif not is_stale(other):
                raise InputError(self.folder, f"is in use by another distpart run ({other.describe()})")
            else:
                self.notes.append(f"removed the stale lock of a run that is no longer running "
                                  f"({other.describe()})")
        data = (json.dumps(asdict(self.holder)) + "\n").encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def _refuse_without_locks(self, fd: int) -> None:
        other = parse_holder(_read_all(fd))
        who = f" ({other.describe()})" if other is not None else ""
        if other is not None and not is_stale(other):
            raise InputError(self.folder, f"is in use by another distpart run{who}")
        raise InputError(self.path, f"is left by a run that is no longer running{who}, and this file "
                                    f"system has no file locks, so distpart cannot take it over "
                                    f"safely: if no distpart run uses this folder, delete the file "
                                    f"and start again")

    def withdraw(self, everything: bool) -> None:
        """After a run ended in an error, while the lock is still held: undo what it wrote.

        A folder this run created, or found empty, holds only this run's files: with
        `everything` (a refusal: the input or the arguments were wrong, so nothing of the run
        is worth keeping) it is emptied, and removed if created; otherwise (a failure part-way,
        a full disk say) its partial files stay for inspection, and only a folder holding
        nothing but the lock and marker goes. In a folder that held something before, only a
        marker this run added goes, when nothing else of the run is there."""
        if self._fd is None or not self.folder.is_dir():
            return
        fresh = bool(self._created) or self._was_empty
        leftover = set(os.listdir(self.folder)) - {LOCK_NAME, OWNER_MARKER}
        if fresh and (everything or not leftover):
            for name in leftover | {OWNER_MARKER}:
                path = self.folder / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            self.release()
            for folder in self._created:
                try:
                    folder.rmdir()
                except OSError:
                    break   # not empty: someone else uses it
        elif not leftover and not self._had_marker:
            (self.folder / OWNER_MARKER).unlink(missing_ok=True)

    def release(self) -> None:
        """Unlink the lock file (only while it is still ours), then drop the flock."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self._still_at_path(fd):
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _read_all(fd: int, limit: int = 1 << 16) -> str:
    """The lock file's text (at most `limit` bytes: a lock is a line of JSON)."""
    try:
        return os.pread(fd, limit, 0).decode("utf-8", errors="replace")
    except OSError:
        return ""


@contextmanager
def folder_locks(comm: Intracomm, folders: Sequence[Path], command: str,
                 say: Callable[[str], None] = lambda text: None) -> Iterator[None]:
    """Hold the lock of every folder for the block; rank 0 takes them, all ranks agree. Collective."""

    held: List[FolderLock] = []
    try:
        with agreed(comm):
            if comm.Get_rank() == 0:
                holder = current_holder(command)
                for folder in folders:
                    lock = FolderLock(folder, holder).acquire()
                    held.append(lock)
                    for note in lock.notes:
                        say(f"{folder}: {note}")
        with undone_if_stuck(lambda: [lock.release() for lock in held]):
            yield
    except DistpartError as e:
        # A refusal leaves the file system as it found it: no folder, file, marker or lock of
        # ours (see FolderLock.withdraw for what a failure part-way leaves).
        for lock in reversed(held):
            lock.withdraw(everything=isinstance(e, InputError))
        raise
    finally:
        for lock in held:
            lock.release()

"""One run per output folder: a lock file naming its holder (host, PID, start time).

Two runs writing one folder (a double submission, or a launcher/library mismatch that
starts N one-rank jobs) interleave their partition files and leave output that looks
complete but is not. Rank 0 creates `<folder>/.distpart.lock` with O_CREAT|O_EXCL (atomic
on local file systems and on NFSv3+) before anything in the folder is touched, and removes
it when the run ends, also on error. A lock left by a run that was killed is stale: on the
holder's own host that is decided by checking that its PID is gone (or now belongs to a
different process, by start time); a lock held from another host is never broken silently.

File operations only; `folder_locks` runs them on rank 0 and makes every rank agree.
"""
from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Sequence

from ..errors import InputError

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

LOCK_NAME = ".distpart.lock"


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
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, under another user
    if is_zombie(holder.pid):
        return True
    return holder.proc_start is not None and process_start(holder.pid) not in (None, holder.proc_start)


def read_holder(path: Path) -> Optional[Holder]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Holder(str(data["host"]), int(data["pid"]), str(data["started"]),
                      None if data.get("proc_start") is None else int(data["proc_start"]),
                      str(data.get("command", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class FolderLock:
    """The lock of one folder, held by this process from `acquire` to `release`."""

    def __init__(self, folder: Path, holder: Holder) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.holder = holder
        self.notes: List[str] = []
        self._held = False

    def acquire(self) -> "FolderLock":
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise InputError(self.folder, "exists and is not a folder") from None
        except OSError as e:
            raise InputError(self.folder, f"cannot create the folder: {e.strerror}") from None
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                self._break_if_stale()
                continue
            except OSError as e:
                raise InputError(self.folder, f"cannot write in the folder: {e.strerror}") from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(asdict(self.holder), f)
                f.write("\n")
            self._held = True
            return self
        raise InputError(self.path, "another run took the lock while a stale one was being removed")

    def _break_if_stale(self) -> None:
        other = read_holder(self.path)
        if other is None:
            # Unreadable: a run died between creating and writing it, or it is not ours.
            raise InputError(self.path, "exists but names no run; if no distpart run is using "
                                        "this folder, delete the file and start again")
        if not is_stale(other):
            where = ("" if other.host == socket.gethostname() else
                     f"; if that run is dead (it ran on another host, so this cannot be checked "
                     f"from here), delete {self.path} and start again")
            raise InputError(self.folder, f"is in use by another distpart run ({other.describe()}){where}")
        self.notes.append(f"removed the stale lock of a run that is no longer running ({other.describe()})")
        self.path.unlink(missing_ok=True)

    def release(self) -> None:
        if self._held:
            self._held = False
            current = read_holder(self.path)
            if current is not None and (current.host, current.pid) == (self.holder.host, self.holder.pid):
                self.path.unlink(missing_ok=True)


@contextmanager
def folder_locks(comm: Intracomm, folders: Sequence[Path], command: str,
                 say: Callable[[str], None] = lambda text: None) -> Iterator[None]:
    """Hold the lock of every folder for the block; rank 0 takes them, all ranks agree. Collective."""
    from ..mpi.collective import agreed

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
        yield
    finally:
        for lock in held:
            lock.release()

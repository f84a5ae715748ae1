"""The folder lock: exclusive, names its holder, breaks only locks of dead local runs."""
import json
import os
import socket
import subprocess
import sys

import pytest

from distpart.errors import InputError
from distpart.run.lock import LOCK_NAME, FolderLock, Holder, current_holder, is_stale, read_holder


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_acquire_writes_the_holder_and_release_removes_it(tmp_path):
    lock = FolderLock(tmp_path / "out", current_holder("distpart pipeline")).acquire()
    holder = read_holder(tmp_path / "out" / LOCK_NAME)
    assert holder == lock.holder and holder.pid == os.getpid() and holder.host == socket.gethostname()
    lock.release()
    assert not (tmp_path / "out" / LOCK_NAME).exists()


def test_a_live_holder_is_named_in_the_refusal(tmp_path):
    first = FolderLock(tmp_path, current_holder("distpart dispatch")).acquire()
    with pytest.raises(InputError) as e:
        FolderLock(tmp_path, current_holder("distpart pipeline")).acquire()
    text = str(e.value)
    assert "is in use by another distpart run" in text
    assert f"PID {os.getpid()}" in text and socket.gethostname() in text and "distpart dispatch" in text
    first.release()


def test_a_dead_local_holder_is_stale_and_replaced_with_a_note(tmp_path):
    stale = Holder(socket.gethostname(), dead_pid(), "yesterday", None, "distpart pipeline")
    (tmp_path / LOCK_NAME).write_text(json.dumps(stale.__dict__))
    lock = FolderLock(tmp_path, current_holder("distpart pipeline")).acquire()
    assert read_holder(tmp_path / LOCK_NAME).pid == os.getpid()
    assert "stale lock" in lock.notes[0] and str(stale.pid) in lock.notes[0]
    lock.release()


def test_a_reused_pid_is_stale(tmp_path):
    me = current_holder("x")
    if me.proc_start is None:
        pytest.skip("no /proc here")
    assert not is_stale(me)
    assert is_stale(Holder(me.host, me.pid, me.started, me.proc_start + 1, "x"))


def test_a_holder_on_another_host_is_never_broken(tmp_path):
    other = Holder("some-other-node", 1, "today", None, "distpart dispatch")
    (tmp_path / LOCK_NAME).write_text(json.dumps(other.__dict__))
    with pytest.raises(InputError, match="ran on another host.*delete .*\\.distpart\\.lock"):
        FolderLock(tmp_path, current_holder("distpart pipeline")).acquire()
    assert read_holder(tmp_path / LOCK_NAME) == other


def test_unreadable_lock_and_unusable_folder(tmp_path):
    (tmp_path / LOCK_NAME).write_text("not json")
    with pytest.raises(InputError, match="names no run"):
        FolderLock(tmp_path, current_holder("x")).acquire()
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="exists and is not a folder"):
        FolderLock(tmp_path / "file", current_holder("x")).acquire()


def test_release_leaves_a_lock_someone_else_took(tmp_path):
    lock = FolderLock(tmp_path, current_holder("x")).acquire()
    other = Holder("elsewhere", 5, "now", None, "y")
    (tmp_path / LOCK_NAME).write_text(json.dumps(other.__dict__))
    lock.release()
    assert read_holder(tmp_path / LOCK_NAME) == other


def test_an_unreaped_killed_holder_is_stale():
    """A SIGKILLed run whose parent died too stays a zombie where PID 1 does not reap (many
    containers): kill(pid, 0) still succeeds, yet the run is gone."""
    import time
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        for _ in range(500):  # exited but not yet waited for: a zombie
            with open(f"/proc/{child.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.01)
        holder = Holder(socket.gethostname(), child.pid, "then", None, "distpart pipeline")
        assert is_stale(holder)
    finally:
        child.wait()

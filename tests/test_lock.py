"""The folder lock: exclusive, names its holder, breaks only locks of dead local runs."""
import json
import os
import socket
import stat
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


@pytest.mark.parametrize("content", ["not json", "", '{"host": "h"}', "\x00\xff" * 40,
                                     '{"host": "%s", "pid": 99999999999999999999999, "started": "then"}'])
def test_any_content_of_an_unheld_lock_is_taken_over_with_a_note(tmp_path, content):
    """Garbage, an empty file (a run killed between creating and writing it), a PID no
    process can have: nobody holds the flock, so the lock is taken, never an OverflowError."""
    (tmp_path / LOCK_NAME).write_text(content.replace("%s", socket.gethostname()))
    lock = FolderLock(tmp_path, current_holder("x")).acquire()
    assert read_holder(tmp_path / LOCK_NAME).pid == os.getpid()
    assert len(lock.notes) == 1 and ("named no run" in lock.notes[0] or "stale lock" in lock.notes[0]
                                     or "an empty lock file" in lock.notes[0])
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


@pytest.mark.parametrize("target", ["input", "dangling", "fifo"])
def test_a_lock_path_that_is_not_a_regular_file_is_refused_untouched(tmp_path, target):
    """A link at the lock path (to the input's metadata.json, or to nothing) is never written
    through, and a FIFO neither blocks nor raises: each is refused by name, left as it was."""
    out, victim = tmp_path / "out", tmp_path / "metadata.json"
    out.mkdir()
    victim.write_text('{"graph_name": "g"}\n')
    lock_path = out / LOCK_NAME
    if target == "fifo":
        os.mkfifo(lock_path)
        match = "is not a regular file"
    else:
        os.symlink(victim if target == "input" else tmp_path / "nothing", lock_path)
        match = "is a symbolic link"
    with pytest.raises(InputError, match=f"{LOCK_NAME}: {match}.*remove it"):
        FolderLock(out, current_holder("distpart pipeline")).acquire()
    assert victim.read_text() == '{"graph_name": "g"}\n'
    assert not (tmp_path / "nothing").exists()
    assert os.path.islink(lock_path) or stat.S_ISFIFO(os.lstat(lock_path).st_mode)


def test_unusable_folder(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="exists and is not a folder"):
        FolderLock(tmp_path / "file", current_holder("x")).acquire()


def test_release_leaves_a_lock_file_that_is_not_its_own(tmp_path):
    """Someone replaced the lock file (a new file at the path): release removes only its own."""
    lock = FolderLock(tmp_path, current_holder("x")).acquire()
    other = Holder("elsewhere", 5, "now", None, "y")
    (tmp_path / "other").write_text(json.dumps(other.__dict__))
    os.replace(tmp_path / "other", tmp_path / LOCK_NAME)
    lock.release()
    assert read_holder(tmp_path / LOCK_NAME) == other


def _start_many(folder, n: int, stale_content: str) -> list:
    """n processes that each try to take the lock at the same moment (released together by a
    pipe); the one that gets it holds it until every process has said how it went (so that a
    late starter on a loaded machine cannot take it after a release); returns each one's
    outcome. Deciding staleness is slowed to 50 ms, as on a slow network file system: a
    takeover that is not atomic then loses."""
    script = (
        "import os, sys, time\n"
        "import distpart.run.lock as L\n"
        "from distpart.run.lock import FolderLock, current_holder\n"
        "from distpart.errors import InputError\n"
        "real = L.is_stale\n"
        "L.is_stale = lambda *a, **k: (time.sleep(0.05), real(*a, **k))[1]\n"
        "sys.stdin.read(1)\n"
        "try:\n"
        "    lock = FolderLock(sys.argv[1], current_holder('distpart pipeline')).acquire()\n"
        "except InputError as e:\n"
        "    print('refused', e); sys.exit(0)\n"
        "print('locked'); sys.stdout.flush(); sys.stdin.read(); lock.release()\n")
    (folder / LOCK_NAME).write_text(stale_content)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(folder)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(n)]
    for p in procs:   # all started; now let them go at once
        p.stdin.write("x")
        p.stdin.flush()
    outcomes = [p.stdout.readline().strip() for p in procs]
    for p in procs:   # every one has answered: the holder may release
        p.stdin.close()
    for p in procs:
        p.wait(timeout=60)
    return outcomes


@pytest.mark.parametrize("attempt", range(3))
def test_many_starts_against_a_stale_lock_exactly_one_runs(tmp_path, attempt):
    stale = Holder(socket.gethostname(), dead_pid(), "yesterday", None, "distpart pipeline")
    outcomes = _start_many(tmp_path, 8, json.dumps(stale.__dict__))
    assert sum(o == "locked" for o in outcomes) == 1, outcomes
    assert all(o == "locked" or o.startswith("refused") and "in use by another distpart run" in o
               for o in outcomes), outcomes
    assert not (tmp_path / LOCK_NAME).exists()   # the winner released it


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

"""A stop (SIGTERM, Ctrl-C) that finds the main thread stuck in C code, as a rank waiting in
a collective another rank has left: the watcher ends the process itself, after undoing what
the enclosing blocks registered, with the stop line and 128 + the signal (run.signals)."""
import signal
import subprocess
import sys
import textwrap
import time

SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from distpart.run.signals import last_words, route_stops_to_main_thread, undone_if_stuck
    route_stops_to_main_thread()
    lock = Path(sys.argv[1])
    lock.write_text("held")
    import ctypes
    with last_words(lambda s: print("stopped", s.name, flush=True)):
        with undone_if_stuck(lambda: lock.unlink()):
            with undone_if_stuck(lambda: print("inner first", lock.exists(), flush=True)):
                print("waiting", flush=True)
                ctypes.CDLL(None).sleep(60)  # C code with the GIL released, as MPI_Allreduce
    print("not reached", flush=True)
""")


def in_sleep(pid: int, within: float = 10.0) -> None:
    """Wait until the process's main thread is inside its sleep call (in C, not at Python)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/syscall") as f:
            if f.read().split()[0] in ("35", "230"):   # nanosleep, clock_nanosleep (x86-64)
                return
        time.sleep(0.01)
    raise AssertionError("the child never reached its sleep")


def test_a_stop_that_finds_the_main_thread_stuck_releases_and_exits(tmp_path):
    lock = tmp_path / ".distpart.lock"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(lock)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "waiting\n"
        in_sleep(proc.pid)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    # Innermost block first (its lock still there), then the lock, then the line.
    assert out.splitlines() == ["inner first True", "stopped SIGTERM"], out + err
    assert not lock.exists()
    assert time.monotonic() - sent < 20


def test_a_stop_the_main_thread_takes_is_raised_there_once(tmp_path):
    """Not stuck: the main thread raises Stopped and unwinds; a second signal while it does
    changes nothing (no second Stopped inside its cleanup, no exit from the watcher)."""
    script = textwrap.dedent("""
        import os, signal, time
        from distpart.run.signals import Stopped, last_words, route_stops_to_main_thread
        route_stops_to_main_thread()
        with last_words(lambda s: print("watcher spoke", flush=True)):
            try:
                print("waiting", flush=True)
                while True:
                    time.sleep(0.01)
            except Stopped as stop:
                os.kill(os.getpid(), signal.SIGINT)
                t = time.monotonic()
                while time.monotonic() - t < 1.5:   # past the grace, still cleaning up
                    time.sleep(0.01)
                print("unwound", stop.name, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "waiting\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, out) == (0, "unwound SIGTERM\n"), err

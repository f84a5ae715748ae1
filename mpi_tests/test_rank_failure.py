"""A rank that dies mid-run: the whole job stops with a non-zero status and no complete-looking output.

A rank that stops on a bug (an exception that is no DistpartError) also says why, where the
user sees it: its traceback and one line naming the reason and its record file on stderr, the
record in the output folder, the line in --log-file (issue 28 item 12; distpart/mpi/failure.py).
The bug is injected by a `sitecustomize` on PYTHONPATH that makes a stage raise on one rank.
Two hosts under MPICH: test_mpich.py.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness import mpi_command, mpi_env, run_bounded

psutil = pytest.importorskip("psutil")


def test_killed_rank_stops_the_job(tmp_path):
    from distpart.synthetic import homogeneous_graph
    in_dir = homogeneous_graph(tmp_path / "in", 400_000, 4_000_000, num_chunks=4, fmt="csv").parent
    out = tmp_path / "out"
    cmd = mpi_command(2, ["pipeline", in_dir, out, "--num-parts", 2, "--method", "random"])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=mpi_env(), start_new_session=True)
    # Rank 0 announces each stage on stderr: kill rank 1 once the job is inside dispatch,
    # where every rank is in collectives, instead of guessing a delay.
    in_dispatch = threading.Event()
    err_lines = []

    def read_stderr():
        for line in proc.stderr:
            err_lines.append(line)
            if "stage nodes started" in line:
                in_dispatch.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert in_dispatch.wait(120), "the job never reached dispatch:\n" + "".join(err_lines)
        ranks = [p for p in psutil.Process(proc.pid).children(recursive=True)
                 if "distpart.cli" in " ".join(p.cmdline())]
        assert len(ranks) == 2, "ranks not found"
        ranks[1].send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the job hung after a rank died")
    reader.join(timeout=10)
    assert proc.returncode != 0
    assert not (out / "metadata.json").exists()
    # Partition files carry their final names only once complete: a killed run leaves only staged ones.
    leftovers = [f.name for f in out.glob("part*/*")]
    assert leftovers and all(name.endswith(".partial") for name in leftovers), leftovers
    assert not (out / "distpart-manifest.json").exists()
    for p in psutil.Process().children(recursive=True):
        assert "distpart.cli" not in " ".join(p.cmdline()), "a rank outlived the job"


TIMEOUT = 120       # seconds per mpiexec; each run here takes 1-3 s
RAISE_HOOK = """import distpart.run.faults as faults
original = faults.pause_point


def pause_point(name, rank):
    if name == {point!r} and rank == {rank}:
        raise RuntimeError("injected bug at " + name + " on rank " + str(rank))
    original(name, rank)


faults.pause_point = pause_point
"""


def _env_raising_at(tmp_path: Path, point: str, rank: int) -> dict:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(RAISE_HOOK.format(point=point, rank=rank))
    env = mpi_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH")]))
    return env


def test_a_bug_on_one_rank_is_reported_in_the_output_folder_and_the_log(example_dir, tmp_path):
    out, log = tmp_path / "out", tmp_path / "logs" / "run.log"
    log.parent.mkdir()
    run = run_bounded(mpi_command(2, ["pipeline", example_dir, out, "--num-parts", 2, "--method", "random",
                                      "--log-file", log]), _env_raising_at(tmp_path, "assign", 1), TIMEOUT)
    assert run.returncode != 0, run.output
    record = out / "distpart-error-rank1.txt"
    found = re.search(r"^(\[rank 1/2 [^]]+\]) Traceback \(most recent call last\):$", run.stderr, re.M)
    assert found, run.stderr
    tag = found.group(1)
    line = (f"distpart pipeline: error: {tag} RuntimeError: injected bug at assign on rank 1 "
            f"(unexpected: traceback above and in {record}; stopping every rank)")
    assert line in run.stderr.splitlines(), run.stderr
    text = record.read_text()
    assert text.startswith(f"{tag} RuntimeError: injected bug at assign on rank 1\ncommand: ")
    assert 'in pause_point\n    raise RuntimeError("injected bug at "' in text and "Traceback" in text
    assert line in log.read_text().splitlines()          # rank 1 appended it to rank 0's log
    assert not (out / "metadata.json").exists()
    assert not (tmp_path / "logs" / "distpart-error-rank1.txt").exists()   # one record, in the output folder


def test_a_bug_without_an_output_folder_writes_beside_the_log_never_into_the_input(example_dir, tmp_path):
    """`validate` has only an input, which distpart never writes: the record goes beside
    --log-file; without one, there is no record and the line says so."""
    before = sorted(p.name for p in example_dir.iterdir())
    log = tmp_path / "run.log"
    env = _env_raising_at(tmp_path, "validate", 1)
    run = run_bounded(mpi_command(2, ["validate", example_dir, "--log-file", log]), env, TIMEOUT)
    assert run.returncode != 0, run.output
    record = tmp_path / "distpart-error-rank1.txt"
    assert f"RuntimeError: injected bug at validate on rank 1 (unexpected: traceback above and in {record}; " \
           "stopping every rank)" in run.stderr, run.stderr
    assert record.read_text().startswith("[rank 1/2 ")
    record.unlink()
    run = run_bounded(mpi_command(2, ["validate", example_dir]), env, TIMEOUT)
    assert run.returncode != 0, run.output
    assert "RuntimeError: injected bug at validate on rank 1 (unexpected: traceback above; stopping every rank)" \
        in run.stderr, run.stderr
    assert sorted(p.name for p in example_dir.iterdir()) == before
    assert not record.exists()


def test_a_bug_in_a_dgl_tool_step_names_the_tool_and_the_rank(tmp_path):
    """dgltools.backend._collective (GraphStorm's ParMETIS steps) takes the same path."""
    script = tmp_path / "step.py"
    script.write_text("from distpart.dgltools.backend import _collective\n\n\n"
                      "def body(comm):\n"
                      "    if comm.Get_rank() == 1:\n"
                      "        raise ValueError('boom in the body')\n"
                      "    comm.Barrier()\n\n\n"
                      "raise SystemExit(_collective('pm_dglpart', body))\n")
    run = run_bounded(mpi_command(2, [], script=script), mpi_env(), TIMEOUT)
    assert run.returncode != 0, run.output
    assert any(ln.startswith("pm_dglpart: error: [rank 1/2 ") and ln.endswith(
        "] ValueError: boom in the body (unexpected: traceback above; stopping every rank)")
        for ln in run.stderr.splitlines()), run.stderr
    assert "ValueError: boom in the body\n" in run.stderr


def test_the_wait_for_the_launcher_to_read_is_bounded():
    """The failing rank waits until its stdout/stderr pipe is read (the launcher's proxy has
    the traceback), never longer than asked: a reader that never reads costs `limit`."""
    from distpart.mpi.failure import unread_bytes, wait_until_read
    r, w = os.pipe()
    try:
        os.write(w, b"x" * 1000)
        assert unread_bytes(w) == 1000 and unread_bytes(r) == 1000
        t0 = time.monotonic()
        assert wait_until_read([w], limit=0.3) is False
        assert 0.3 <= time.monotonic() - t0 < 2
        reader = threading.Timer(0.2, lambda: os.read(r, 4096))
        reader.start()
        t0 = time.monotonic()
        assert wait_until_read([w], limit=10) is True
        assert time.monotonic() - t0 < 5
        reader.join()
        assert unread_bytes(w) == 0
    finally:
        os.close(r)
        os.close(w)
    with open(os.devnull, "w") as f:           # a file or terminal: nothing to wait for
        assert unread_bytes(f.fileno()) == 0

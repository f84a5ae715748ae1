"""A rank that dies mid-run: the whole job stops with a non-zero status and no complete-looking output."""
from __future__ import annotations

import os
import signal
import subprocess
import threading

import pytest

from conftest import mpi_command, mpi_env

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

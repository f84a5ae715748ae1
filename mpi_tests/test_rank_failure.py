"""A rank that dies mid-run: the whole job stops with a non-zero status and no complete-looking output."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from conftest import mpi_command, mpi_env

psutil = pytest.importorskip("psutil")


def test_killed_rank_stops_the_job(tmp_path):
    from distpart.synthetic import homogeneous_graph
    in_dir = homogeneous_graph(tmp_path / "in", 400_000, 4_000_000, num_chunks=4, fmt="csv").parent
    out = tmp_path / "out"
    cmd = mpi_command(2, ["pipeline", in_dir, out, "--num-parts", 2])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=mpi_env(), start_new_session=True)
    try:
        # Wait until both ranks run, then kill one while the job is in its stages.
        deadline = time.time() + 60
        ranks = []
        while time.time() < deadline and len(ranks) < 2:
            ranks = [p for p in psutil.Process(proc.pid).children(recursive=True)
                     if "distpart.cli" in " ".join(p.cmdline())]
            time.sleep(0.1)
        assert len(ranks) == 2, "ranks did not start"
        time.sleep(1.5)
        assert proc.poll() is None, "the job finished before a rank could be killed; use a bigger graph"
        ranks[1].send_signal(signal.SIGKILL)
        out_text, err_text = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the job hung after a rank died")
    assert proc.returncode != 0
    assert not (out / "metadata.json").exists()
    for p in psutil.Process().children(recursive=True):
        assert "distpart.cli" not in " ".join(p.cmdline()), "a rank outlived the job"

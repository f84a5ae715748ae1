"""What a run says and refuses: progress lines, log file, quiet, the folder lock, and the
launcher/library mismatch guard (each process of a mismatched launch refuses on its own)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from harness import distpart, go_on, mpi_env, paused_run

PROGRESS = re.compile(r"^distpart \[ *[0-9hms]+\] ", re.M)


def test_progress_lines_with_eta_banner_and_log_file(tmp_path):
    from distpart.synthetic import homogeneous_graph
    # Big enough for several progress lines 0.2 s apart (12 with ETAs on a 2-core CI machine).
    in_dir = homogeneous_graph(tmp_path / "in", 150_000, 1_500_000, num_chunks=2).parent
    log = tmp_path / "run.log"
    run = distpart(2, "pipeline", in_dir, tmp_path / "out", "--num-parts", 2, "--method", "random",
                   "--progress-every", "0.2", "--log-file", log)
    err = run.stderr
    assert re.search(r"^distpart \[ *0s\] pipeline: 2 ranks on 1 host \(\S+ x2\); Open MPI", err, re.M), err
    for stage in ("validate", "assign", "nodes", "edges", "write", "verify"):
        assert f"stage {stage} started" in err
    eta = [line for line in err.splitlines() if "ETA" in line]
    assert eta, err
    assert any(re.search(r"of [0-9.]+[kM]? \S+ \(\d+%\), [0-9.]+[kM]? \S+/s, elapsed \d+s, ETA \d+s", line)
               for line in eta), eta
    # The log file holds the same lines; stdout keeps only the results.
    assert PROGRESS.findall(log.read_text()) and "stage verify started" in log.read_text()
    assert not PROGRESS.search(run.stdout) and "verify: OK" in run.stdout
    assert not (tmp_path / "out" / ".distpart.lock").exists()


def test_quiet_silences_progress_but_not_results_or_errors(example_dir, tmp_path):
    run = distpart(2, "pipeline", example_dir, tmp_path / "out", "--num-parts", 2, "--quiet",
                   "--method", "random")
    assert not PROGRESS.search(run.stderr) and "verify: OK" in run.stdout
    bad = distpart(2, "assign", tmp_path / "nowhere", tmp_path / "a", "--num-parts", 2, "--quiet",
                   "--log-file", tmp_path / "log", ok=False)
    assert bad.returncode == 2 and "error:" in bad.stderr
    assert "error:" in (tmp_path / "log").read_text()


def test_unwritable_log_file_is_a_clear_error(example_dir, tmp_path):
    run = distpart(2, "validate", example_dir, "--log-file", tmp_path / "no" / "such" / "dir" / "log",
                   ok=False)
    assert run.returncode == 2 and "log: cannot write the log file: the folder" in run.stderr


def test_folder_in_use_by_a_live_run_is_refused_naming_it(example_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(["sleep", "120"])
    try:
        lock = {"host": socket.gethostname(), "pid": holder.pid, "started": "2026-11-22 10:00:00 UTC",
                "proc_start": None, "command": "distpart pipeline"}
        (out / ".distpart.lock").write_text(json.dumps(lock))
        run = distpart(2, "pipeline", example_dir, out, "--num-parts", 2, ok=False)
        assert run.returncode == 2
        assert f"is in use by another distpart run (host {socket.gethostname()}, PID {holder.pid}" in run.stderr
        assert not (out / "metadata.json").exists() and not (out / "assignment").exists()
        assert json.loads((out / ".distpart.lock").read_text())["pid"] == holder.pid
        assign = distpart(2, "assign", example_dir, out, "--num-parts", 2, ok=False)
        assert "is in use by another distpart run" in assign.stderr
    finally:
        holder.kill()
        holder.wait()
    # The holder is dead now: its lock is stale and the next run takes over, saying so.
    run = distpart(2, "pipeline", example_dir, out, "--num-parts", 2, "--method", "random")
    assert "removed the stale lock of a run that is no longer running" in run.stderr
    assert (out / "metadata.json").exists() and not (out / ".distpart.lock").exists()


def test_mismatched_launcher_makes_every_process_refuse(example_dir, tmp_path):
    """Open MPI's mpi4py under MPICH's Hydra: each process is a 1-rank world; all refuse."""
    hydra = shutil.which("mpiexec.mpich") or shutil.which("mpiexec.hydra")
    if hydra is None:
        pytest.skip("MPICH's mpiexec is not installed (scripts/setup-test.sh installs it)")
    env = mpi_env()
    env.pop("MPI4PY_LIBMPI", None)
    env.pop("MPI4PY_MPIABI", None)
    out = tmp_path / "out"
    cmd = [hydra, "-n", "2", sys.executable, "-m", "distpart", "pipeline", str(example_dir), str(out),
           "--num-parts", "2", "--method", "random"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("mismatched launch hung")
    assert proc.returncode == 2, stdout + stderr
    # One refusal: in a mismatched launch only the launcher's rank 0 prints.
    assert stderr.count("the launcher started 2 processes (PMI_SIZE=2") == 1, stderr
    assert "MPI sees only 1 rank" in stderr and "Open MPI" in stderr
    assert not out.exists(), "a refused run must not touch the output folder"
    assert "verify: OK" not in stdout


def test_two_processes_claiming_a_two_rank_world_without_a_launcher_refuse(example_dir, tmp_path):
    out = tmp_path / "out"
    procs = []
    for r in range(2):
        env = {**mpi_env(), "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": str(r)}
        procs.append(subprocess.Popen([sys.executable, "-m", "distpart", "pipeline", str(example_dir),
                                       str(out), "--num-parts", "2"], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env, start_new_session=True))
    errs = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("a process hung")
        assert proc.returncode == 2, err
        errs.append(err)
    assert "the launcher started 2 processes (OMPI_COMM_WORLD_SIZE=2" in errs[0]
    assert errs[1] == "", errs[1]
    assert not out.exists()


def test_a_second_run_into_the_same_folder_is_refused_while_the_first_runs(example_dir, tmp_path):
    out = tmp_path / "out"
    argv = ["pipeline", example_dir, out, "--num-parts", 2, "--method", "random"]
    with paused_run("assign", 2, argv) as first:   # holding its lock, on every rank
        assert (out / ".distpart.lock").exists()
        second = distpart(2, *argv, ok=False)
        out1 = go_on(first)
    assert second.returncode == 2
    assert re.search(r"is in use by another distpart run \(host \S+, PID \d+, started .*running "
                     r"`distpart pipeline`\)", second.stderr), second.stderr
    assert first.returncode == 0 and "verify: OK" in out1, out1
    assert (out / "metadata.json").exists() and not (out / ".distpart.lock").exists()


@pytest.mark.parametrize("value", ["0", "-5", "4096"])
def test_message_cap_out_of_range_is_refused(example_dir, tmp_path, value):
    run = distpart(1, "validate", example_dir, "--max-message-mb", value, ok=False)
    assert run.returncode == 2 and "--max-message-mb must be between 1 and 2047" in run.stderr


def test_report_of_a_broken_config_is_a_clear_error(example_dir, tmp_path):
    out = tmp_path / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 2, "--method", "random")
    config = json.loads((out / "metadata.json").read_text())
    config["num_parts"] = "two"
    (out / "metadata.json").write_text(json.dumps(config))
    run = distpart(2, "report", out, ok=False)
    assert run.returncode == 2 and "num_parts must be a positive integer, found 'two'" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("method", ["parmetis", "multilevel"])
def test_a_seed_above_int32_is_accepted(method, example_dir, tmp_path):
    run = distpart(2, "assign", example_dir, tmp_path / "a", "--num-parts", 2, "--seed", "3000000000",
                   "--method", method)
    assert (tmp_path / "a" / "paper.txt").exists(), run.output

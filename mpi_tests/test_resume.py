"""Kill a run with SIGKILL and resume it: the output equals an uninterrupted run's, byte for byte.

The kill points are reached with `DISTPART_PAUSE_AT` (rank 0 stops itself at a named point,
see distpart/faults.py); the test then SIGKILLs mpiexec and every rank, as a node failure or
`scancel -s KILL` would, so each kill lands at a known place however fast the machine is.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict

import pytest

from harness import distpart, start_paused

psutil = pytest.importorskip("psutil")

PARTS = 4


def tree(folder: Path) -> Dict[str, bytes]:
    """Every file under folder (hidden ones included) with its bytes; the lock is not output."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".distpart.lock"}


def _cmdline(process) -> list:
    try:
        return process.cmdline()
    except psutil.Error:  # exited meanwhile
        return []


def kill_at(point: str, nranks: int, argv, timeout: float = 120) -> str:
    """Run distpart until rank 0 pauses at `point`, then SIGKILL mpiexec and all its ranks."""
    proc, lines = start_paused(point, nranks, argv, timeout)
    try:
        victims = psutil.Process(proc.pid).children(recursive=True)
        # At least the ranks (a rank may have a short-lived child, e.g. from find_library).
        assert sum("distpart.cli" in " ".join(_cmdline(v)) for v in victims) >= nranks
        for victim in [psutil.Process(proc.pid), *victims]:
            try:
                victim.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        proc.wait(timeout=30)
        psutil.wait_procs(victims, timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return "".join(lines)


@pytest.fixture(scope="module")
def reference(example_dir, tmp_path_factory) -> Dict[str, bytes]:
    """One uninterrupted pipeline run on 2 ranks. The default method (multilevel) and the
    dispatch give the same bytes for any number of ranks, so the 4-rank resumes compare
    against it too (which checks that as well, for the whole pipeline)."""
    out = tmp_path_factory.mktemp("reference") / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", PARTS)
    return tree(out)


# Each kill point on 2 ranks; on 4 ranks the two where the ranks' shares differ most (on 4
# ranks every rank owns one partition, so a rank 0 paused after publishing leaves only the
# manifest missing).
@pytest.mark.parametrize("point,nranks", [("assign", 2), ("edges", 2), ("edges", 4),
                                          ("partition-published", 2), ("partition-published", 4)])
def test_killed_and_resumed_equals_uninterrupted(example_dir, tmp_path, reference, nranks, point):
    out = tmp_path / "out"
    argv = ["pipeline", example_dir, out, "--num-parts", PARTS]
    kill_at(point, nranks, argv)
    assert not (out / "metadata.json").exists(), "a killed run left a complete-looking output"
    done = sorted(p.parent.name for p in out.glob("part*/.distpart-complete.json"))
    if point == "partition-published":
        # Rank 0 stopped after its first partition; on 2 ranks its second is not complete (on
        # 4 ranks it has just one: every partition is complete, only the manifest is missing).
        assert "part0" in done and (len(done) < PARTS or nranks == PARTS), done
    else:
        assert done == []
    assert (out / "assignment" / ".distpart-complete.json").exists() == (point != "assign")

    run = distpart(nranks, *argv, "--resume")
    assert tree(out) == reference
    if point != "assign":
        assert "resume: the assignment in" in run.stderr and "stage assign started" not in run.stderr
    if point == "partition-published":
        assert f"resume: {len(done)} of {PARTS} partitions complete" in run.stderr


def test_resume_on_other_rank_count(example_dir, tmp_path):
    """The output does not depend on the ranks, so a run killed on 2 ranks resumes on 4."""
    ref = tmp_path / "ref"
    distpart(1, "pipeline", example_dir, ref, "--num-parts", PARTS, "--method", "random")
    out = tmp_path / "out"
    argv = ["pipeline", example_dir, out, "--num-parts", PARTS, "--method", "random"]
    kill_at("partition-published", 2, argv)
    distpart(4, *argv, "--resume")
    assert tree(out) == tree(ref)


@pytest.fixture(scope="module")
def completed_once(example_dir, tmp_path_factory):
    """One completed run for the module; each test gets its own copy (`completed`)."""
    base = tmp_path_factory.mktemp("completed")
    shutil.copytree(example_dir, base / "in")
    distpart(2, "pipeline", base / "in", base / "out", "--num-parts", PARTS, "--method", "random")
    return base


@pytest.fixture
def completed(completed_once, tmp_path):
    # copytree keeps modification times, and the resume record names input files relative
    # to the input folder: the copy is the same completed run, in another place.
    in_dir, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(completed_once / "in", in_dir)
    shutil.copytree(completed_once / "out", out)
    return in_dir, out


def test_resume_of_complete_output_redoes_nothing(completed):
    in_dir, out = completed
    before = tree(out)
    run = distpart(2, "pipeline", in_dir, out, "--num-parts", PARTS, "--method", "random", "--resume")
    assert f"resume: {PARTS} of {PARTS} partitions complete" in run.stderr
    for stage in ("assign", "nodes", "edges", "edge_feats"):
        assert f"stage {stage} started" not in run.stderr
    assert tree(out) == before


def test_damaged_partition_is_rebuilt(completed):
    in_dir, out = completed
    before = tree(out)
    victim = out / "part1" / "node_feat.dgl"
    victim.write_bytes(victim.read_bytes()[:-8] + b"\0" * 8)  # same size, other bytes
    run = distpart(2, "pipeline", in_dir, out, "--num-parts", PARTS, "--method", "random", "--resume")
    assert "resume: rebuilding part1" in run.stderr
    assert f"resume: {PARTS - 1} of {PARTS} partitions complete" in run.stderr
    assert tree(out) == before


@pytest.mark.parametrize("change", ["seed", "num-parts", "input", "assignment"])
def test_resume_refuses_changed_inputs_or_options(completed, change):
    in_dir, out = completed
    (out / "metadata.json").unlink()  # as if killed while publishing
    args = ["pipeline", in_dir, out, "--num-parts", PARTS, "--method", "random", "--resume"]
    if change == "seed":
        args += ["--seed", "7"]
        expect = "option seed: 0 then, 7 now"
    elif change == "num-parts":
        args[4] = 2 * PARTS
        expect = f"option num_parts: {PARTS} then, {2 * PARTS} now"
    elif change == "input":
        chunk = next(p for p in in_dir.rglob("*") if p.is_file() and p.name != "metadata.json")
        os.utime(chunk, ns=(time.time_ns(), time.time_ns() + 10**9))
        expect = "the input graph changed"
    else:
        first = out / "assignment" / "author.txt"
        lines = first.read_text().splitlines()
        lines[0] = str((int(lines[0]) + 1) % PARTS)
        first.write_text("\n".join(lines) + "\n")
        expect = "the assignment files differ"
    before = tree(out)
    run = distpart(2, *args, ok=False)
    assert run.returncode == 2 and expect in run.stderr, run.output
    assert "Traceback" not in run.output
    assert tree(out) == before  # nothing rewritten, nothing removed


def test_resume_and_overwrite_exclude_each_other(example_dir, tmp_path):
    run = distpart(1, "pipeline", example_dir, tmp_path / "o", "--num-parts", 2, "--resume", "--overwrite",
                   ok=False)
    assert run.returncode == 2 and "not allowed with argument" in run.stderr


def test_dispatch_resume_keeps_complete_partitions(example_dir, tmp_path):
    """`dispatch --resume` alone (the assignment made separately)."""
    assign = tmp_path / "assign"
    distpart(2, "assign", example_dir, assign, "--num-parts", PARTS, "--method", "random")
    ref, out = tmp_path / "ref", tmp_path / "out"
    distpart(2, "dispatch", example_dir, assign, ref)
    kill_at("partition-published", 2, ["dispatch", example_dir, assign, out])
    run = distpart(2, "dispatch", example_dir, assign, out, "--resume")
    assert "partitions complete from a previous run" in run.stderr
    assert tree(out) == tree(ref)
    manifest = json.loads((out / "distpart-manifest.json").read_text())
    assert manifest["options"] == {"num_parts": PARTS, "assignment": "random"}


def stop_at(point: str, nranks: int, argv, signum: int, timeout: float = 120) -> "subprocess.CompletedProcess":
    """Run distpart until rank 0 pauses at `point`, then send `signum` to every rank (as
    Ctrl-C in a terminal or a scheduler's cancel does) and let rank 0 go on to take it."""
    # As Open MPI's default (1 s), not the suite's 0: a rank that stops first must not have
    # mpiexec SIGKILL rank 0 before it has unwound (released the lock, said why).
    proc, lines = start_paused(point, nranks, argv, timeout, {"OMPI_MCA_odls_base_sigkill_timeout": "2"})
    try:
        ranks = [v for v in psutil.Process(proc.pid).children(recursive=True)
                 if "distpart.cli" in " ".join(_cmdline(v))]
        assert len(ranks) >= nranks, "".join(lines)
        for rank in ranks:
            rank.send_signal(signum)
        for rank in ranks:
            try:
                rank.send_signal(signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass   # a rank that was not paused took the stop and ended already
        rest, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines) + rest)


@pytest.mark.parametrize("point,nranks,signum", [("assign", 1, signal.SIGINT), ("verify", 2, signal.SIGTERM)])
def test_a_stopped_run_says_so_releases_its_lock_and_resumes(example_dir, tmp_path, reference, point, nranks,
                                                             signum):
    """Ctrl-C on one rank and a scheduler's SIGTERM on two: one line, 128 + the signal, no
    traceback or MPI_ABORT, no lock, nothing that looks complete; --resume finishes the run."""
    out = tmp_path / "out"
    argv = ["pipeline", example_dir, out, "--num-parts", PARTS]
    run = stop_at(point, nranks, argv, signum)
    what = "interrupted (SIGINT)" if signum == signal.SIGINT else "terminated (SIGTERM)"
    assert run.returncode == 128 + signum, run.stdout
    assert f"distpart pipeline: {what}; nothing unfinished was published: rerun the same command with --resume" \
        in run.stdout
    assert "Traceback" not in run.stdout and "MPI_ABORT" not in run.stdout
    assert not (out / ".distpart.lock").exists() and not (out / "assignment" / ".distpart.lock").exists()
    assert not (out / "metadata.json").exists()
    distpart(nranks, *argv, "--resume")
    assert tree(out) == reference

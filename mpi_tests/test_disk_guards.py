"""A full or too small output file system: refused up front with both numbers, or, when
the check is skipped, a clear message on every rank and no metadata.json (2 ranks).

Uses a small tmpfs the test mounts itself (root only) and always unmounts."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from harness import distpart

# Parallel runs (scripts/test.sh, pytest-xdist): the tests that mount or fill file systems, start
# daemons or measure time run on one worker, one at a time.
pytestmark = pytest.mark.xdist_group("serial")


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a test tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], timeout=30)


def test_too_small_file_system_is_refused_before_any_work(example_dir, small_fs):
    run = distpart(2, "pipeline", example_dir, small_fs / "out", "--num-parts", 2, "--method", "random", ok=False)
    assert run.returncode == 2
    assert "the output needs about" in run.stderr and "KiB free" in run.stderr
    assert not (small_fs / "out" / "part0").exists()


def test_disk_full_while_writing_is_a_clear_error_on_every_rank(example_dir, small_fs):
    out = small_fs / "out"
    # A disk that fills up part-way is a failure, not a refusal: the partial files stay.
    run = distpart(2, "pipeline", example_dir, out, "--num-parts", 2, "--method", "random",
                   "--no-space-check", ok=False, refusal_changes_nothing=False)
    assert run.returncode == 2, run.output
    assert "no space left on the output's file system while writing" in run.stderr
    assert run.stderr.count("error:") == 1 and "Traceback" not in run.output
    assert not (out / "metadata.json").exists() and not (out / "distpart-manifest.json").exists()
    assert all(f.name.endswith(".partial") for f in out.glob("part*/*"))


def test_memory_limit_refuses_before_any_work(example_dir, tmp_path):
    run = distpart(2, "pipeline", example_dir, tmp_path / "out", "--num-parts", 2, "--max-memory-gb", "0.05",
                   ok=False)
    assert run.returncode == 2 and "per rank but --max-memory-gb is 0.05" in run.stderr
    # The stage with the largest estimate is named, and every stage's estimate listed.
    assert re.search(r"error: (assign|dispatch|verify) needs about [\d.]+ MiB per rank", run.stderr), run.stderr
    assert re.search(r"\(estimates per rank: assign [\d.]+ MiB, dispatch [\d.]+ MiB, verify [\d.]+ MiB\)",
                     run.stderr), run.stderr

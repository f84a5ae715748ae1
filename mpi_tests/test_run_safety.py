"""Refusals change nothing, and a failed run never looks complete (issue 18 items 3, 4, 5, 8);
on 2 ranks, the paused-run test on 2 as well.

Every refused command runs inside `safety.unchanged`, which compares every file and folder
under the input and the output (names, sizes, checksums) before and after.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness import distpart, mpi_env, paused_run
from safety import unchanged


@pytest.fixture(scope="module")
def finished(example_dir, tmp_path_factory):
    """A complete 4-partition pipeline output (random Step 1: fast), copied per test."""
    out = tmp_path_factory.mktemp("finished") / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random")
    return out


def copy_of(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    subprocess.run(["cp", "-a", str(finished), str(out)], check=True)
    return out


def test_an_assign_into_a_running_pipelines_assignment_folder_is_refused(example_dir, tmp_path):
    """Item 3: the pipeline now locks OUT/assignment too; an `assign ... --overwrite` there
    used to rewrite Step 1's result under the running pipeline."""
    out = tmp_path / "out"
    with paused_run("assign", 2, ["pipeline", example_dir, out, "--num-parts", 2, "--method", "random"]):
        with unchanged(out, example_dir):
            run = distpart(2, "assign", example_dir, out / "assignment", "--num-parts", 2, "--overwrite",
                           ok=False)
        assert run.returncode == 2 and "is in use by another distpart run" in run.stderr, run.output
        assert "assignment" in run.stderr


@pytest.mark.parametrize("change", ["option", "assignment"])
def test_a_refused_resume_leaves_every_byte(example_dir, finished, tmp_path, change):
    """Item 4: a refused --resume deleted metadata.json and the manifest of a complete output."""
    out = copy_of(finished, tmp_path)
    if change == "option":
        argv = ["dispatch", example_dir, out / "assignment", out, "--resume", "--graph-formats", "csc"]
    else:
        other = tmp_path / "other"
        distpart(2, "assign", example_dir, other, "--num-parts", 4, "--method", "random", "--seed", 9)
        argv = ["dispatch", example_dir, other, out, "--resume"]
    with unchanged(out, example_dir):
        run = distpart(2, *argv, ok=False)
    assert run.returncode == 2 and "--resume cannot continue it" in run.stderr, run.output
    assert ("option graph_formats" if change == "option" else "the assignment changed") in run.stderr


def test_a_resume_with_fewer_partitions_is_refused_naming_both_counts(example_dir, finished, tmp_path):
    """Item 5: part2/ and part3/ of a 4-partition run stayed beside a 2-partition resume, and
    `verify --quick` said OK. Partitions 0 and 1 lack records here, as after a kill."""
    out = copy_of(finished, tmp_path)
    for p in (0, 1):
        (out / f"part{p}" / ".distpart-complete.json").unlink()
    two = tmp_path / "two"
    distpart(2, "assign", example_dir, two, "--num-parts", 2, "--method", "random")
    with unchanged(out, example_dir, two):
        run = distpart(2, "dispatch", example_dir, two, out, "--resume", ok=False)
    assert run.returncode == 2, run.output
    assert "part3: is a partition of a previous run with at least 4 partitions, and this run writes 2" \
        in run.stderr, run.output


def test_every_ranks_resume_notes_reach_the_log(example_dir, finished, tmp_path):
    """Item 8 (notes): part3 belongs to rank 1; its 'rebuilding' note was lost."""
    out = copy_of(finished, tmp_path)
    (out / "part3" / "orig_eids.dgl").write_bytes(b"damaged")
    run = distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random", "--resume")
    assert "resume: rebuilding part3" in run.stderr, run.output
    assert "resume: 3 of 4 partitions complete from a previous run, kept" in run.stderr
    distpart(2, "verify", example_dir, out / "assignment", out)


def test_a_graph_with_no_edge_types_is_refused_before_anything_is_written(tmp_path):
    """Item 8: it exited 2 but left metadata.json and a manifest `verify --quick` accepted."""
    from distpart.synthetic import NodeTypeSpec, write_chunked_graph
    graph = write_chunked_graph(tmp_path / "in", [NodeTypeSpec("a", 100)], [], num_chunks=2).parent
    with unchanged(tmp_path):
        run = distpart(2, "pipeline", graph, tmp_path / "out", "--num-parts", 2, "--method", "random",
                       ok=False)
    assert run.returncode == 2 and "the graph has no edge types" in run.stderr, run.output


def test_partition_graph_of_a_graph_with_no_edge_types_writes_nothing(tmp_path):
    """Item 8, through DGL's in-memory API (one process, a world of one rank)."""
    import sys
    script = ("import distpart\n"
              "try:\n"
              "    distpart.partition_graph({'num_nodes': {'a': 10}, 'edges': {}}, 'g', 2, 'out',\n"
              "                             part_method='random')\n"
              "except distpart.errors.InputError as e:\n"
              "    print('refused:', e)\n")
    with unchanged(tmp_path):
        run = subprocess.run([sys.executable, "-c", "import distpart.errors\n" + script], cwd=tmp_path,
                             env=mpi_env(), capture_output=True, text=True, timeout=120)
    assert "refused:" in run.stdout and "the graph has no edge types" in run.stdout, run.stdout + run.stderr

"""Bad data that only one rank reads, met part-way through `dispatch`: every rank exits 2.

The checks before dispatch read only the chunk files' headers (row counts, schemas), so a
damaged Parquet page or HDF5 chunk shows when its rows are decoded, by the one rank whose
block holds them, while the others go on to the next exchange. Before, that rank raised and
the others waited in the exchange forever (seen in the edge_feats stage under GraphStorm).

Each case damages a file of a copy of the example that only the last rank reads, runs
`dispatch` with a status file per rank, and checks: every rank wrote status 2 (mpiexec is told
not to stop the others when one exits, so each must stop by itself; a rank left in a
collective makes the run time out), one error line naming the file, no traceback, no
metadata.json, and every folder on the command line exactly as before.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Callable, Dict, Tuple

import h5py
import pyarrow.parquet as pq
import pytest

from harness import Run, distpart, mpi_command, mpi_env, run_bounded, touched_roots
from safety import differences, snapshot

# A hang shows as this timeout: a good run of the example takes about 2 s.
TIMEOUT = 90

# Each rank runs under sh, which records the rank's own exit status before passing it on.
STATUS_WRAPPER = '"$@"; st=$?; echo $st > "$STATUS_DIR/$OMPI_COMM_WORLD_RANK"; exit $st'


def _damage_parquet_page(path: Path) -> None:
    """Overwrite the first page header of the file's last row group: the footer and schema
    stay readable, decoding those rows fails."""
    md = pq.ParquetFile(path).metadata
    column = md.row_group(md.num_row_groups - 1).column(0)
    with open(path, "r+b") as f:
        f.seek(column.dictionary_page_offset or column.data_page_offset)
        f.write(b"\xff" * 16)


def _damage_hdf5_chunk(path: Path, name: str) -> None:
    """Store the dataset in gzip chunks and damage the last one (the writer stores it whole,
    where damage would only change values)."""
    with h5py.File(path, "r") as f:
        data = f[name][...]
    with h5py.File(path, "w") as f:
        ds = f.create_dataset(name, data=data, chunks=(max(1, len(data) // 4), *data.shape[1:]),
                              compression="gzip")
        last = ds.id.get_chunk_info(ds.id.get_num_chunks() - 1)
    with open(path, "r+b") as f:
        f.seek(last.byte_offset)
        f.write(b"\xff" * 16)


# case -> (damage the copy, expected message, stage the error is met in). Only the last rank
# reads each file, on 2 and 4 ranks: the example's paper:cites:paper weight has 5 files of
# 600 rows (the last rank's edges are 1500-2999 or 2250-2999 of 3000), paper's label and
# train_mask 4 files of 500 (its nodes 1000-1999 or 1500-1999), author:affiliated_with:
# institution 4 edge files of 250.
CASES: Dict[str, Tuple[Callable[[Path], None], str, str]] = {
    "edge feature, Parquet page": (
        lambda d: _damage_parquet_page(d / "edge_data" / "paper___cites___paper-weight-4.parquet"),
        "paper___cites___paper-weight-4.parquet: corrupt Parquet data: ", "edge_feats"),
    "node feature, Parquet page": (
        lambda d: _damage_parquet_page(d / "node_data" / "paper-label-3.parquet"),
        "paper-label-3.parquet: corrupt Parquet data: ", "nodes"),
    "node feature, HDF5 chunk": (
        lambda d: _damage_hdf5_chunk(d / "node_data" / "paper-train_mask-3.h5", "train_mask"),
        "paper-train_mask-3.h5: corrupt HDF5 data in rows ", "nodes"),
    "edges, Parquet page": (
        lambda d: _damage_parquet_page(d / "edges" / "author___affiliated_with___institution-3.parquet"),
        "author___affiliated_with___institution-3.parquet: corrupt Parquet data: ", "edges"),
}


@pytest.fixture(scope="module")
def assignment(example_dir, tmp_path_factory) -> Path:
    """A 4-partition assignment of the (undamaged) example, for 2 and 4 ranks."""
    out = tmp_path_factory.mktemp("assign") / "assign"
    distpart(2, "assign", example_dir, out, "--num-parts", 4, "--method", "random", "--quiet")
    return out


def dispatch_with_statuses(nranks: int, argv: list, status_dir: Path) -> Tuple[Run, Dict[int, int]]:
    """`distpart dispatch argv` on nranks ranks; (the run, {rank: its exit status})."""
    status_dir.mkdir(exist_ok=True)
    env = mpi_env()
    env["STATUS_DIR"] = str(status_dir)
    # Open MPI's mpiexec otherwise kills the other ranks as soon as one exits non-zero,
    # which would hide a rank that never gets there.
    env["OMPI_MCA_orte_abort_on_non_zero_status"] = "0"
    mpiexec = mpi_command(nranks, [])[0]
    run = run_bounded([mpiexec, "-n", nranks, "sh", "-c", STATUS_WRAPPER, "sh", sys.executable, "-m", "distpart.cli",
                       "dispatch", *argv], env, TIMEOUT)
    return run, {int(p.name): int(p.read_text()) for p in status_dir.iterdir()}


# Every case on 2 ranks; the stage the hang was seen in, and node features, on 4 too.
RUNS = [(case, 2) for case in CASES] + [("edge feature, Parquet page", 4), ("node feature, Parquet page", 4)]


@pytest.mark.parametrize("case,nranks", RUNS)
def test_data_one_rank_reads_stops_every_rank(case, nranks, example_dir, assignment, tmp_path, tmp_path_factory):
    damage, expected, stage = CASES[case]
    bad, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(example_dir, bad)
    damage(bad)
    argv = [bad, assignment, out]
    roots = touched_roots(argv)
    before = snapshot(*roots)
    run, statuses = dispatch_with_statuses(nranks, argv, tmp_path_factory.mktemp("status"))
    assert statuses == {r: 2 for r in range(nranks)}, f"exit status per rank: {statuses}\n{run.output}"
    assert f"stage {stage} started" in run.stderr, run.output   # met part-way, not by the checks
    assert expected in run.stderr, f"expected {expected!r} in:\n{run.stderr}"
    errors = [line for line in run.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].startswith("distpart dispatch: error: "), run.stderr
    assert "Traceback" not in run.output, run.output
    assert not (out / "metadata.json").exists()
    diff = differences(before, snapshot(*roots))
    assert not diff, f"the refused dispatch changed the file system:\n{diff}\n{run.output}"

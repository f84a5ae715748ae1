"""The bad-input matrix: each malformed input gives one clear message naming the file,
status 2 on every rank, quickly, and no metadata.json; the inputs distpart accepts on
purpose (CRLF line ends, NaN features, chunk files outside IN_DIR) give correct output.

Run as a script (`python mpi_tests/test_bad_input_matrix.py`) to print the matrix as a
table: case, exit status, seconds to exit, message.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from harness import Run, distpart  # noqa: E402

# A case edits a copy of the example and returns (argv after IN and OUT, expected message);
# expected None means the input must be accepted and verified.
Case = Callable[[Path, Path], Tuple[list, Optional[str]]]
CSV_EDGES = "edges/author___writes___paper-1.csv"       # delimiter ' ', 1000 rows
NPY_EDGES = "edges/paper___cites___paper-1.npy"         # 750 rows
PARQUET_EDGES = "edges/author___affiliated_with___institution-1.parquet"
PIPELINE = ["--num-parts", "2", "--method", "random"]


def _meta(d: Path) -> dict:
    return json.loads((d / "metadata.json").read_text())


def _save_meta(d: Path, meta: dict) -> None:
    (d / "metadata.json").write_text(json.dumps(meta))


def empty_edge_file(d, _):
    (d / CSV_EDGES).write_text("")
    return PIPELINE, f"{CSV_EDGES.split('/')[1]}: has 0 edges but num_edges_per_chunk"


def csv_header_line(d, _):
    path = d / CSV_EDGES
    path.write_text("src dst\n" + path.read_text())
    return PIPELINE, "bad CSV row (line 1: 'src dst')"


def crlf_line_endings(d, _):
    path = d / CSV_EDGES
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    return PIPELINE, None


def negative_id(d, _):
    arr = np.load(d / NPY_EDGES)
    arr[3, 0] = -1
    np.save(d / NPY_EDGES, arr)
    return PIPELINE, "edge endpoint -1 at row 3 is outside [0, 2000) of the source node type 'paper'"


def id_equal_to_count(d, _):
    arr = np.load(d / NPY_EDGES)
    arr[7, 1] = 2000
    np.save(d / NPY_EDGES, arr)
    return PIPELINE, "edge endpoint 2000 at row 7 is outside [0, 2000) of the destination node type 'paper'"


def nan_in_float_feature(d, _):
    path = d / "node_data" / "paper-feat-2.npy"
    arr = np.load(path)
    arr[4, 2] = np.nan
    arr[5, :] = np.inf
    np.save(path, arr)
    return PIPELINE, None


def truncated_npy(d, _):
    path = d / NPY_EDGES
    path.write_bytes(path.read_bytes()[:-100])
    return PIPELINE, "paper___cites___paper-1.npy: not a readable .npy file"


def object_dtype_npy(d, _):
    path = d / "node_data" / "author-age-1.npy"
    np.save(path, np.array([{"x": 1}] * 250, dtype=object), allow_pickle=True)
    return PIPELINE, "author-age-1.npy: not a readable .npy file"


def corrupt_parquet_footer(d, _):
    path = d / PARQUET_EDGES
    data = bytearray(path.read_bytes())
    data[-12:-4] = b"\xff" * 8       # the footer length and its neighbourhood
    path.write_bytes(bytes(data))
    return PIPELINE, "author___affiliated_with___institution-1.parquet: not a readable Parquet file"


def parquet_one_column(d, _):
    path = d / PARQUET_EDGES
    pq.write_table(pq.read_table(path).select([0]), path)
    return PIPELINE, "edge table must have 2 columns (src, dst), found 1"


def parquet_three_columns(d, _):
    path = d / PARQUET_EDGES
    t = pq.read_table(path)
    pq.write_table(t.append_column("w", pa.array(np.zeros(t.num_rows))), path)
    return PIPELINE, "edge table must have 2 columns (src, dst), found 3"


def hdf5_without_dataset(d, _):
    path = d / "node_data" / "author-emb-1.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("other", data=np.zeros((250, 4), np.float32))
    return PIPELINE, "author-emb-1.h5: HDF5 file has no dataset 'emb'"


def duplicate_type_names(d, _):
    meta = _meta(d)
    meta["node_type"][2] = "author"
    _save_meta(d, meta)
    return PIPELINE, "node_type: node type names must be unique"


def chunk_outside_in_dir(d, tmp):
    outside = tmp / "elsewhere"
    outside.mkdir()
    shutil.move(str(d / NPY_EDGES), outside / "cites-1.npy")
    meta = _meta(d)
    meta["edges"]["paper:cites:paper"]["data"][1] = str(outside / "cites-1.npy")
    _save_meta(d, meta)
    return PIPELINE, None


_ASSIGNMENT: List[Path] = []   # the one random assignment this test process made


def _good_assignment(example: Path, tmp: Path) -> Path:
    """A random 2-part assignment of the example, made once per test process (every test's
    input is a copy of the same example); each assignment case edits its own copy of it,
    instead of running `assign` once per case."""
    if not _ASSIGNMENT:
        made = tmp / "good-assignment"
        distpart(2, "assign", example, made, "--num-parts", 2, "--method", "random")
        _ASSIGNMENT.append(made)
    return _ASSIGNMENT[0]


def _assignment_case(edit: Callable[[list], list], expected: str) -> Case:
    def case(d, tmp):
        assign = tmp / "assign"
        shutil.copytree(_good_assignment(d, tmp), assign)
        lines = (assign / "author.txt").read_text().splitlines()
        (assign / "author.txt").write_text("\n".join(edit(lines)) + "\n")
        return ["dispatch", assign], expected
    return case


def p_larger_than_nodes(d, _):
    return ["--num-parts", "4096", "--method", "random"], "the number of partitions (4096) is larger than the number of nodes (3003)"


def out_dir_is_a_file(d, tmp):
    (tmp / "out").write_text("")
    return PIPELINE, "out: exists and is not a folder"


CASES: Dict[str, Case] = {
    "empty edge file for a non-empty chunk": empty_edge_file,
    "CSV with a header line": csv_header_line,
    "CRLF line endings (accepted)": crlf_line_endings,
    "negative ID": negative_id,
    "ID equal to the type's count": id_equal_to_count,
    "NaN/inf in a float feature (preserved)": nan_in_float_feature,
    "truncated .npy": truncated_npy,
    "object-dtype .npy": object_dtype_npy,
    "corrupt Parquet footer": corrupt_parquet_footer,
    "Parquet edges with 1 column": parquet_one_column,
    "Parquet edges with 3 columns": parquet_three_columns,
    "HDF5 without the named dataset": hdf5_without_dataset,
    "duplicate type names": duplicate_type_names,
    "chunk path outside IN_DIR (accepted)": chunk_outside_in_dir,
    "assignment ID >= P": _assignment_case(lambda ls: ls[:5] + ["2"] + ls[6:],
                                           "author.txt: partition ID 2 on line 6 is outside [0, 2)"),
    "assignment negative line": _assignment_case(lambda ls: ls[:5] + ["-1"] + ls[6:],
                                                 "author.txt: partition ID -1 on line 6 is outside [0, 2)"),
    "assignment non-numeric line": _assignment_case(lambda ls: ls[:5] + ["two"] + ls[6:],
                                                    "author.txt: bad CSV row (line 6: 'two')"),
    "assignment one line short": _assignment_case(lambda ls: ls[:-1],
                                                  "author.txt: has 999 lines but node type 'author' has 1000 nodes"),
    "assignment one line extra": _assignment_case(lambda ls: ls + ["0"],
                                                  "author.txt: has 1001 lines but node type 'author' has 1000 nodes"),
    "P larger than the number of nodes": p_larger_than_nodes,
    "OUT_DIR an existing file": out_dir_is_a_file,
}


def run_case(name: str, example_dir: Path, tmp: Path) -> Tuple[Run, Optional[str], float, Path]:
    bad = tmp / "in"
    shutil.copytree(example_dir, bad)
    extra, expected = CASES[name](bad, tmp)
    out = tmp / "out"
    t0 = time.perf_counter()
    if extra and extra[0] == "dispatch":
        run = distpart(2, "dispatch", bad, extra[1], out, ok=None, timeout=120)
    else:
        run = distpart(2, "pipeline", bad, out, *extra, ok=None, timeout=120)
    return run, expected, time.perf_counter() - t0, out


@pytest.mark.parametrize("name", list(CASES))
def test_matrix(name, example_dir, tmp_path):
    run, expected, seconds, out = run_case(name, example_dir, tmp_path)
    if expected is None:
        assert run.returncode == 0, run.output
        assert "verify: OK" in run.stdout or "dispatch" in name, run.output
        return
    assert run.returncode == 2, run.output
    assert expected in run.stderr, f"expected {expected!r} in:\n{run.stderr}"
    assert run.stderr.count("error:") == 1 and "Traceback" not in run.output, run.output
    assert not (out / "metadata.json").exists() if out.is_dir() else True


def test_nan_and_inf_survive_bit_for_bit(example_dir, tmp_path):
    run, _, _, out = run_case("NaN/inf in a float feature (preserved)", example_dir, tmp_path)
    assert run.returncode == 0, run.output
    from distpart.partitions.loader import load_orig_ids, load_partition
    found = 0
    for p in range(2):
        feats = load_partition(out / "metadata.json", p)[1]["paper/feat"]
        orig = load_orig_ids(out / "metadata.json", p)[0]["paper"]
        for row in (1338, 1339):   # paper-feat-2.npy starts at paper 1334 (chunks of 667, 667, 666)
            hit = np.flatnonzero(orig == row)
            if len(hit):
                found += 1
                values = feats[hit[0]]
                assert (np.isnan(values[2]) if row == 1338 else np.isinf(values).all())
    assert found == 2


def test_chunk_outside_in_dir_is_reported(example_dir, tmp_path):
    run, _, _, _ = run_case("chunk path outside IN_DIR (accepted)", example_dir, tmp_path)
    assert run.returncode == 0, run.output
    assert "note: 1 chunk file lies outside" in run.stderr and "cites-1.npy" in run.stderr


if __name__ == "__main__":
    import tempfile
    from distpart.synthetic import example_graph
    with tempfile.TemporaryDirectory() as t:
        example = example_graph(Path(t) / "example").parent
        print("| input | exit status | seconds | message |\n|---|---|---|---|")
        for name in CASES:
            case_dir = Path(tempfile.mkdtemp(dir=t))
            run, expected, seconds, _ = run_case(name, example, case_dir)
            line = next((ln for ln in run.stderr.splitlines() if "error:" in ln), "(accepted; verify: OK)"
                        if "verify: OK" in run.stdout or run.returncode == 0 else run.stderr[-200:])
            message = line.split("error: ", 1)[-1].replace(str(case_dir), "...")
            print(f"| {name} | {run.returncode} | {seconds:.1f} | {message} |")

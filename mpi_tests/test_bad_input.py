"""Every kind of bad input: one clear message naming the file, non-zero exit, no hang, no output.

Each case corrupts a fresh copy of the example and runs `pipeline` on 2 ranks (and the
cheap structural cases also `validate` on 4). The job must fail with a message naming the
file and the problem, and leave no OUT_DIR/metadata.json behind.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from harness import distpart


def _edit_json(path: Path, fn: Callable[[dict], None]) -> None:
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


def _malformed_json(d: Path) -> str:
    (d / "metadata.json").write_text('{"graph_name": "x", "node_type": [')
    return "metadata.json: malformed JSON"


def _missing_key(d: Path) -> str:
    _edit_json(d / "metadata.json", lambda m: m.pop("num_nodes_per_chunk"))
    return "num_nodes_per_chunk: missing key"


def _missing_file(d: Path) -> str:
    victim = d / "edges" / "paper___cites___paper-2.npy"
    victim.unlink()
    return "paper___cites___paper-2.npy: file does not exist"


def _wrong_numpy_chunk_count(d: Path) -> str:
    def bump(m):
        i = m["edge_type"].index("paper:cites:paper")
        m["num_edges_per_chunk"][i][0] += 1
        m["num_edges_per_chunk"][i][1] -= 1
    _edit_json(d / "metadata.json", bump)
    return "paper___cites___paper-0.npy: has 750 edges but num_edges_per_chunk"


def _wrong_csv_chunk_count(d: Path) -> str:
    def bump(m):
        i = m["edge_type"].index("author:writes:paper")
        m["num_edges_per_chunk"][i][1] += 3
        m["num_edges_per_chunk"][i][2] -= 3
    _edit_json(d / "metadata.json", bump)
    return "author___writes___paper-1.csv: has 1000 edges but num_edges_per_chunk"


def _endpoint_out_of_range(d: Path) -> str:
    path = d / "edges" / "paper___cites___paper-1.npy"
    arr = np.load(path)
    arr[5, 1] = 2000  # paper has 2000 nodes: IDs 0..1999
    np.save(path, arr)
    return "paper___cites___paper-1.npy: edge endpoint 2000 at row 5 is outside [0, 2000)"


def _feature_row_count(d: Path) -> str:
    path = d / "node_data" / "paper-feat-1.npy"
    np.save(path, np.load(path)[:-2])
    return "node_data.paper.feat: feature has 1998 rows in its files but node type 'paper' has 2000"


def _csv_non_integer(d: Path) -> str:
    path = d / "edges" / "paper___written_by___author-2.csv"
    lines = path.read_text().splitlines()
    lines[3] = "12,abc"
    path.write_text("\n".join(lines) + "\n")
    return "paper___written_by___author-2.csv: bad CSV row (line 4: '12,abc')"


def _unknown_format(d: Path) -> str:
    _edit_json(d / "metadata.json",
               lambda m: m["edges"]["paper:cites:paper"]["format"].update(name="feather"))
    return "edges.paper:cites:paper.format.name: unknown format 'feather'"


def _unknown_node_type(d: Path) -> str:
    def rename(m):
        i = m["edge_type"].index("paper:cites:paper")
        m["edge_type"][i] = "paper:cites:venue"
        m["edges"]["paper:cites:venue"] = m["edges"].pop("paper:cites:paper")
        m["edge_data"]["paper:cites:venue"] = m["edge_data"].pop("paper:cites:paper")
    _edit_json(d / "metadata.json", rename)
    return "'paper:cites:venue' names unknown node type 'venue'"


def _corrupt_parquet(d: Path) -> str:
    path = d / "edges" / "author___affiliated_with___institution-1.parquet"
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[: len(data) // 2]))
    return "author___affiliated_with___institution-1.parquet: not a readable Parquet file"


def _rename_node_type(d: Path, new: str) -> None:
    """Rename node type 'institution' everywhere in metadata.json (data files stay)."""
    def rename(m):
        m["node_type"][m["node_type"].index("institution")] = new
        for key in ("edge_type",):
            m[key] = [e.replace("institution", new) for e in m[key]]
        m["edges"] = {k.replace("institution", new): v for k, v in m["edges"].items()}
        for group in ("node_data", "edge_data"):
            m[group] = {k.replace("institution", new): v for k, v in m.get(group, {}).items()}
    _edit_json(d / "metadata.json", rename)


def _node_type_with_slash(d: Path) -> str:
    _rename_node_type(d, "inst/x")
    return "node_type: node type name 'inst/x' must not contain '/'"


def _node_type_absolute_path(d: Path) -> str:
    _rename_node_type(d, str(d / "victim"))
    return "must not contain '/'"


def _node_type_dotdot(d: Path) -> str:
    _rename_node_type(d, "..")
    return "node_type: node type name '..' is not allowed"


CASES = {
    "node_type_with_slash": _node_type_with_slash,
    "node_type_absolute_path": _node_type_absolute_path,
    "node_type_dotdot": _node_type_dotdot,
    "malformed_json": _malformed_json,
    "missing_key": _missing_key,
    "missing_file": _missing_file,
    "wrong_numpy_chunk_count": _wrong_numpy_chunk_count,
    "wrong_csv_chunk_count": _wrong_csv_chunk_count,
    "endpoint_out_of_range": _endpoint_out_of_range,
    "feature_row_count": _feature_row_count,
    "csv_non_integer": _csv_non_integer,
    "unknown_format": _unknown_format,
    "unknown_node_type": _unknown_node_type,
    "corrupt_parquet": _corrupt_parquet,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_fails_cleanly(case, example_dir, tmp_path):
    bad = tmp_path / "in"
    shutil.copytree(example_dir, bad)
    expected = CASES[case](bad)
    out = tmp_path / "out"
    run = distpart(2, "pipeline", bad, out, "--num-parts", 4, ok=False, timeout=120)
    assert run.returncode == 2, run.output  # every rank exits 2; an abort would give another code
    assert expected in run.stderr, f"expected {expected!r} in:\n{run.stderr}"
    assert run.stderr.count("error:") == 1, f"the error should be printed once:\n{run.stderr}"
    assert "Traceback" not in run.output
    assert not (out / "metadata.json").exists()
    assert not (bad / "victim.txt").exists() and not (tmp_path / "...txt").exists()


@pytest.mark.parametrize("case", ["malformed_json", "missing_file", "feature_row_count", "csv_non_integer"])
def test_validate_reports_the_same_on_four_ranks(case, example_dir, tmp_path):
    bad = tmp_path / "in"
    shutil.copytree(example_dir, bad)
    expected = CASES[case](bad)
    run = distpart(4, "validate", bad, ok=False, timeout=120)
    assert run.returncode == 2 and expected in run.stderr, run.output


def test_partitions_not_a_multiple_of_ranks(example_dir, tmp_path):
    run = distpart(4, "pipeline", example_dir, tmp_path / "out", "--num-parts", 6, ok=False)
    assert "number of partitions (6) must be a positive multiple of the number of MPI ranks (4)" in run.stderr
    assert not (tmp_path / "out" / "metadata.json").exists()


def test_assignment_with_out_of_range_partition(example_dir, tmp_path):
    assign_dir, out = tmp_path / "assign", tmp_path / "out"
    distpart(2, "assign", example_dir, assign_dir, "--num-parts", 2, "--method", "random")
    lines = (assign_dir / "author.txt").read_text().splitlines()
    lines[10] = "5"
    (assign_dir / "author.txt").write_text("\n".join(lines) + "\n")
    run = distpart(2, "dispatch", example_dir, assign_dir, out, ok=False)
    assert "author.txt: partition ID 5 on line 11 is outside [0, 2)" in run.stderr
    assert not (out / "metadata.json").exists()


def test_assignment_with_wrong_line_count(example_dir, tmp_path):
    assign_dir, out = tmp_path / "assign", tmp_path / "out"
    distpart(2, "assign", example_dir, assign_dir, "--num-parts", 2, "--method", "random")
    with open(assign_dir / "paper.txt", "a") as f:
        f.write("0\n")
    run = distpart(2, "dispatch", example_dir, assign_dir, out, ok=False)
    assert "paper.txt: has 2001 lines but node type 'paper' has 2000 nodes" in run.stderr


def test_valid_input_validates(example_dir):
    run = distpart(2, "validate", example_dir)
    assert "validate: OK (3 node types, 4 edge types, 3003 nodes, 10000 edges)" in run.stdout

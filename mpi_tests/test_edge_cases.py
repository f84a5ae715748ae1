"""Degenerate but legal inputs: empty types, types without edges or features, tiny types."""
from __future__ import annotations

import json

import pytest

from harness import distpart, mpi_env
from distpart.synthetic import EdgeTypeSpec, FeatureSpec, NodeTypeSpec, write_chunked_graph
from reference import check_output


@pytest.fixture(scope="module")
def sparse_types(tmp_path_factory):
    """'lonely' has nodes but no edges, 'empty' has no nodes, 'none' is an edge type with no
    edges, 'tiny' has fewer nodes than partitions; 7 chunks, more than ranks or partitions."""
    root = tmp_path_factory.mktemp("sparse")
    return write_chunked_graph(
        root / "in",
        [NodeTypeSpec("a", 500), NodeTypeSpec("lonely", 9), NodeTypeSpec("empty", 0), NodeTypeSpec("tiny", 2)],
        [EdgeTypeSpec("a:r:a", 3000, fmt="numpy"), EdgeTypeSpec("a:none:a", 0, fmt="csv"),
         EdgeTypeSpec("tiny:t:a", 5, fmt="parquet")],
        [FeatureSpec("a", "x", "float32", (3,)), FeatureSpec("lonely", "y", "int8"),
         FeatureSpec("empty", "z", "float64", (2,)), FeatureSpec("a:none:a", "w", "int32"),
         FeatureSpec("tiny:t:a", "v", "bool", fmt="parquet")],
        num_chunks=7, seed=11).parent


@pytest.mark.parametrize("method", ["random", "parmetis"])
def test_sparse_types(sparse_types, tmp_path, method):
    out = tmp_path / "out"
    run = distpart(2, "pipeline", sparse_types, out, "--num-parts", 4, "--method", method)
    assert "verify: OK" in run.stdout
    check_output(sparse_types, out / "assignment", out)
    config = json.loads((out / "metadata.json").read_text())
    assert config["node_map"]["empty"] == [[s, s] for s, _ in config["node_map"]["empty"]]
    assert all(s == e for s, e in config["edge_map"]["a:none:a"])
    lonely = sum(e - s for s, e in config["node_map"]["lonely"])
    assert lonely == 9


def test_single_rank_without_launcher(sparse_types, tmp_path):
    """Run as a plain process (MPI singleton), no mpiexec."""
    import subprocess
    import sys
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "distpart.cli", "pipeline", str(sparse_types), str(out),
                          "--num-parts", "2", "--method", "random"],
                         capture_output=True, text=True, timeout=120, env=mpi_env())
    assert run.returncode == 0, run.stdout + run.stderr
    check_output(sparse_types, out / "assignment", out)

"""`--graphbolt`: every partition's fused_csc_sampling_graph.pt is the file DGL 2.1.0's own
`dgl_partition_to_graphbolt` writes, DGL loads it with `use_graphbolt=True`, and it is staged,
published, listed in the manifest and resumed like the other partition files.

distpart runs here under the DGL environment's Python (torch and DGL are needed to write the
file), with this clone on PYTHONPATH; scripts/setup-dgl.sh gives that Python mpi4py, pyarrow
and h5py. Skipped, with the message CI looks for, when there is no such Python.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import distpart, distpart_dgl, dgl_env, run_bounded
from distpart.partitions.manifest import file_digest
from distpart.synthetic import homogeneous_graph

REPO = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).parent / "drivers" / "graphbolt_check.py"
GB = "fused_csc_sampling_graph.pt"


def check(python: str, *argv) -> dict:
    """Run the DGL-side checker; returns its JSON report."""
    run = run_bounded([python, DRIVER, *map(str, argv)], dgl_env(), 300)
    assert run.returncode == 0, run.output
    return json.loads(run.stdout.strip().splitlines()[-1])


def assert_as_dgls_converter(python: str, ours: Path, theirs: Path, num_parts: int, flags) -> dict:
    """Our GraphBolt output equals what DGL's converter makes of a plain (graph.dgl only) copy
    of the same output in `theirs`: the same config, bytes and tensors, and DGL loads it
    with use_graphbolt=True. Returns the checker's report."""
    shutil.copytree(ours, theirs)
    for p in range(num_parts):
        (theirs / f"part{p}" / GB).unlink()
    plain = json.loads((ours / "metadata.json").read_text())
    for p in range(num_parts):
        del plain[f"part-{p}"]["part_graph_graphbolt"]
    del plain["node_map_dtype"], plain["edge_map_dtype"]
    (theirs / "metadata.json").write_text(json.dumps(plain))
    report = check(python, "convert-and-compare", ours / "metadata.json", theirs / "metadata.json", *flags)
    assert report["parts"] == num_parts and report["same_tensors"] and report["loaded"] == num_parts
    assert json.loads((theirs / "metadata.json").read_text()) == json.loads((ours / "metadata.json").read_text())
    for p in range(num_parts):
        assert (ours / f"part{p}" / GB).read_bytes() == (theirs / f"part{p}" / GB).read_bytes(), f"part{p}"
        # DGL 2.1.0 keeps graph.dgl beside the GraphBolt file; so does distpart.
        assert (ours / f"part{p}" / "graph.dgl").is_file()
    return report


@pytest.fixture(scope="module")
def homo_dir(tmp_path_factory) -> Path:
    return homogeneous_graph(tmp_path_factory.mktemp("homo"), 600, 4000, num_chunks=3, seed=3).parent


STORES = {"none": [], "all": ["--store-eids", "--store-inner-node", "--store-inner-edge"]}


@pytest.mark.parametrize("graph, stores, nranks", [("example", "none", 2), ("example", "all", 4), ("homo", "all", 1)])
def test_graphbolt_files_equal_dgls_converter(dgl_python, example_dir, homo_dir, tmp_path, graph, stores, nranks):
    """The same bytes and tensors as DGL's converter run on the same partitions, and DGL's
    load_partition(use_graphbolt=True) with its consistency checks (DGL_DIST_DEBUG) accepts them."""
    src = example_dir if graph == "example" else homo_dir
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    run = distpart_dgl(dgl_python, nranks, "pipeline", src, ours, "--num-parts", 4, "--method", "random",
                       "--graphbolt", *STORES[stores])
    assert "verify: OK" in run.stdout
    report = assert_as_dgls_converter(dgl_python, ours, theirs, 4, STORES[stores])
    assert report["homogeneous"] == (graph == "homo")
    # Output independent of R, as for the DGL files.
    if nranks == 4:
        again = tmp_path / "again"
        distpart_dgl(dgl_python, 1, "dispatch", src, ours / "assignment", again, "--graphbolt", *STORES[stores])
        for p in range(4):
            assert (again / f"part{p}" / GB).read_bytes() == (ours / f"part{p}" / GB).read_bytes()


@pytest.fixture(scope="module")
def gb_output(dgl_python, example_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gbout") / "out"
    distpart_dgl(dgl_python, 2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random",
                 "--graphbolt", "--store-eids")
    return out


def test_manifest_lists_the_graphbolt_files_and_verify_quick_checks_them(gb_output, tmp_path):
    manifest = json.loads((gb_output / "distpart-manifest.json").read_text())
    for p in range(4):
        rel = f"part{p}/{GB}"
        assert manifest["files"][rel] == {"size": (gb_output / rel).stat().st_size,
                                          "sha256": file_digest(gb_output / rel)}
    assert manifest["options"]["graphbolt"] == {"store_eids": True, "store_inner_node": False,
                                                "store_inner_edge": False}
    assert not list(gb_output.glob("part*/*.partial"))
    # verify --quick needs no DGL: it runs in the main environment.
    assert "verify --quick: OK (25 files," in distpart(2, "verify", "--quick", gb_output).stdout
    damaged = tmp_path / "out"
    shutil.copytree(gb_output, damaged)
    data = bytearray((damaged / "part2" / GB).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (damaged / "part2" / GB).write_bytes(bytes(data))
    run = distpart(2, "verify", "--quick", damaged, ok=False)
    assert run.returncode == 2 and f"part2/{GB}: differs from the manifest's checksum" in run.stderr


def test_resume_keeps_complete_graphbolt_partitions_and_rebuilds_a_damaged_one(
        dgl_python, example_dir, gb_output, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(gb_output, out)
    before = {p: (out / f"part{p}" / GB).read_bytes() for p in range(4)}
    (out / "part1" / GB).unlink()   # as if lost after the partition was recorded complete
    run = distpart_dgl(dgl_python, 2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random",
                       "--graphbolt", "--store-eids", "--resume")
    assert "resume: rebuilding part1" in run.output and "3 of 4 partitions complete" in run.output
    for p in range(4):
        assert (out / f"part{p}" / GB).read_bytes() == before[p]
    assert (out / "metadata.json").read_text() == (gb_output / "metadata.json").read_text()
    # Other GraphBolt options are another output: --resume refuses, naming the option.
    run = distpart_dgl(dgl_python, 2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random",
                       "--graphbolt", "--resume", ok=False)
    assert run.returncode == 2 and "option graphbolt:" in run.stderr, run.stderr


def test_graphbolt_without_dgl_says_how_to_install(example_dir, tmp_path):
    """In distpart's own environment (no torch) --graphbolt stops before any work."""
    pytest.importorskip("mpi4py")
    try:
        import torch  # noqa: F401
        pytest.skip("this environment has torch; the message is for one without")
    except ImportError:
        pass
    run = distpart(2, "pipeline", example_dir, tmp_path / "out", "--num-parts", 2, "--method", "random",
                   "--graphbolt", ok=False)
    assert run.returncode == 2 and "pip install 'distpart[graphbolt]'" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "out" / "assignment").exists()   # stopped before Step 1
    run = distpart(1, "pipeline", example_dir, tmp_path / "out2", "--num-parts", 2, "--store-eids", ok=False)
    assert run.returncode == 2 and "need --graphbolt" in run.stderr

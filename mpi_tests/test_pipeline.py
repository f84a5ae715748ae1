"""End-to-end: assign, dispatch, verify and pipeline on 1, 2 and 4 ranks."""
from __future__ import annotations

import json

import numpy as np
import pytest

from harness import RANKS, distpart
from reference import check_output, read_assignment_files, tree_bytes

NUM_PARTS = 4


@pytest.fixture(scope="module")
def pipeline_outputs(example_dir, tmp_path_factory):
    """`distpart pipeline` of the example into 4 partitions on each rank count."""
    outs = {}
    for r in RANKS:
        out = tmp_path_factory.mktemp(f"out_r{r}")
        run = distpart(r, "pipeline", example_dir, out, "--num-parts", NUM_PARTS, "--seed", 7, "--method", "random",
                       "--stats-json", out.parent / f"stats_r{r}.json")
        assert "verify: OK" in run.stdout
        outs[r] = out
    return outs


@pytest.mark.parametrize("nranks", RANKS)
def test_pipeline_output_matches_input(pipeline_outputs, example_dir, nranks):
    out = pipeline_outputs[nranks]
    counts = check_output(example_dir, out / "assignment", out)
    meta = json.loads((example_dir / "metadata.json").read_text())
    assert counts["num_nodes"] == sum(map(sum, meta["num_nodes_per_chunk"]))
    assert counts["num_edges"] == sum(map(sum, meta["num_edges_per_chunk"]))


def test_output_is_byte_identical_for_any_rank_count(pipeline_outputs):
    trees = {r: tree_bytes(out) for r, out in pipeline_outputs.items()}
    names = set(trees[1])
    assert {"metadata.json", "part0/graph.dgl", "part3/node_feat.dgl", "part2/orig_eids.dgl",
            "assignment/paper.txt", "assignment/partition_meta.json"} <= names
    for r in RANKS[1:]:
        assert set(trees[r]) == names
        differing = [n for n in names if trees[r][n] != trees[1][n]]
        assert not differing, f"R={r} differs from R=1 in {differing}"


def test_random_assignment_is_balanced_per_type(pipeline_outputs, example_dir):
    out = pipeline_outputs[1]
    meta = json.loads((out / "assignment" / "partition_meta.json").read_text())
    assert meta == {"algo_name": "random", "num_parts": NUM_PARTS, "version": "1.0.0"}
    for ntype, parts in read_assignment_files(out / "assignment", ["author", "paper", "institution"]).items():
        sizes = np.bincount(parts, minlength=NUM_PARTS)
        assert sizes.max() - sizes.min() <= 1, (ntype, sizes)
    other = read_assignment_files(out / "assignment", ["paper"])["paper"]
    assert len(np.unique(other)) == NUM_PARTS


def test_stats_json_has_every_stage_and_rank(pipeline_outputs):
    stats = json.loads((pipeline_outputs[2].parent / "stats_r2.json").read_text())
    assert stats["ranks"] == 2
    names = [s["stage"] for s in stats["stages"]]
    for stage in ("validate", "assign", "relabel", "nodes", "edges", "write", "verify"):
        assert stage in names
    assert all(len(s["peak_rss_mb"]) == 2 and min(s["peak_rss_mb"]) > 0 for s in stats["stages"])


def test_more_partitions_than_ranks_and_separate_steps(example_dir, tmp_path):
    """P = 2R through the separate assign / dispatch / verify commands."""
    assign_dir, out = tmp_path / "assign", tmp_path / "out"
    distpart(2, "assign", example_dir, assign_dir, "--num-parts", 4, "--seed", 7, "--method", "random")
    distpart(2, "dispatch", example_dir, assign_dir, out, "--max-message-mb", 1)
    run = distpart(2, "verify", example_dir, assign_dir, out)
    assert "verify: OK" in run.stdout
    check_output(example_dir, assign_dir, out)


def test_assignment_independent_of_ranks(example_dir, tmp_path):
    a1, a4 = tmp_path / "a1", tmp_path / "a4"
    distpart(1, "assign", example_dir, a1, "--num-parts", 8, "--seed", 3, "--method", "random")
    distpart(4, "assign", example_dir, a4, "--num-parts", 8, "--seed", 3, "--method", "random")
    assert tree_bytes(a1) == tree_bytes(a4)


def test_reads_dgl_random_partition_files(example_dir, tmp_path):
    """Files as DGL's random_partition.py writes them: no partition_meta.json, np.random parts."""
    meta = json.loads((example_dir / "metadata.json").read_text())
    rng = np.random.default_rng(0)
    assign_dir = tmp_path / "dgl_assign"
    assign_dir.mkdir()
    for ntype, chunks in zip(meta["node_type"], meta["num_nodes_per_chunk"]):
        np.savetxt(assign_dir / f"{ntype}.txt", rng.integers(0, 2, sum(chunks)), fmt="%d")
    out = tmp_path / "out"
    distpart(2, "dispatch", example_dir, assign_dir, out, "--num-parts", 2)
    distpart(2, "verify", example_dir, assign_dir, out, "--num-parts", 2)
    check_output(example_dir, assign_dir, out)
    config = json.loads((out / "metadata.json").read_text())
    assert config["num_parts"] == 2 and config["part_method"] == "random"


def test_three_ranks_six_partitions_match_one_rank(example_dir, tmp_path):
    """A rank count that is not a power of two (and P = 2R): same bytes as one rank."""
    outs = {}
    for r in (1, 3):
        outs[r] = tmp_path / f"out{r}"
        run = distpart(r, "pipeline", example_dir, outs[r], "--num-parts", 6, "--seed", 3,
                       "--method", "random")
        assert "verify: OK (6 partitions" in run.stdout
    one, three = tree_bytes(outs[1]), tree_bytes(outs[3])
    assert set(one) == set(three) and "part5/graph.dgl" in one
    assert [n for n in one if one[n] != three[n]] == []
    check_output(example_dir, outs[3] / "assignment", outs[3])


def test_graph_formats_store_the_same_edges(pipeline_outputs, example_dir, tmp_path):
    """--graph-formats csc,csr (DGL dispatch's option): the same partitions, other matrices in
    graph.dgl; recorded in the manifest, so --resume with other formats is refused."""
    from distpart.partitions.dglformat import read_graph

    coo = pipeline_outputs[2]
    out = tmp_path / "out"
    run = distpart(2, "dispatch", example_dir, coo / "assignment", out, "--graph-formats", "csc,csr")
    assert run.returncode == 0
    assert "verify: OK" in distpart(2, "verify", example_dir, coo / "assignment", out).stdout
    manifest = json.loads((out / "distpart-manifest.json").read_text())
    assert manifest["options"]["graph_formats"] == ["csr", "csc"]
    for p in range(NUM_PARTS):
        raw = (out / f"part{p}" / "graph.dgl").read_bytes()
        unit = raw.index((0xDD2E60F0F6B4A127).to_bytes(8, "little"))
        assert int.from_bytes(raw[unit + 8:unit + 16], "little") == 6 | 1 << 32  # CSR | CSC
        ours, plain = read_graph(out / f"part{p}" / "graph.dgl"), read_graph(coo / f"part{p}" / "graph.dgl")
        np.testing.assert_array_equal(ours.src, plain.src)
        np.testing.assert_array_equal(ours.dst, plain.dst)
        for k in plain.ndata:
            np.testing.assert_array_equal(ours.ndata[k], plain.ndata[k])
        for name in ("node_feat.dgl", "edge_feat.dgl", "orig_nids.dgl", "orig_eids.dgl"):
            assert (out / f"part{p}" / name).read_bytes() == (coo / f"part{p}" / name).read_bytes()
    run = distpart(2, "dispatch", example_dir, coo / "assignment", out, "--resume", ok=False)
    assert run.returncode == 2 and "option graph_formats:" in run.stderr, run.stderr

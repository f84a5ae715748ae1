"""ParMETIS assignment end to end, on 1, 2 and 4 ranks, with P = R and P = 2R."""
from __future__ import annotations

import json

import numpy as np
import pytest

from harness import RANKS, distpart, run_driver
from distpart.synthetic import read_whole_graph
from reference import check_output, read_assignment_files


@pytest.mark.parametrize("nranks", (*RANKS, 3))
def test_partitioner_graph_matches_a_serial_reference(nranks):
    run_driver("adjacency_driver", nranks)


@pytest.mark.parametrize("nranks", RANKS)
def test_binding_on_grid_graphs(nranks):
    run_driver("parmetis_driver", nranks)


# Every rank count, with one and with two partitions per rank (ParMETIS's nparts != nranks):
# P = R on 4 ranks, P = 2R on 1 and 2.
@pytest.mark.parametrize("nranks, factor", [(1, 2), (2, 2), (4, 1)])
def test_pipeline_parmetis(nranks, factor, example_dir, tmp_path):
    parts = nranks * factor
    out = tmp_path / "out"
    # Node balance alone: ParMETIS with the default per-type constraints leaves a partition
    # nearly empty on a graph this small (docs/03-step1.md, Balance).
    run = distpart(nranks, "pipeline", example_dir, out, "--num-parts", parts, "--method", "parmetis",
                   "--no-balance-ntypes")
    assert "verify: OK" in run.stdout and "edge cut:" in run.stdout
    check_output(example_dir, out / "assignment", out)
    meta = json.loads((out / "assignment" / "partition_meta.json").read_text())
    assert meta == {"algo_name": "metis", "num_parts": parts, "version": "1.0.0"}
    config = json.loads((out / "metadata.json").read_text())
    assert config["part_method"] == "metis"
    # The report's edge cut is the input's edges between partitions, computed independently.
    ref = read_whole_graph(example_dir / "metadata.json")
    assign = read_assignment_files(out / "assignment", list(config["ntypes"]))
    cut = sum(int((assign[e.split(":")[0]][s] != assign[e.split(":")[2]][d]).sum())
              for e, (s, d) in ref["edges"].items())
    report = json.loads((out / "report.json").read_text())
    assert report["edge_cut"] == cut and report["edges"] == 10000
    if parts > 1:
        sizes = np.bincount(np.concatenate(list(assign.values())), minlength=parts)
        assert sizes.min() > 0 and sizes.max() <= 1.08 * sizes.mean()
        assert cut < 0.6 * 10000 * (1 - 1 / parts)   # far better than random's expected cut


def test_balance_ntypes_evens_out_types(tmp_path):
    """Types clustered in the graph: without --balance-ntypes partitions skew by type."""
    from distpart.synthetic import EdgeTypeSpec, NodeTypeSpec, write_chunked_graph
    # Papers and authors each form their own communities, so a cut-minimising partition
    # wants to keep whole types together; only the per-type constraints spread them.
    in_dir = write_chunked_graph(
        tmp_path / "in", [NodeTypeSpec("author", 3000), NodeTypeSpec("paper", 1000)],
        [EdgeTypeSpec("author:knows:author", 30000, fmt="numpy"),
         EdgeTypeSpec("paper:cites:paper", 10000, fmt="numpy"),
         EdgeTypeSpec("author:writes:paper", 300, fmt="numpy")],
        community=4, seed=3).parent
    reports = {}
    for label, extra in (("plain", ["--no-balance-ntypes", "--no-balance-edges"]), ("balanced", ["--balance-ntypes"])):
        out = tmp_path / label
        distpart(2, "pipeline", in_dir, out, "--num-parts", 4, *extra)
        reports[label] = json.loads((out / "report.json").read_text())["imbalance"]
    plain = max(reports["plain"]["ntype:author"], reports["plain"]["ntype:paper"])
    balanced = max(reports["balanced"]["ntype:author"], reports["balanced"]["ntype:paper"])
    assert balanced <= 1.05 + 0.02, reports
    assert balanced < plain, reports


def test_balance_edges_and_feature(example_dir, tmp_path):
    out = tmp_path / "out"
    run = distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--no-balance-ntypes", "--balance-edges",
                   "--balance-feature", "paper/train_mask", "--imbalance", "1.05")
    rep = json.loads((out / "report.json").read_text())
    assert rep["imbalance"]["edges"] <= 1.07 and rep["imbalance"]["feature:paper/train_mask"] <= 1.07, rep
    assert "feature:paper/train_mask" in run.stdout


@pytest.mark.parametrize("args, message", [
    (["--balance-feature", "paper/nope"], "--balance-feature paper/nope: no node feature 'nope'"),
    (["--balance-feature", "paper/feat"], "--balance-feature paper/feat: must be one value per node"),
    (["--balance-feature", "paper/label"], "--balance-feature paper/label: values must be 0 or 1"),
])
def test_bad_balance_options(args, message, example_dir, tmp_path):
    run = distpart(2, "pipeline", example_dir, tmp_path / "out", "--num-parts", 2, *args, ok=False)
    assert run.returncode == 2 and message in run.stderr, run.output
    assert not (tmp_path / "out" / "metadata.json").exists()


def test_missing_library_is_a_clear_error(example_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PARMETIS_LIB", str(tmp_path / "libparmetis.so"))
    run = distpart(2, "assign", example_dir, tmp_path / "a", "--num-parts", 2, "--method", "parmetis", ok=False)
    assert run.returncode == 2 and "libparmetis.so: file does not exist" in run.stderr, run.output


def test_dispatch_of_a_parmetis_assignment_is_identical_for_any_rank_count(example_dir, tmp_path):
    """ParMETIS's result depends on R; dispatching one given assignment must not."""
    from reference import tree_bytes
    assign_dir = tmp_path / "assign"
    distpart(2, "assign", example_dir, assign_dir, "--num-parts", 4, "--method", "parmetis")
    trees = {}
    for r in RANKS:
        out = tmp_path / f"out{r}"
        distpart(r, "dispatch", example_dir, assign_dir, out)
        trees[r] = tree_bytes(out)
    assert "part3/graph.dgl" in trees[1]
    for r in RANKS[1:]:
        assert trees[r] == trees[1], f"R={r} differs from R=1"


# The serial and a distributed ParMETIS (2 ranks added nothing: 4 runs the same code path).
@pytest.mark.parametrize("nranks", [1, 4])
def test_hubs_first_cuts_less_on_a_power_law_graph(nranks, tmp_path):
    """The default vertex order against the input's, on an RMAT graph (IDs randomly relabelled)."""
    from distpart.synthetic import rmat_graph
    meta = rmat_graph(tmp_path / "in", 4000, 40_000, num_chunks=3, seed=2)
    cuts = {}
    for order in ("degree", "input"):
        out = tmp_path / order
        distpart(nranks, "assign", meta.parent, out, "--num-parts", 4, "--method", "parmetis",
                 "--vertex-order", order, "--no-balance-ntypes")
        part = np.concatenate([np.loadtxt(out / f"{t}.txt", dtype=np.int64) for t in ("user", "item")])
        assert part.min() >= 0 and part.max() < 4
        assert np.bincount(part, minlength=4).max() <= 1.06 * len(part) / 4
        ref = read_whole_graph(meta)
        n_user = 4000 * 3 // 5
        offs = {"user": 0, "item": n_user}
        cut = 0
        for etype, (src, dst) in ref["edges"].items():
            s, _, d = etype.split(":")
            cut += int((part[src + offs[s]] != part[dst + offs[d]]).sum())
        cuts[order] = cut
    assert cuts["degree"] < 0.9 * cuts["input"], cuts

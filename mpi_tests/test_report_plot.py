"""`distpart report` on a real output: its training costs against the input and assignment
(halo, kept and cut edges per partition, training nodes and moved seeds), and `--plot
FILE.png` on 1, 2 and 4 ranks."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import RANKS, distpart
from distpart.check.report import moved_seeds, partition_loads
from distpart.synthetic import read_whole_graph


@pytest.fixture(scope="module")
def output(example_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("plot") / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random", "--no-verify")
    return out


def test_report_costs_equal_the_inputs(example_dir, output, tmp_path):
    """What the report reads from the partitions is what the benchmark computes from the
    input and the assignment (report.partition_loads): one definition of halo and cut."""
    run = distpart(2, "report", output, "--train-mask", "paper/train_mask", "--json", tmp_path / "r.json")
    rep = json.loads((tmp_path / "r.json").read_text())
    meta = json.loads((example_dir / "metadata.json").read_text())
    ntypes = meta["node_type"]
    counts = [sum(c) for c in meta["num_nodes_per_chunk"]]
    offsets = np.concatenate([[0], np.cumsum(counts)])
    part = np.concatenate([np.loadtxt(output / "assignment" / f"{t}.txt", dtype=np.int64) for t in ntypes])
    ref = read_whole_graph(example_dir / "metadata.json")
    src = np.concatenate([s + offsets[ntypes.index(e.split(":")[0])] for e, (s, _) in ref["edges"].items()])
    dst = np.concatenate([d + offsets[ntypes.index(e.split(":")[2])] for e, (_, d) in ref["edges"].items()])
    edges, cut, halo = partition_loads(part, src, dst, 4)
    assert [s["edges"] for s in rep["partitions"]] == edges.tolist()
    assert [s["cut_edges"] for s in rep["partitions"]] == cut.tolist()
    assert [s["halo_nodes"] for s in rep["partitions"]] == halo.tolist()
    assert rep["max_halo_nodes"] == halo.max() and rep["max_partition_cut"] == cut.max()
    assert rep["largest_partition_edge_share"] == round(edges.max() / len(src), 6)
    mask = ref["node_feats"][("paper", "train_mask")].astype(bool)
    paper = part[offsets[ntypes.index("paper")]:offsets[ntypes.index("paper") + 1]]
    train = np.bincount(paper[mask], minlength=4)
    assert rep["train"]["paper/train_mask"]["per_partition"] == train.tolist()
    assert rep["train"]["paper/train_mask"]["moved_per_partition"] == moved_seeds(train).tolist()
    assert f"training nodes paper/train_mask: {mask.sum()};" in run.stdout
    assert "imbalance (max/avg): nodes" in run.stdout and "feature:paper/train_mask" in run.stdout


def test_report_refuses_an_unknown_train_mask(output, tmp_path):
    run = distpart(2, "report", output, "--train-mask", "paper/nope", "--json", tmp_path / "r.json", ok=False)
    assert run.returncode == 2 and "has no feature 'paper/nope'" in run.stderr


@pytest.mark.parametrize("nranks", RANKS)
def test_report_draws_the_png(output, tmp_path, nranks):
    plt_image = pytest.importorskip("matplotlib.image")
    png = tmp_path / "report.png"
    run = distpart(nranks, "report", output, "--plot", png, "--json", tmp_path / "r.json")
    assert "edge cut:" in run.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt_image.imread(png).shape[:2] == (800, 1100)
    rep = json.loads((tmp_path / "r.json").read_text())
    config = json.loads((output / "metadata.json").read_text())
    # The edges-by-type panel is drawn from these: they must match the partition config.
    for s in rep["partitions"]:
        for etype, ranges in config["edge_map"].items():
            assert s["edges_per_type"][etype] == ranges[s["partition"]][1] - ranges[s["partition"]][0]
        assert sum(s["edges_per_type"].values()) == s["edges"]


def test_unwritable_plot_is_a_clear_error_on_every_rank(output, tmp_path):
    run = distpart(2, "report", output, "--plot", tmp_path / "missing" / "r.png", ok=False)
    assert run.returncode == 2 and "cannot write the plot" in run.stderr and "Traceback" not in run.output

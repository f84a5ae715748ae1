"""`distpart report` on a real output: its training costs against the input and assignment
(halo, kept and cut edges per partition, training nodes and moved seeds), and `--plot
FILE.png` on 1, 2 and 4 ranks."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from harness import distpart, mpi_env, run_bounded
from distpart.check.report import moved_seeds, partition_loads
from distpart.synthetic import read_whole_graph

# With test_verify, test_verify_arrays, test_report_plot: one worker makes their shared output.
pytestmark = pytest.mark.xdist_group("random_output")


@pytest.fixture(scope="module")
def output(random_output, tmp_path_factory) -> Path:
    """The session's random 2-rank output of the example (conftest.random_output), copied."""
    out = tmp_path_factory.mktemp("plot") / "out"
    shutil.copytree(random_output, out)
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


# One rank and one partition per rank; the report of 2 ranks (two partitions each) is
# test_report_costs_equal_the_inputs.
@pytest.mark.parametrize("nranks", [1, 4])
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


def test_report_refuses_to_write_through_a_link(output, tmp_path):
    """OUT/report.json -> a user's file: refused by name, the file keeps its bytes."""
    victim = tmp_path / "notes.txt"
    victim.write_text("mine\n")
    link = output / "report.json"
    link.unlink(missing_ok=True)
    os.symlink(victim, link)
    try:
        run = distpart(1, "report", output, ok=False)
        assert run.returncode == 2 and "Traceback" not in run.output
        assert f"{link}: is a symbolic link" in run.stderr
        assert victim.read_text() == "mine\n" and os.readlink(link) == str(victim)
    finally:
        link.unlink()


@pytest.mark.parametrize("command", ["report", "assign"])
def test_output_files_in_a_missing_folder_are_refused_before_any_work(example_dir, output, tmp_path, command):
    """--json and --stats-json into a folder that does not exist: one line, exit 2, and an
    `assign` writes no assignment first."""
    missing = tmp_path / "missing" / "out.json"
    argv = (["report", output, "--json", missing] if command == "report" else
            ["assign", example_dir, tmp_path / "assign", "--num-parts", 2, "--stats-json", missing])
    run = distpart(1, *argv, ok=False)
    assert run.returncode == 2 and "Traceback" not in run.output
    assert f"{missing}: cannot write the" in run.stderr and "does not exist" in run.stderr
    assert not (tmp_path / "assign").exists()


def test_report_on_a_read_only_folder_is_one_line(output, tmp_path):
    """A read-only file system (bind-mounted read-only in a private mount namespace): refused
    before the report is computed, with the folder named, exit 2."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    script = (f'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && '
              f'exec "{sys.executable}" -m distpart.cli report "$1"')
    run = run_bounded(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", output],
                      mpi_env(), timeout=120)
    assert run.returncode == 2, run.output
    assert "Traceback" not in run.output and "MPI_ABORT" not in run.output
    assert f"{output / 'report.json'}: cannot write the report: the folder {output} is not writable" in run.stderr

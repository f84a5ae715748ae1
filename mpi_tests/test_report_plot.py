"""`distpart report OUT --plot FILE.png` on a real output, on 1, 2 and 4 ranks."""
from __future__ import annotations

import json

import pytest

from conftest import RANKS, distpart

plt_image = pytest.importorskip("matplotlib.image")


@pytest.fixture(scope="module")
def output(example_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("plot") / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random", "--no-verify")
    return out


@pytest.mark.parametrize("nranks", RANKS)
def test_report_draws_the_png(output, tmp_path, nranks):
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

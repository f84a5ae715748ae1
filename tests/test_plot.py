"""The report's picture (matplotlib, off-screen)."""
from __future__ import annotations

import sys

import pytest

from distpart.errors import InputError
from distpart.check.report import summarize


@pytest.fixture(autouse=True)
def plt_image():
    """matplotlib's image reader; the test skips without matplotlib (imported here, not at
    collection: every pytest-xdist worker collects this module, one runs it)."""
    return pytest.importorskip("matplotlib.image")


def _report():
    parts = [{"partition": p, "nodes": 10 + p, "nodes_per_type": {"a": 4 + p, "b": 6},
              "edges": 30 + p, "edges_per_type": {"a:r:b": 20, "b:s:a": 10 + p},
              "halo_nodes": 5 * p, "cut_edges": 3 * p} for p in range(3)]
    return summarize(parts, ["a", "b"], [])


def test_plot_is_a_png_with_four_panels(tmp_path, plt_image):
    from distpart.check.plot import plot_report
    path = tmp_path / "r.png"
    plot_report(_report(), ["a", "b"], ["a:r:b", "b:s:a"], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = plt_image.imread(path)
    assert image.shape[:2] == (800, 1100)
    assert image[..., :3].std() > 0.05  # something was drawn


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    from distpart.check import plot
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    with pytest.raises(InputError, match=r"pip install 'distpart\[plot\]'"):
        plot.plot_report(_report(), ["a", "b"], ["a:r:b", "b:s:a"], tmp_path / "r.png")
    assert not (tmp_path / "r.png").exists()


def test_unwritable_plot_path(tmp_path):
    from distpart.check.plot import plot_report
    with pytest.raises(InputError, match="cannot write the plot"):
        plot_report(_report(), ["a", "b"], ["a:r:b", "b:s:a"], tmp_path / "no" / "such" / "r.png")

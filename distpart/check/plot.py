"""A picture of a partitioning: `distpart report OUT_DIR --plot report.png`.

Four panels from the report (see `report`): nodes and edges per partition, stacked by type;
the halo ratio (halo nodes per owned node) and the edge-cut fraction per partition, with the
overall cut drawn across. matplotlib is an optional extra (`pip install 'distpart[plot]'`),
imported only here and drawn off-screen.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import List

import numpy as np

from ..errors import InputError
from ..paths import write_file


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError(None, "--plot needs matplotlib: pip install 'distpart[plot]'") from None
    matplotlib.use("Agg")  # no display on cluster nodes
    import matplotlib.pyplot as plt
    return plt


def _stacked(ax, parts: np.ndarray, counts: "dict[str, List[int]]", title: str) -> None:
    bottom = np.zeros(len(parts))
    for name, values in counts.items():
        ax.bar(parts, values, bottom=bottom, label=name)
        bottom += np.asarray(values, dtype=np.float64)
    ax.set_title(title)
    if len(counts) > 1:
        ax.legend(fontsize="small")


def plot_report(rep: dict, ntypes: List[str], etypes: List[str], path: Path) -> None:
    """Draw the report of one output into `path` (PNG, or any format matplotlib knows by suffix)."""
    plt = _pyplot()
    stats = rep["partitions"]
    parts = np.array([s["partition"] for s in stats])
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    _stacked(axes[0, 0], parts, {t: [s["nodes_per_type"][t] for s in stats] for t in ntypes},
             "owned nodes by type")
    _stacked(axes[0, 1], parts, {e: [s["edges_per_type"][e] for s in stats] for e in etypes},
             "owned edges by type")
    halo = [s["halo_nodes"] / max(s["nodes"], 1) for s in stats]
    axes[1, 0].bar(parts, halo, color="tab:orange")
    axes[1, 0].set_title("halo nodes per owned node")
    cut = [s["cut_edges"] / max(s["edges"], 1) for s in stats]
    axes[1, 1].bar(parts, cut, color="tab:red")
    axes[1, 1].axhline(rep["edge_cut_fraction"], color="black", linestyle="--",
                       label=f"overall {100 * rep['edge_cut_fraction']:.2f}%")
    axes[1, 1].set_title("edge-cut fraction (edges with a halo source)")
    axes[1, 1].legend(fontsize="small")
    for ax in axes.ravel():
        ax.set_xlabel("partition")
        ax.set_xticks(parts)
    fig.suptitle(f"{rep['num_parts']} partitions, {rep['edges']} edges, imbalance "
                 + ", ".join(f"{k} {v:.3f}" for k, v in list(rep["imbalance"].items())[:3]))
    image = io.BytesIO()
    try:
        suffix = Path(path).suffix.lstrip(".").lower()
        # matplotlib picks the format by suffix; an unknown or missing one gets PNG, not a traceback.
        fig.savefig(image, dpi=100, format=suffix if suffix in fig.canvas.get_supported_filetypes() else "png")
    finally:
        plt.close(fig)
    write_file(path, image.getvalue(), "plot")

"""Stage 5: the quality of a partitioning, read from its output alone.

Edge cut (input edges whose endpoints lie in different partitions: in the output, exactly
the edges whose source is a halo node), per-partition node counts per type, edge and halo
counts, and the imbalance of each balance constraint (max load / average load, METIS's
definition). Each rank reads only its own partitions; rank 0 prints and writes the result.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence

import numpy as np

from ..mpi.collective import agreed
from ..partitions.dglformat import read_graph, read_tensor_dict
from ..partitions.layout import PartitionLayout, check_layout
from ..paths import CONFIG_FILE
from ..errors import OutputError
from ..chunked.metadata import read_json

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

REPORT_FILE = "report.json"


def _part_stats(out_dir: Path, config: dict, p: int, ntypes: List[str], features: Sequence[str]) -> dict:
    files = config[f"part-{p}"]
    g = read_graph(out_dir / files["part_graph"])
    per_type = {t: int(config["node_map"][t][p][1] - config["node_map"][t][p][0]) for t in ntypes}
    inner = sum(per_type.values())
    per_etype = {e: int(config["edge_map"][e][p][1] - config["edge_map"][e][p][0]) for e in config["edge_map"]}
    stats = {"partition": p, "nodes": inner, "nodes_per_type": per_type, "edges": int(len(g.src)),
             "edges_per_type": per_etype,
             "halo_nodes": int(g.num_nodes - inner), "cut_edges": int((g.src >= inner).sum())}
    if features:
        feats = read_tensor_dict(out_dir / files["node_feats"], mmap=True)
        for spec in features:
            if spec not in feats:
                raise OutputError(out_dir / files["node_feats"], f"has no feature '{spec}' to report on")
            stats.setdefault("feature_sums", {})[spec] = int(np.asarray(feats[spec]).astype(np.int64).sum())
    return stats


def imbalance(loads: Sequence[float]) -> float:
    """max / mean of per-partition loads (1.0 is perfect balance; 1.0 for an all-zero load)."""
    loads = np.asarray(loads, dtype=np.float64)
    mean = loads.mean() if len(loads) else 0.0
    return float(loads.max() / mean) if mean > 0 else 1.0


def summarize(parts: List[dict], ntypes: List[str], features: Sequence[str]) -> dict:
    """The report from every partition's stats (pure)."""
    total_edges = sum(s["edges"] for s in parts)
    cut = sum(s["cut_edges"] for s in parts)
    constraints = {"nodes": imbalance([s["nodes"] for s in parts])}
    for t in ntypes:
        constraints[f"ntype:{t}"] = imbalance([s["nodes_per_type"][t] for s in parts])
    constraints["edges"] = imbalance([s["edges"] for s in parts])
    for spec in features:
        constraints[f"feature:{spec}"] = imbalance([s["feature_sums"][spec] for s in parts])
    return {"num_parts": len(parts), "edges": total_edges, "edge_cut": cut,
            "edge_cut_fraction": round(cut / total_edges, 6) if total_edges else 0.0,
            "halo_nodes": sum(s["halo_nodes"] for s in parts),
            "imbalance": {k: round(v, 4) for k, v in constraints.items()}, "partitions": parts}


def format_report(rep: dict, ntypes: List[str]) -> str:
    head = ["part"] + [f"n:{t}" for t in ntypes] + ["edges", "halo", "cut_edges"]
    rows = [[str(s["partition"])] + [str(s["nodes_per_type"][t]) for t in ntypes]
            + [str(s["edges"]), str(s["halo_nodes"]), str(s["cut_edges"])] for s in rep["partitions"]]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    lines.append(f"edge cut: {rep['edge_cut']} of {rep['edges']} edges ({100 * rep['edge_cut_fraction']:.2f}%)")
    lines.append("imbalance (max/avg): " + ", ".join(f"{k} {v:.3f}" for k, v in rep["imbalance"].items()))
    return "\n".join(lines)


def _config_basics(path: Path, config) -> "tuple[int, List[str]]":
    """num_parts and the node types in ID order, or OutputError naming what is wrong."""
    num_parts = config.get("num_parts") if isinstance(config, dict) else None
    if not isinstance(num_parts, int) or isinstance(num_parts, bool) or num_parts < 1:
        raise OutputError(path, f"num_parts must be a positive integer, found {num_parts!r}")
    ntypes = config.get("ntypes")
    if not isinstance(ntypes, dict) or not all(isinstance(v, int) for v in ntypes.values()):
        raise OutputError(path, "ntypes must map node type names to integer IDs")
    return num_parts, sorted(ntypes, key=ntypes.get)


def report(comm: Intracomm, out_dir: Path, features: Sequence[str] = (), json_path: Optional[Path] = None,
           plot_path: Optional[Path] = None) -> Optional[dict]:
    """Compute the report of an output; rank 0 prints it, writes JSON (and the plot) and
    returns it. Collective."""
    out_dir = Path(out_dir)
    with agreed(comm):
        config = read_json(out_dir / CONFIG_FILE, OutputError)
        num_parts, ntypes = _config_basics(out_dir / CONFIG_FILE, config)
    layout = PartitionLayout(num_parts, comm.Get_size())
    check_layout(layout.num_parts, layout.nranks)
    with agreed(comm):
        mine = [_part_stats(out_dir, config, p, ntypes, features) for p in layout.parts_of(comm.Get_rank())]
    everyone = comm.gather(mine, root=0)  # a few numbers per partition: a small control message
    rep = None
    with agreed(comm):
        if comm.Get_rank() == 0:
            rep = summarize([s for part in everyone for s in part], ntypes, features)
            path = json_path or out_dir / REPORT_FILE
            path.write_text(json.dumps(rep, indent=2) + "\n")
            print(format_report(rep, ntypes), flush=True)
            if plot_path is not None:
                from .plot import plot_report
                plot_report(rep, ntypes, list(config["edge_map"]), plot_path)
    return rep


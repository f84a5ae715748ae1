"""Stage 5: the quality of a partitioning, read from its output alone.

Beside the edge cut (input edges whose endpoints lie in different partitions: in the output,
exactly the edges whose source is a halo node), what distributed training pays for: the halo
(remote) nodes of each partition, total and largest (feature rows fetched from other
machines), the largest partition's kept edges and their share of all edges, the largest
per-partition cut; with a train mask, training nodes per partition and the "moved" seeds,
those DGL's even split of the training nodes (`node_split(..., force_even=True)`) hands to
another partition's trainer; and the imbalance of each balance constraint (max load /
average load, METIS's definition). Each rank reads only its own partitions; rank 0 prints
and writes the result.

The pure functions (`partition_loads`, `training_costs`, `moved_seeds`, `imbalance`) are the
one definition of these quantities: `benchmarks/bench_assign.py` computes them from an
assignment and the input with the same code.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence

import numpy as np

from ..mpi.collective import agreed
from ..partitions.dglformat import read_graph, read_tensor_dict
from ..partitions.layout import PartitionLayout, check_layout
from ..paths import CONFIG_FILE, write_file
from .dglstart import empty_type_warnings
from .partfiles import mapped_pieces
from .plot import plot_report
from ..errors import OutputError
from ..chunked.metadata import read_json

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

REPORT_FILE = "report.json"


# ----------------------------------------------------------------------------- pure metrics


def imbalance(loads: Sequence[float]) -> float:
    """max / mean of per-partition loads (1.0 is perfect balance; 1.0 for an all-zero load)."""
    loads = np.asarray(loads, dtype=np.float64)
    mean = loads.mean() if len(loads) else 0.0
    return float(loads.max() / mean) if mean > 0 else 1.0


def even_split_offsets(total: int, num_parts: int) -> np.ndarray:
    """DGL 2.1's `_even_offset(n, k)`: where each of k slices of n ordered items starts (k + 1
    offsets); the first n mod k slices hold one item more than the others."""
    total, num_parts = int(total), int(num_parts)
    each = total // num_parts if num_parts else 0
    sizes = np.full(num_parts, each, dtype=np.int64)
    sizes[:total - each * num_parts] += 1
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def moved_seeds(train_per_part: Sequence[int]) -> np.ndarray:
    """Per partition p: how many of its training nodes DGL's even split gives to another
    partition's trainer (one trainer per partition).

    `dgl.distributed.node_split(mask, book, ntype, force_even=True)` (DGL 2.1,
    `_split_even_to_part`) orders the training nodes of a type by their ID in the partitioned
    graph and gives trainer p the slice `_even_offset(T, k)[p : p + 2]` of that order. Those IDs
    are numbered partition by partition, so partition p's training nodes are the slice
    [sum(T[:p]), sum(T[:p + 1])) of the same order, and what does not overlap trainer p's slice
    is trained by another machine, which fetches the node and its sampled neighbourhood
    remotely. With several trainers per machine DGL splits each machine's slice further
    among them, so the count between machines is the same.
    """
    counts = np.asarray(train_per_part, dtype=np.int64)
    held = np.concatenate([[0], np.cumsum(counts)])
    given = even_split_offsets(int(held[-1]), len(counts))
    kept = np.minimum(held[1:], given[1:]) - np.maximum(held[:-1], given[:-1])
    return counts - np.maximum(kept, 0)


def partition_loads(part: np.ndarray, src: np.ndarray, dst: np.ndarray,
                    num_parts: int) -> "tuple[np.ndarray, np.ndarray, np.ndarray]":
    """(kept edges, cut edges, halo nodes) per partition, from a node assignment and the
    input's directed edges (homogeneous IDs), as DGL's partitions hold them: partition p keeps
    every in-edge of its nodes, its cut edges are those of them whose source lies elsewhere,
    and its halo is the distinct such sources. Vectorized: O(E) memory, no loop over edges."""
    part = np.asarray(part)
    src = np.asarray(src, dtype=np.int64)
    owner = part[np.asarray(dst, dtype=np.int64)].astype(np.int64)
    edges = np.bincount(owner, minlength=num_parts)
    remote = part[src] != owner
    owner, source = owner[remote], src[remote]
    del remote
    cut = np.bincount(owner, minlength=num_parts)
    # A source counts once per partition it is a halo node of: distinct (owner, source) pairs,
    # by a sort (np.unique is many times slower on 10^7 keys with numpy 2.4).
    pairs = np.sort(owner * np.int64(len(part)) + source)
    if len(pairs):
        pairs = pairs[np.concatenate([[True], pairs[1:] != pairs[:-1]])]
    halo = np.bincount(pairs // np.int64(len(part)), minlength=num_parts)
    return edges, cut, halo


def training_costs(edges: Sequence[int], cut: Sequence[int], halo: Sequence[int]) -> dict:
    """The cut, halo and edge concentration of a partitioning from its per-partition kept
    edges, cut edges and halo nodes (see `partition_loads`). A low cut that puts most edges
    in one partition makes that machine the straggler: the largest share is reported beside."""
    edges, cut, halo = (np.asarray(a, dtype=np.int64) for a in (edges, cut, halo))
    total = int(edges.sum())
    big = int(np.argmax(edges)) if len(edges) else 0
    return {"edges": total, "edge_cut": int(cut.sum()),
            "edge_cut_fraction": round(int(cut.sum()) / total, 6) if total else 0.0,
            "max_partition_cut": int(cut.max(initial=0)), "max_cut_partition": int(np.argmax(cut)) if len(cut) else 0,
            "halo_nodes": int(halo.sum()), "max_halo_nodes": int(halo.max(initial=0)),
            "max_halo_partition": int(np.argmax(halo)) if len(halo) else 0,
            "largest_partition": big, "largest_partition_edges": int(edges.max(initial=0)),
            "largest_partition_edge_share": round(int(edges.max(initial=0)) / total, 6) if total else 0.0}


def seed_split(train_per_part: Sequence[int]) -> dict:
    """Training nodes per partition and the moved seeds of DGL's even split (`moved_seeds`)."""
    counts = np.asarray(train_per_part, dtype=np.int64)
    moved = moved_seeds(counts)
    total = int(counts.sum())
    return {"nodes": total, "per_partition": counts.tolist(), "moved": int(moved.sum()),
            "moved_fraction": round(int(moved.sum()) / total, 6) if total else 0.0,
            "moved_per_partition": moved.tolist()}


# ----------------------------------------------------------------------------- the output's report


def _part_stats(out_dir: Path, config: dict, p: int, ntypes: List[str], features: Sequence[str],
                train_masks: Sequence[str]) -> dict:
    files = config[f"part-{p}"]
    # Mapped and walked in pieces: the largest partition's graph is never held whole.
    g = read_graph(out_dir / files["part_graph"], mmap=True)
    per_type = {t: int(config["node_map"][t][p][1] - config["node_map"][t][p][0]) for t in ntypes}
    inner = sum(per_type.values())
    per_etype = {e: int(config["edge_map"][e][p][1] - config["edge_map"][e][p][0]) for e in config["edge_map"]}
    stats = {"partition": p, "nodes": inner, "nodes_per_type": per_type, "edges": int(len(g.src)),
             "edges_per_type": per_etype, "halo_nodes": int(g.num_nodes - inner),
             "cut_edges": sum(int(np.count_nonzero(src >= inner)) for (src,) in mapped_pieces(g.src))}
    del g
    # Which types carry a feature (every partition stores each one, with zero rows if need be):
    # a type with none cannot stop DGL's servers however it is spread (dglstart).
    feats = read_tensor_dict(out_dir / files["node_feats"], mmap=True)
    edge_feats = read_tensor_dict(out_dir / files["edge_feats"], mmap=True)
    stats["featured_types"] = sorted({key.rsplit("/", 1)[0] for key in [*feats, *edge_feats]})
    if features or train_masks:
        for spec in dict.fromkeys([*features, *train_masks]):
            if spec not in feats:
                raise OutputError(out_dir / files["node_feats"], f"has no feature '{spec}' to report on")
            values = np.asarray(feats[spec])
            if spec in features:
                stats.setdefault("feature_sums", {})[spec] = int(values.astype(np.int64).sum())
            if spec in train_masks:
                # node_split counts the nonzero entries of the mask: so do we.
                stats.setdefault("train_nodes", {})[spec] = int(np.count_nonzero(values))
    return stats


def summarize(parts: List[dict], ntypes: List[str], features: Sequence[str],
              train_masks: Sequence[str] = ()) -> dict:
    """The report from every partition's stats (pure)."""
    costs = training_costs([s["edges"] for s in parts], [s["cut_edges"] for s in parts],
                           [s["halo_nodes"] for s in parts])
    constraints = {"nodes": imbalance([s["nodes"] for s in parts])}
    for t in ntypes:
        constraints[f"ntype:{t}"] = imbalance([s["nodes_per_type"][t] for s in parts])
    constraints["edges"] = imbalance([s["edges"] for s in parts])
    for spec in features:
        constraints[f"feature:{spec}"] = imbalance([s["feature_sums"][spec] for s in parts])
    train = {spec: seed_split([s["train_nodes"][spec] for s in parts]) for spec in train_masks}
    for spec in train_masks:
        constraints.setdefault(f"feature:{spec}", imbalance(train[spec]["per_partition"]))
    rep = {"num_parts": len(parts), **costs,
           "imbalance": {k: round(v, 4) for k, v in constraints.items()}}
    featured = ({t for s in parts for t in s["featured_types"]} if all("featured_types" in s for s in parts)
                else None)
    warnings = empty_type_warnings({t: [s["nodes_per_type"][t] for s in parts] for t in ntypes},
                                   {e: [s["edges_per_type"][e] for s in parts] for e in parts[0].get("edges_per_type", {})},
                                   None if featured is None else sorted(featured))
    if warnings:
        rep["warnings"] = warnings
    if train:
        rep["train"] = train
    rep["partitions"] = parts
    return rep


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def format_report(rep: dict, ntypes: List[str]) -> str:
    train = rep.get("train", {})
    tag = (lambda spec: "") if len(train) == 1 else (lambda spec: f":{spec}")
    head = (["part"] + [f"n:{t}" for t in ntypes] + ["edges", "halo", "cut_edges"]
            + [h for spec in train for h in (f"train{tag(spec)}", f"moved{tag(spec)}")])
    rows = [[str(s["partition"])] + [str(s["nodes_per_type"][t]) for t in ntypes]
            + [str(s["edges"]), str(s["halo_nodes"]), str(s["cut_edges"])]
            + [str(v) for spec in train for v in (train[spec]["per_partition"][i], train[spec]["moved_per_partition"][i])]
            for i, s in enumerate(rep["partitions"])]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    lines.append(f"edge cut: {rep['edge_cut']} of {rep['edges']} edges ({_pct(rep['edge_cut_fraction'])}); "
                 f"largest per-partition cut {rep['max_partition_cut']} (partition {rep['max_cut_partition']})")
    lines.append(f"halo nodes (fetched from other partitions): {rep['halo_nodes']} in all, at most "
                 f"{rep['max_halo_nodes']} (partition {rep['max_halo_partition']})")
    lines.append(f"largest partition: {rep['largest_partition_edges']} of {rep['edges']} edges "
                 f"({_pct(rep['largest_partition_edge_share'])}, partition {rep['largest_partition']})")
    for spec, t in train.items():
        lines.append(f"training nodes {spec}: {t['nodes']}; DGL's even split (node_split, force_even) "
                     f"hands {t['moved']} ({_pct(t['moved_fraction'])}) to another partition's trainer")
    lines.append("imbalance (max/avg): " + ", ".join(f"{k} {v:.3f}" for k, v in rep["imbalance"].items()))
    lines += [f"WARNING: {w}" for w in rep.get("warnings", [])]
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
           plot_path: Optional[Path] = None, train_masks: Sequence[str] = ()) -> Optional[dict]:
    """Compute the report of an output; rank 0 prints it, writes JSON (and the plot) and
    returns it. `features`: 0/1 node features whose balance is reported; `train_masks`: node
    features ("NTYPE/FEAT") of training nodes, whose split among trainers is reported too.
    Collective."""
    out_dir = Path(out_dir)
    features, train_masks = list(dict.fromkeys(features)), list(dict.fromkeys(train_masks))
    with agreed(comm):
        config = read_json(out_dir / CONFIG_FILE, OutputError)
        num_parts, ntypes = _config_basics(out_dir / CONFIG_FILE, config)
    layout = PartitionLayout(num_parts, comm.Get_size())
    check_layout(layout.num_parts, layout.nranks)
    with agreed(comm):
        mine = [_part_stats(out_dir, config, p, ntypes, features, train_masks)
                for p in layout.parts_of(comm.Get_rank())]
    everyone = comm.gather(mine, root=0)  # a few numbers per partition: a small control message
    rep = None
    with agreed(comm):
        if comm.Get_rank() == 0:
            rep = summarize([s for part in everyone for s in part], ntypes, features, train_masks)
            path = json_path or out_dir / REPORT_FILE
            write_file(path, json.dumps(rep, indent=2) + "\n", "report")
            print(format_report(rep, ntypes), flush=True)
            if plot_path is not None:
                        plot_report(rep, ntypes, list(config["edge_map"]), plot_path)
    return rep

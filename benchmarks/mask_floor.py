"""Where a train-mask-balanced cut comes from (issue 19's C2 gap): for an assignment of a
benchmark graph, how much of the cut the training nodes' edges force.

On a power-law graph whose training nodes are its hubs (bench_graphs.py's RMAT masks: the
first nodes of a breadth-first search, higher degree first), a low cut keeps the dense core
in one block, and the train-mask cap then forces all but cap-many training nodes out of it.
This prints, for the block whose training nodes have the largest degree sum (the "core"
block; by count several blocks are often at the cap):

* how many training nodes must be outside it (all but its cap), and the least possible
  degree sum of that many training nodes, as a share of all edges (the lowest-degree ones);
* what the assignment does: the degree sum of the training nodes it keeps outside, the cut
  edges touching a training node, and the other cut edges;
* where its cut is (`split_*`, adding up to the cut): outside training nodes to the core
  block, outside training nodes among themselves (`outside_train_edges_pct` of them exist:
  what putting them together could save at most), outside training nodes to other nodes
  outside the core block, core-block training nodes to nodes outside it, and edges with no
  training endpoint.

If the assignment's outside training nodes already are the lowest-degree ones, a lower cut
needs their neighbours to move with them, which on RMAT means the hubs they hang on.

    python benchmarks/mask_floor.py WORK/graphs/rmat-200k ASSIGN_DIR [--parts 4 --imbalance 1.05]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_assign import load_graph, read_parts  # noqa: E402


def floor_numbers(lo: np.ndarray, hi: np.ndarray, n: int, train: np.ndarray, part: np.ndarray, parts: int,
                  imbalance: float) -> dict:
    """The numbers the module docstring lists; shares are of the len(lo) undirected edges."""
    edges = max(len(lo), 1)
    deg = np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)
    per_block = np.bincount(part[train], minlength=parts)
    core = int(np.bincount(part[train], weights=deg[train], minlength=parts).argmax())
    cap = int(np.floor(imbalance * len(train) / parts))
    must_leave = max(len(train) - cap, 0)
    least = int(np.sort(deg[train])[:must_leave].sum())
    outside = train[part[train] != core]
    is_train = np.zeros(n, dtype=bool)
    is_train[train] = True
    cut = part[lo] != part[hi]
    touching = cut & (is_train[lo] | is_train[hi])
    out_train = np.zeros(n, dtype=bool)
    out_train[outside] = True
    in_core = part == core

    def pct(count) -> float:
        """A count of edges (or an edge mask's) as a share of all edges, in %."""
        return round(100 * int(np.sum(count)) / edges, 2)

    def either(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Edges with one endpoint in a and the other in b (vertex masks)."""
        return (a[lo] & b[hi]) | (a[hi] & b[lo])
    among = out_train[lo] & out_train[hi]
    split = {"split_outside_train_to_core_pct": pct(cut & either(out_train, in_core)),
             "split_outside_train_among_pct": pct(cut & among),
             "split_outside_train_to_other_outside_pct": pct(cut & either(out_train, ~in_core & ~is_train)),
             "split_core_train_to_outside_pct": pct(cut & either(is_train & in_core, ~in_core & ~out_train)),
             "split_no_train_pct": pct(cut & ~touching)}
    return {"train_nodes": int(len(train)), "train_per_block": per_block.tolist(), "cap": cap,
            "must_leave_core_block": must_leave,
            "least_degree_sum_pct": pct(least), "outside_degree_sum_pct": pct(deg[outside]),
            "cut_pct": pct(cut), "cut_touching_train_pct": pct(touching),
            "cut_other_pct": split["split_no_train_pct"], "outside_train_edges_pct": pct(among), **split}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph", type=Path, help="a graph folder bench_graphs.py built")
    ap.add_argument("assignment", type=Path, help="an assignment folder (one NTYPE.txt per node type)")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--imbalance", type=float, default=1.05)
    args = ap.parse_args(argv)
    g = load_graph(args.graph.name, args.graph)
    part = read_parts(args.assignment, g.ntypes)
    out = floor_numbers(g.lo, g.hi, g.n, g.masks["train"], part, args.parts, args.imbalance)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Markdown tables from `bench_assign.py`'s JSON files, as docs/03-step1.md shows them.

    python benchmarks/assign_tables.py benchmarks/results/assign_small.json benchmarks/results/assign_rmat_2m.json
    python benchmarks/assign_tables.py --imbalance 1.05 --sets C0,C2,C3 --skip-methods random \
        --skip-refused benchmarks/results/assign_small.json     # docs/03-step1.md's 200k table

One row per (graph, imbalance, constraint set, ranks, method): cut, halo (total and largest
partition's), the largest partition's share of the edges, the imbalance of every constraint
distpart can balance (whether the set balances it or not: nodes, each node type, the 10% and
1% train masks, in-degree), DGL's moved training seeds, time, peak RSS per rank; a row over
the allowed imbalance says which constraint.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

IMBALANCE_COLUMNS = ["imb nodes", "imb types", "imb train", "imb sparse", "imb edges"]
COLUMNS = ["graph", "ub", "set", "R", "method", "cut %", "halo total", "halo max", "edge share",
           *IMBALANCE_COLUMNS, "moved seeds", "time s", "peak MB/rank", "over ub"]


def imbalance_cells(imb: Dict[str, float]) -> Dict[str, str]:
    """A row's imbalances (bench_assign's `imbalance` dict, keyed `nodes`, `ntype:T`,
    `feature:T/F`, `edges`, ...) as the IMBALANCE_COLUMNS cells: node types in the dict's
    (the graph's) order joined by '/', the train mask and the sparse one by their names."""
    def fmt(key: str) -> str:
        return f"{imb[key]:.3f}" if key in imb else ""
    features = [k for k in imb if k.startswith("feature:")]
    sparse = [k for k in features if k.endswith("sparse_train_mask")]
    train = [k for k in features if k not in sparse]
    return {"imb nodes": fmt("nodes"),
            "imb types": "/".join(fmt(k) for k in imb if k.startswith("ntype:")),
            "imb train": fmt(train[0]) if train else "", "imb sparse": fmt(sparse[0]) if sparse else "",
            "imb edges": fmt("edges")}


def cell_rows(rows: List[dict]) -> List[List[str]]:
    out = []
    for r in rows:
        if "cut_pct" not in r:   # refused or failed: say so
            out.append([r["graph"], str(r.get("imbalance_allowed", "")), r.get("constraints", ""),
                        str(r.get("ranks", "")), r["method"], str(r.get("cut", r.get("status", "n/a")))]
                       + [""] * (len(COLUMNS) - 6))
            continue
        imb = imbalance_cells(r["imbalance"])
        moved = r.get("train", {}).get("moved", "")
        out.append([r["graph"], str(r["imbalance_allowed"]), r["constraints"], str(r["ranks"]), r["method"],
                    f"{r['cut_pct']:.2f}", str(r["halo_total"]), str(r["halo_max"]), f"{r['edge_share']:.2f}",
                    *(imb[c] for c in IMBALANCE_COLUMNS), str(moved), str(r.get("time_s", "")),
                    str(r.get("peak_rss_mb", "")),
                    ", ".join(_over(k, v) for k, v in r.get("over", {}).items()) or "-"])
    return out


def _over(name: str, over) -> str:
    """'ntype:user 1.030 +8': the constraint, its imbalance, how many nodes/edges above the cap."""
    if isinstance(over, dict):
        return f"{name} {over['imbalance']:.3f} +{over['excess']}"
    return f"{name} {over:.3f}"


def markdown(rows: List[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c) + " |" for c in cell_rows(rows)]
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Markdown tables from bench_assign.py's JSON files")
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--imbalance", type=float, help="only the rows of this --imbalance")
    ap.add_argument("--sets", help="only these constraint sets (comma-separated)")
    ap.add_argument("--skip-methods", default="", help="leave out these methods (comma-separated)")
    ap.add_argument("--skip-refused", action="store_true", help="leave out rows without a partition")
    args = ap.parse_args(argv)
    sets = set(args.sets.split(",")) if args.sets else None
    skip = {m for m in args.skip_methods.split(",") if m}
    rows: List[dict] = []
    for name in args.files:
        rows += [r for r in json.loads(name.read_text())["rows"]
                 if (args.imbalance is None or r.get("imbalance_allowed") == args.imbalance)
                 and (sets is None or r.get("constraints") in sets) and r["method"] not in skip
                 and not (args.skip_refused and "cut_pct" not in r)]
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

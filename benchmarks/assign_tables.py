"""Markdown tables from `bench_assign.py`'s JSON files: `benchmarks/results/assign_tables.md`
(the Step 1 suite's full tables, which docs/03-step1.md links to) or any selection of rows.

    python benchmarks/assign_tables.py --document --out benchmarks/results/assign_tables.md
    python benchmarks/assign_tables.py benchmarks/results/assign_small.json benchmarks/results/assign_rmat_2m.json
    python benchmarks/assign_tables.py --imbalance 1.05 --sets C0,C2,C3 --skip-methods random \
        --skip-refused benchmarks/results/assign_small.json     # the 200k table of assign_tables.md

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
from typing import Dict, List, Optional, Set

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


RESULTS = Path(__file__).resolve().parent / "results"

# assign_tables.md: (heading, file, row filter), as run_assign_suite.sh writes the files.
SECTIONS = [
    ("RMAT 2M nodes / 20M edges, --imbalance 1.05", "assign_rmat_2m.json",
     dict(skip={"random"})),
    ("200k graphs and the Debian graph, 2 ranks, --imbalance 1.05", "assign_small.json",
     dict(imbalance=1.05, sets={"C0", "C2", "C3"}, skip={"random"}, skip_refused=True)),
    ("16 parts: the 200k graphs and the Debian graph, 2 ranks, --imbalance 1.05", "assign_k16.json",
     dict(skip_refused=True)),
    ("A 2M-node torus (mesh), 2 ranks, --imbalance 1.05", "assign_mesh_2m.json", {}),
]
LEGEND = """\
`benchmarks/bench_assign.py` runs `distpart assign --method M` under `mpiexec` on every graph and
constraint set, beside serial references named by the METIS call they make (libmetis 5):
"METIS k-way" (`METIS_PartGraphKway`), "METIS recursive bisection" (`METIS_PartGraphRecursive`)
and "METIS k-way ncon" (k-way with one vertex-weight column per constraint, the columns distpart
builds). ParMETIS is `ParMETIS_V3_PartKway` (hubs first); KaMinPar its `eco` preset.

Graphs (`benchmarks/bench_graphs.py`, each with 2 node types and train masks of about 10% and 1% of
a type that follow its structure): RMAT (Graph500's power-law model, IDs randomly relabelled)
200k/2M and 2M/20M; a Chung-Lu power-law graph with 100 planted communities; the 2-D torus; the
Debian package dependency graph (bookworm `main` amd64, from apt's Packages index).

Constraint sets: C0 nodes; C1 every node type; C2 C1 + the 10% train mask; C3 C2 + edges
(in-degree per type); C2s C2 with the 1% mask. 4 parts unless the heading says 16.

Columns: cut on the symmetrized simple graph; halo (the feature rows a partition fetches from
others) total and largest; the largest partition's share of the edges; the imbalance (max/average)
of every constraint whether the set balances it or not (nodes; each node type; the 10% and 1%
train masks; in-degree); the training seeds DGL's even split moves to another machine; assign's
wall seconds and peak RSS per rank (from the stage log); "over ub" names a constraint above
`--imbalance` and by how many nodes or edges. KaMinPar is multi-threaded, so its rows differ a
little from run to run; every other method gives the same partition every run."""
SEED_FILES = ["assign_rmat_2m.json", "assign_rmat_2m_c3_seed2.json", "assign_rmat_2m_c3_seed3.json"]


def select(rows: List[dict], imbalance: Optional[float] = None, sets: Optional[Set[str]] = None,
           skip: Set[str] = frozenset(), skip_refused: bool = False) -> List[dict]:
    return [r for r in rows
            if (imbalance is None or r.get("imbalance_allowed") == imbalance)
            and (sets is None or r.get("constraints") in sets) and r["method"] not in skip
            and not (skip_refused and "cut_pct" not in r)]


def seed_table(results: Path = RESULTS) -> str:
    """RMAT 2M/20M with in-degree balance (C3), multilevel against ParMETIS, one row per seed."""
    lines = ["| seed | multilevel cut % | time s | ParMETIS cut % | time s | ParMETIS over --imbalance |",
             "|---|---|---|---|---|---|"]
    for name in SEED_FILES:
        data = json.loads((results / name).read_text())
        rows = {r["method"]: r for r in data["rows"] if r["constraints"] == "C3" and r["ranks"] == 2}
        ml, pm = rows["multilevel"], rows["parmetis"]
        over = ", ".join(_over(k, v) for k, v in pm.get("over", {}).items()) or "no"
        lines.append(f"| {data['seed']} | {ml['cut_pct']:.2f} | {ml['time_s']} | {pm['cut_pct']:.2f} | "
                     f"{pm['time_s']} | {over} |")
    return "\n".join(lines)


def _minutes(results: Path) -> str:
    total = sum(json.loads((results / name).read_text()).get("wall_s", 0) for _, name, _ in SECTIONS)
    return f"{total / 60:.0f} minutes"


def document(results: Path = RESULTS) -> str:
    """assign_tables.md: every section's table, then the by-seed table."""
    parts = ["# Step 1 benchmark: cut, balance, time and memory of every method", "",
             "Generated by `python benchmarks/assign_tables.py --document --out benchmarks/results/assign_tables.md` "
             "from the JSON files `bash benchmarks/run_assign_suite.sh` writes; do not edit by hand. "
             "The history of the tuning these tables measure: [step1_history.md](step1_history.md).", "", LEGEND, "",
             "The whole suite took " + _minutes(results) + " on the 2-core development machine.", ""]
    for heading, name, filters in SECTIONS:
        rows = json.loads((results / name).read_text())["rows"]
        parts += [f"## {heading}", "", f"From `benchmarks/results/{name}`.", "", markdown(select(rows, **filters)), ""]
    parts += ["## RMAT 2M/20M with in-degree balance (C3), by seed", "",
              "`bench_assign.py --graphs rmat-2m --constraints C3 --methods multilevel,parmetis --seed N`; seed 1 "
              "is the suite's run above. From " + ", ".join(f"`benchmarks/results/{n}`" for n in SEED_FILES) + ".",
              "", seed_table(results), ""]
    return "\n".join(parts)


def main(argv: List[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Markdown tables from bench_assign.py's JSON files")
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--document", action="store_true", help="assign_tables.md from the results folder")
    ap.add_argument("--out", type=Path, help="write here instead of printing")
    ap.add_argument("--imbalance", type=float, help="only the rows of this --imbalance")
    ap.add_argument("--sets", help="only these constraint sets (comma-separated)")
    ap.add_argument("--skip-methods", default="", help="leave out these methods (comma-separated)")
    ap.add_argument("--skip-refused", action="store_true", help="leave out rows without a partition")
    args = ap.parse_args(argv)
    if args.document:
        text = document()
    else:
        if not args.files:
            ap.error("give JSON files, or --document")
        sets = set(args.sets.split(",")) if args.sets else None
        skip = {m for m in args.skip_methods.split(",") if m}
        rows: List[dict] = []
        for name in args.files:
            rows += select(json.loads(name.read_text())["rows"], args.imbalance, sets, skip, args.skip_refused)
        text = markdown(rows)
    emit(text, args.out)
    return 0


def emit(text: str, out: "Optional[Path]") -> None:
    """A generated markdown file written to `out`, or printed when there is none."""
    if out:
        out.write_text(text)
        print(f"written {out}")
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

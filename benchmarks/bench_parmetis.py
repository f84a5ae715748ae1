"""Benchmark ParMETIS assignment: edge cut against serial METIS, balance, and assignment time.

Generates a graph with community structure, runs `distpart assign --method parmetis` under
mpiexec for each number of partitions, and partitions the same symmetrized graph with
serial METIS (pymetis, used here only: `pip install pymetis`). Cuts are counted on the
symmetrized simple graph for both. Prints a table and writes it as JSON.

    python benchmarks/bench_parmetis.py --ranks 2 --num-nodes 200000 --num-edges 2000000
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from distpart.synthetic import EdgeTypeSpec, NodeTypeSpec, read_whole_graph, write_chunked_graph


def symmetric_simple(ref: dict, ntypes: list) -> "tuple[np.ndarray, np.ndarray, int]":
    """(undirected edge list u < v without duplicates, in-degree per vertex, vertex count)."""
    offsets = np.concatenate([[0], np.cumsum([ref["num_nodes"][t] for t in ntypes])])
    us, vs = [], []
    for etype, (src, dst) in ref["edges"].items():
        s, _, d = etype.split(":")
        us.append(src + offsets[ntypes.index(s)])
        vs.append(dst + offsets[ntypes.index(d)])
    u, v = np.concatenate(us), np.concatenate(vs)
    n = int(offsets[-1])
    in_degree = np.bincount(v, minlength=n)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    keep = lo != hi
    key = np.unique(lo[keep] * n + hi[keep])
    return np.stack([key // n, key % n], 1), in_degree, n


def metis_partition(edges: np.ndarray, n: int, parts: int) -> "tuple[np.ndarray, float]":
    import pymetis
    both = np.concatenate([edges, edges[:, ::-1]])
    order = np.lexsort((both[:, 1], both[:, 0]))
    both = both[order]
    xadj = np.concatenate([[0], np.cumsum(np.bincount(both[:, 0], minlength=n))])
    t0 = time.perf_counter()
    adjacency = pymetis.CSRAdjacency(xadj.astype(np.int32), both[:, 1].astype(np.int32))
    _, membership = pymetis.part_graph(parts, adjacency=adjacency)
    return np.asarray(membership), time.perf_counter() - t0


def imbalance(part: np.ndarray, weights: np.ndarray, parts: int) -> float:
    loads = np.bincount(part, weights=weights, minlength=parts)
    return float(loads.max() / loads.mean())


def run_assign(args, in_dir: Path, out: Path, parts: int, extra: list) -> float:
    stats = out.with_suffix(".stats.json")
    cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(args.ranks), sys.executable, "-m", "distpart.cli",
           "assign", str(in_dir), str(out), "--num-parts", str(parts), "--method", "parmetis",
           "--seed", "1", "--stats-json", str(stats), *extra]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    rows = json.loads(stats.read_text())["stages"]
    return next(r for r in rows if r["stage"] == "assign")["wall_s"], max(max(r["peak_rss_mb"]) for r in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--parts", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--num-nodes", type=int, default=200_000)
    ap.add_argument("--num-edges", type=int, default=2_000_000)
    ap.add_argument("--communities", type=int, default=256)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "parmetis.json")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="distpart-parmetis-"))
    try:
        # Two node types so that --balance-ntypes has something to balance; most edges stay
        # inside a community, which gives METIS a good cut to find.
        n_paper = args.num_nodes * 3 // 4
        meta = write_chunked_graph(
            work / "in", [NodeTypeSpec("paper", n_paper), NodeTypeSpec("author", args.num_nodes - n_paper)],
            [EdgeTypeSpec("paper:cites:paper", args.num_edges * 3 // 4, fmt="numpy"),
             EdgeTypeSpec("author:writes:paper", args.num_edges - args.num_edges * 3 // 4, fmt="parquet")],
            num_chunks=8, community=args.communities, seed=5)
        ref = read_whole_graph(meta)
        ntypes = ["paper", "author"]
        edges, in_degree, n = symmetric_simple(ref, ntypes)
        is_paper = (np.arange(n) < n_paper).astype(np.float64)
        print(f"graph: {n} nodes, {sum(len(s) for s, _ in ref['edges'].values())} input edges, "
              f"{len(edges)} undirected simple edges, {args.communities} communities; {args.ranks} ranks")

        rows = []
        for parts in args.parts:
            metis_part, metis_s = metis_partition(edges, n, parts)
            metis_cut = int((metis_part[edges[:, 0]] != metis_part[edges[:, 1]]).sum())
            for label, extra in (("plain", []), ("balance-ntypes+edges", ["--balance-ntypes", "--balance-edges"])):
                out = work / f"a_{parts}_{label}"
                assign_s, rss = run_assign(args, meta.parent, out, parts, extra)
                part = np.concatenate([np.loadtxt(out / f"{t}.txt", dtype=np.int64) for t in ntypes])
                cut = int((part[edges[:, 0]] != part[edges[:, 1]]).sum())
                row = {"parts": parts, "options": label, "cut": cut, "cut_fraction": round(cut / len(edges), 4),
                       "metis_cut": metis_cut, "cut_vs_metis": round(cut / metis_cut, 4),
                       "imbalance_nodes": round(imbalance(part, np.ones(n), parts), 4),
                       "imbalance_paper": round(imbalance(part, is_paper, parts), 4),
                       "imbalance_author": round(imbalance(part, 1 - is_paper, parts), 4),
                       "imbalance_edges": round(imbalance(part, in_degree.astype(np.float64), parts), 4),
                       "assign_s": assign_s, "peak_rss_mb": rss, "metis_serial_s": round(metis_s, 2)}
                rows.append(row)
        head = list(rows[0])
        widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in head]
        print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
        for r in rows:
            print("  ".join(str(r[h]).rjust(w) for h, w in zip(head, widths)))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"ranks": args.ranks, "num_nodes": n, "undirected_edges": len(edges),
                                         "rows": rows}, indent=2) + "\n")
        print(f"written {args.json}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

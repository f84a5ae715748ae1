"""Benchmark Step 1: edge cut, balance, time and memory of each assignment method, beside
serial METIS on the same graph.

For each graph (an RMAT power-law graph, a community graph, a torus mesh; all written by
distpart.synthetic in DGL's chunked format), it runs `distpart assign --method M` under
mpiexec and partitions the same symmetrized simple graph with serial METIS (pymetis, a
benchmark-only dependency: `pip install pymetis`). Cuts are counted on the symmetrized
simple graph for every method. With `--prep` it also measures the memory distpart itself
needs to build the partitioner's graph (build_csr), in bytes per input edge per rank.
Prints a table and writes it as JSON.

    python benchmarks/bench_assign.py --ranks 2 --parts 4 --num-nodes 200000 --num-edges 2000000
    python benchmarks/bench_assign.py --graphs rmat --num-nodes 2000000 --num-edges 20000000 --prep
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from common import mpi_env, mpiexec, print_table, run_distpart, stage, write_json
from distpart.synthetic import homogeneous_graph, mesh_graph, read_whole_graph, rmat_graph

GRAPHS = ("rmat", "community", "mesh")


def make_graph(kind: str, folder: Path, nodes: int, edges: int) -> Path:
    """The graph's folder, generated once (kept in --work-dir between runs)."""
    if (folder / "metadata.json").exists():
        return folder
    if kind == "rmat":
        rmat_graph(folder, nodes, edges, num_chunks=8, seed=1)
    elif kind == "community":
        homogeneous_graph(folder, nodes, edges, num_chunks=8, feat_dim=0, community=max(2, nodes // 1000), seed=1)
    else:
        mesh_graph(folder, nodes, num_chunks=8, seed=1)
    return folder


def symmetric_simple(folder: Path) -> "tuple[np.ndarray, int, List[str], np.ndarray, np.ndarray]":
    """(undirected simple edges u < v, vertex count, node types, homogeneous type offsets,
    input in-degree per vertex)."""
    meta = json.loads((folder / "metadata.json").read_text())
    ntypes = meta["node_type"]
    offsets = np.concatenate([[0], np.cumsum([sum(c) for c in meta["num_nodes_per_chunk"]])])
    ref = read_whole_graph(folder / "metadata.json")
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
    return np.stack([key // n, key % n], 1), n, ntypes, offsets, in_degree


def metis_partition(edges: np.ndarray, n: int, parts: int) -> "tuple[np.ndarray, float, float]":
    """Serial METIS (METIS_PartGraphKway, default options): (parts, seconds, peak RSS MB of this process)."""
    import pymetis
    both = np.concatenate([edges, edges[:, ::-1]])
    both = both[np.lexsort((both[:, 1], both[:, 0]))]
    xadj = np.concatenate([[0], np.cumsum(np.bincount(both[:, 0], minlength=n))])
    adjacency = pymetis.CSRAdjacency(xadj.astype(np.int32), both[:, 1].astype(np.int32))
    t0 = time.perf_counter()
    _, membership = pymetis.part_graph(parts, adjacency=adjacency)
    seconds = time.perf_counter() - t0
    return np.asarray(membership, dtype=np.int64), seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def imbalance(part: np.ndarray, parts: int, weights: Optional[np.ndarray] = None) -> float:
    loads = np.bincount(part, weights=weights, minlength=parts)
    return round(float(loads.max() / loads.mean()), 3)


def quality(part: np.ndarray, edges: np.ndarray, parts: int, ntypes: List[str], offsets: np.ndarray,
            in_degree: np.ndarray) -> dict:
    """Cut and the imbalance of every constraint distpart can balance (nodes, each node
    type, edges kept = in-degree)."""
    cut = int((part[edges[:, 0]] != part[edges[:, 1]]).sum())
    row = {"cut": cut, "cut_pct": round(100 * cut / max(len(edges), 1), 2),
           "imb_nodes": imbalance(part, parts), "imb_edges": imbalance(part, parts, in_degree.astype(np.float64))}
    if len(ntypes) > 1:
        row["imb_per_type"] = "/".join(
            f"{(lambda c: c.max() / c.mean())(np.bincount(part[offsets[t]:offsets[t + 1]], minlength=parts)):.3f}"
            for t in range(len(ntypes)))
    return row


def read_parts(assign_dir: Path, ntypes: List[str]) -> np.ndarray:
    return np.concatenate([np.loadtxt(assign_dir / f"{t}.txt", dtype=np.int64, ndmin=1) for t in ntypes])


def run_method(args, folder: Path, method: str, work: Path) -> dict:
    """One `distpart assign` run: its stats (assign wall time, peak RSS per rank)."""
    name, _, extra = method.partition(":")
    out = work / f"assign-{folder.name}-{method.replace(':', '_').replace(' ', '_')}"
    shutil.rmtree(out, ignore_errors=True)
    stats = run_distpart(args.ranks, ["assign", folder, out, "--num-parts", args.parts, "--method", name,
                                      "--seed", args.seed, *extra.split()], work / "stats.json")
    row = stage(stats, "assign")
    # KaMinPar runs in a child of rank 0: its memory is that child's, reported beside.
    return {"out": out, "assign_s": round(row["wall_s"], 2),
            "peak_rss_mb": "/".join(f"{x:.0f}" for x in row["peak_rss_mb"]),
            "child_rss_mb": f"{max(row['child_peak_rss_mb']):.0f}"}


def prep_worker(folder: str) -> None:
    """Under mpiexec: distpart's own memory for the partitioner's graph, per rank."""
    from mpi4py import MPI
    from distpart.assign.adjacency import build_csr
    from distpart.run.guards import return_freed_memory_to_the_os
    from distpart.chunked.metadata import load_metadata
    from distpart.assign.ordering import degrees, hubs_first

    return_freed_memory_to_the_os()  # as the distpart command does
    comm = MPI.COMM_WORLD
    meta = load_metadata(Path(folder))
    current = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
    t0 = time.perf_counter()
    # 32-bit indices where they fit, as a 32-bit ParMETIS (Debian's) or KaMinPar gets them.
    index = np.int32 if sum(meta.node_counts) < 2**31 and 2 * sum(meta.edge_counts) < 2**31 else np.int64
    # What parmetis_assignment prepares with the default --vertex-order degree.
    degree, in_degree = degrees(comm, meta)
    numbering = hubs_first(comm, degree)
    del degree
    csr = build_csr(comm, meta, index_dtype=index, numbering=numbering)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    held = csr.xadj.nbytes + csr.adjncy.nbytes + csr.in_degree.nbytes + in_degree.nbytes + numbering.new_ids.nbytes
    edges_per_rank = sum(meta.edge_counts) / comm.Get_size()
    rows = comm.gather({"prep_s": round(seconds, 2), "prep_mb": round((peak - current) / 2**20),
                        "prep_b_per_edge": round((peak - current) / edges_per_rank, 1),
                        "csr_b_per_edge": round(held / edges_per_rank, 1)}, root=0)
    if comm.Get_rank() == 0:
        print(json.dumps(rows))


def measure_prep(args, folder: Path) -> dict:
    proc = subprocess.run(mpiexec(args.ranks, ["--prep-worker", folder], script=Path(__file__)),
                          check=True, env=mpi_env(), capture_output=True, text=True)
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: "/".join(str(r[k]) for r in rows) for k in rows[0]}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prep-worker", help=argparse.SUPPRESS)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--graphs", default=",".join(GRAPHS), help=f"comma-separated, of {', '.join(GRAPHS)}")
    ap.add_argument("--methods", default="parmetis,kaminpar,random",
                    help="comma-separated methods; 'NAME:EXTRA OPTIONS' passes options to assign")
    ap.add_argument("--num-nodes", type=int, default=200_000)
    ap.add_argument("--num-edges", type=int, default=2_000_000, help="rmat and community (mesh: 2 per node)")
    ap.add_argument("--no-metis", action="store_true", help="skip serial METIS (no pymetis)")
    ap.add_argument("--prep", action="store_true", help="also measure build_csr's memory per input edge")
    ap.add_argument("--work-dir", type=Path, help="keeps generated graphs between runs (default: temporary)")
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "assign.json")
    args = ap.parse_args(argv)
    if args.prep_worker:
        prep_worker(args.prep_worker)
        return 0

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="distpart-assign-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, object]] = []
    try:
        for kind in args.graphs.split(","):
            folder = make_graph(kind, work / f"{kind}-{args.num_nodes}-{args.num_edges}", args.num_nodes, args.num_edges)
            edges, n, ntypes, offsets, in_degree = symmetric_simple(folder)
            print(f"{kind}: {n} nodes, {len(edges)} undirected simple edges, {len(ntypes)} node types", flush=True)
            base = {"graph": kind, "nodes": n, "simple_edges": len(edges)}
            if not args.no_metis:
                part, seconds, rss = metis_partition(edges, n, args.parts)
                rows.append({**base, "method": "METIS (serial)", **quality(part, edges, args.parts, ntypes, offsets, in_degree),
                             "assign_s": round(seconds, 2), "peak_rss_mb": f"{rss:.0f}"})
            for method in args.methods.split(","):
                try:
                    run = run_method(args, folder, method, work)
                except subprocess.CalledProcessError as e:
                    rows.append({**base, "method": method, "cut": f"failed (exit {e.returncode})"})
                    continue
                part = read_parts(run.pop("out"), ntypes)
                row = {**base, "method": method, **quality(part, edges, args.parts, ntypes, offsets, in_degree), **run}
                if args.prep and method.split(":")[0] in ("parmetis", "kaminpar") and method == args.methods.split(",")[0]:
                    row.update(measure_prep(args, folder))
                rows.append(row)
            print_table(rows)
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"{args.ranks} ranks, {args.parts} parts; cut = edges of the symmetrized simple graph whose ends "
          f"are in different partitions; peak RSS per rank of the assign stage; child_rss_mb: its largest "
          f"child process (KaMinPar runs in one, on rank 0); METIS: the whole benchmark process")
    print_table(rows)
    write_json(args.json, {"ranks": args.ranks, "parts": args.parts, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

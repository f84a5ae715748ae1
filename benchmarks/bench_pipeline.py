"""Benchmark `distpart pipeline`: per-stage wall time and peak RSS per rank.

Generates the input (the bundled example, or a homogeneous graph of the given size), runs
the pipeline under mpiexec, prints the stage table and writes it as JSON.

    python benchmarks/bench_pipeline.py --ranks 2 --num-nodes 1000000 --num-edges 10000000
    python benchmarks/bench_pipeline.py --ranks 2 --example
    python benchmarks/bench_pipeline.py --ranks 2 --num-nodes 2000000 --num-edges 20000000 --stages-apart

Peak RSS is a per-process high-water mark, so in one `pipeline` process verify's column
includes dispatch's peak. `--stages-apart` runs assign, dispatch and verify as separate
jobs and prints each stage's own peak per rank, and dispatch's beside verify's.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distpart.run.stages import format_stage_table
from distpart.synthetic import example_graph, homogeneous_graph
from common import mpi_env, mpiexec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--num-parts", type=int, help="default: the number of ranks (4 for --example)")
    ap.add_argument("--example", action="store_true", help="the bundled example graph (distpart example) instead of a homogeneous graph")
    ap.add_argument("--num-nodes", type=int, default=1_000_000)
    ap.add_argument("--num-edges", type=int, default=10_000_000)
    ap.add_argument("--num-chunks", type=int, default=8)
    ap.add_argument("--format", default="numpy", choices=["numpy", "csv", "parquet"])
    ap.add_argument("--feat-dim", type=int, default=16)
    ap.add_argument("--method", default="random", choices=["multilevel", "parmetis", "kaminpar", "random"])
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--work-dir", type=Path, help="default: a temporary folder, removed afterwards")
    ap.add_argument("--stages-apart", action="store_true",
                    help="run assign, dispatch and verify as separate jobs (each stage's own peak RSS)")
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "pipeline.json")
    args = ap.parse_args(argv)

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="distpart-bench-"))
    try:
        t0 = time.perf_counter()
        if args.example:
            meta = example_graph(work / "in")
            name, parts = "example", args.num_parts or 4
        else:
            meta = homogeneous_graph(work / "in", args.num_nodes, args.num_edges, num_chunks=args.num_chunks,
                                     fmt=args.format, feat_dim=args.feat_dim)
            name, parts = f"homogeneous {args.num_nodes} nodes / {args.num_edges} edges ({args.format})", \
                args.num_parts or args.ranks
        gen_s = time.perf_counter() - t0
        env = mpi_env()
        mpi = mpiexec(args.ranks, [])
        if args.stages_apart:
            jobs = [["assign", str(meta.parent), str(work / "assign"), "--num-parts", str(parts), "--method", args.method],
                    ["dispatch", str(meta.parent), str(work / "assign"), str(work / "out")],
                    ["verify", str(meta.parent), str(work / "assign"), str(work / "out")]]
        else:
            jobs = [["pipeline", str(meta.parent), str(work / "out"), "--num-parts", str(parts),
                     "--method", args.method] + (["--no-verify"] if args.no_verify else [])]
        t0 = time.perf_counter()
        stats = {"ranks": args.ranks, "stages": []}
        peaks = {}
        for i, job in enumerate(jobs):
            stats_path = work / f"stats{i}.json"
            subprocess.run(mpi + job + ["--stats-json", str(stats_path), "--quiet"], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            job_stats = json.loads(stats_path.read_text())
            stats["stages"] += job_stats["stages"]
            peaks[job[0]] = [max(row["peak_rss_mb"][r] for row in job_stats["stages"]) for r in range(args.ranks)]
        total_s = time.perf_counter() - t0
        if args.stages_apart:
            stats["peak_rss_mb_per_job"] = peaks
        result = {"graph": name, "method": args.method, "ranks": args.ranks, "num_parts": parts, "generate_s": round(gen_s, 2),
                  "mpiexec_wall_s": round(total_s, 2), **stats}
        print(f"{name}: {args.method}, {args.ranks} ranks, {parts} partitions; mpiexec wall {total_s:.2f} s "
              f"(input generated in {gen_s:.1f} s)")
        print(format_stage_table(stats))
        if args.stages_apart:
            d, v = peaks["dispatch"], peaks["verify"]
            print(f"peak RSS per rank (MB): dispatch {d}, verify {v}; verify within dispatch's: "
                  f"{'yes' if all(a <= b for a, b in zip(v, d)) else 'NO'}")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written {args.json}")
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

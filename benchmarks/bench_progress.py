"""Check live progress: during `mpiexec -n R distpart pipeline`, lines with `ETA` must reach
stderr at least every 10 s. Prints the stage lines with arrival times, the number of ETA
lines and the largest gap between them (counting the start and the end of the run), and
writes them as JSON.

    python benchmarks/bench_progress.py --ranks 2 --num-nodes 2000000 --num-edges 20000000
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

from distpart.synthetic import homogeneous_graph
from common import mpi_env, mpiexec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--num-parts", type=int, default=4)
    ap.add_argument("--num-nodes", type=int, default=2_000_000)
    ap.add_argument("--num-edges", type=int, default=20_000_000)
    ap.add_argument("--method", default="parmetis", choices=["parmetis", "random"])
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "progress.json")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="distpart-progress-"))
    try:
        meta = homogeneous_graph(work / "in", args.num_nodes, args.num_edges, num_chunks=4)
        env = mpi_env()
        cmd = mpiexec(args.ranks, ["pipeline", meta.parent, work / "out", "--num-parts", args.num_parts,
                                   "--method", args.method])
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        eta_at = []
        for line in proc.stderr:
            t = time.perf_counter() - t0
            if "ETA" in line:
                eta_at.append(round(t, 1))
            elif "stage " in line:
                print(f"{t:7.1f}  {line.rstrip()}")
        proc.wait()
        end = time.perf_counter() - t0
        marks = [0.0] + eta_at + [end]
        gap = max(b - a for a, b in zip(marks, marks[1:]))
        result = {"ranks": args.ranks, "num_nodes": args.num_nodes, "num_edges": args.num_edges,
                  "method": args.method, "exit_status": proc.returncode, "run_s": round(end, 1),
                  "eta_lines": len(eta_at), "eta_line_times_s": eta_at, "largest_gap_s": round(gap, 1)}
        print(f"exit {proc.returncode}; {len(eta_at)} ETA lines in {end:.1f} s; largest gap between them "
              f"(counting start and end) {gap:.1f} s: {'OK' if gap <= 10 else 'TOO LONG'} (target <= 10 s)")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        return 0 if proc.returncode == 0 and gap <= 10 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

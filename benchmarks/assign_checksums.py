"""Checksums of `distpart assign` outputs: the sha256 of every assignment file each method
writes on the 200k benchmark graphs with a fixed seed, so that a refactoring of Step 1 can
show its partitions are byte-identical before and after (compare two JSON files).

    python benchmarks/assign_checksums.py --work-dir /var/tmp/bench-main --json before.json
    python benchmarks/assign_checksums.py --ranks 1 --methods multilevel,multilevel-fetch
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).parent))
from bench_graphs import build, info  # noqa: E402
from common import mpi_env, mpiexec  # noqa: E402

GRAPHS = ["rmat-200k", "community-200k", "mesh-200k"]
METHODS = ["multilevel", "multilevel-fetch", "parmetis", "random", "kaminpar"]


def method_options(method: str, graph_info: dict) -> List[str]:
    """`distpart assign` options of a row: the method, and the fetch objective's training mask."""
    if method == "multilevel-fetch":
        return ["--method", "multilevel", "--objective", "fetch", "--train-mask", graph_info["train_mask"]]
    return ["--method", method]


def checksums(folder: Path) -> Dict[str, str]:
    """sha256 of every assignment file (`<ntype>.txt`, partition_meta.json), by name; not the
    run's own records (.distpart-*), which hold times and process IDs."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.startswith(".")}


def run_row(graph: Path, method: str, ranks: int, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    argv = ["assign", graph, out, "--num-parts", 4, "--seed", 1, *method_options(method, info(graph)), "--quiet"]
    proc = subprocess.run(mpiexec(ranks, argv), env=mpi_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        error = next((ln for ln in proc.stderr.splitlines() if "error:" in ln), proc.stderr.strip()[-500:])
        return {"exit": proc.returncode, "error": error}
    return {"exit": 0, "files": checksums(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work-dir", type=Path, default=Path("/var/tmp/bench-main"))
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the checksums here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="distpart-checksums-"))
    result: Dict[str, Dict[str, dict]] = {}
    try:
        for name in args.graphs.split(","):
            graph = build(name, args.work_dir)
            for method in args.methods.split(","):
                row = run_row(graph, method, args.ranks, tmp / "out")
                result.setdefault(name, {})[method] = row
                print(name, method, json.dumps(row, sort_keys=True), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        print(f"written {args.json}")


if __name__ == "__main__":
    main()

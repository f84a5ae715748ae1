"""Benchmark feature reading: wall time and peak RSS per rank, by file format and layout.

Writes one graph (1 node type, `--rows` nodes, `--edges` NumPy edges) with a float32
feature of width `--dim` in one file per variant, then for each variant:

* `read`: every rank reads its block of the feature with `FeatureSource.read` in batches,
  as dispatch does (`_batch_rows` of `--max-message-mb`), under `mpiexec -n --ranks`;
* `pipeline`: `distpart pipeline --no-verify` under mpiexec; the `nodes` stage's wall time
  and peak RSS (a per-process high-water mark, so at least the stages before it).

    python benchmarks/bench_readers.py                       # 1M x 16, 2 ranks, 256 and 16 MB messages
    python benchmarks/bench_readers.py --variants numpy parquet-1rg --max-message-mb 256
    python benchmarks/bench_readers.py --json benchmarks/results/readers_before.json
    PYTHONPATH=/path/to/old/checkout python benchmarks/bench_readers.py ...   # another distpart

Variants: numpy (.npy); parquet-1rg (one column per element, one row group); parquet-64k
(row groups of 65536 rows); parquet-list-64k (DGL's single list<float> column, "vector
rows"); csv (comma-separated text, read as float64 as DGL does, so its rows are twice as
wide). A variant the reader refuses is reported as an error. Wall times on a shared machine
vary by tens of milliseconds; each number is the median of `--repeat` runs.
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
from typing import Dict, List

import numpy as np
from common import mpi_env, mpiexec

VARIANTS = ("numpy", "parquet-1rg", "parquet-64k", "parquet-list-64k", "csv")


def write_variant(root: Path, variant: str, rows: int, dim: int, edges: int) -> Path:
    """A graph whose only feature `_N/feat` is stored as `variant`; returns its folder."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    from distpart.synthetic import EdgeTypeSpec, FeatureSpec, NodeTypeSpec, feature_values, write_chunked_graph

    folder = root / variant
    meta_path = write_chunked_graph(folder, [NodeTypeSpec("_N", rows)],
                                    [EdgeTypeSpec("_N:_E:_N", edges, fmt="numpy")],
                                    num_chunks=1, graph_name="bench_readers")
    values = feature_values(FeatureSpec("_N", "feat", "float32", (dim,)), np.arange(rows, dtype=np.int64))
    fmt: Dict[str, str] = {"name": "parquet"}
    if variant == "numpy":
        path, fmt = folder / "node_data" / "feat.npy", {"name": "numpy"}
        np.save(path, values)
    elif variant in ("parquet-1rg", "parquet-64k"):
        path = folder / "node_data" / "feat.parquet"
        table = pa.table({str(j): values[:, j] for j in range(dim)})
        table = table.replace_schema_metadata({b"shape": str(values.shape).encode()})
        pq.write_table(table, path, row_group_size=rows if variant == "parquet-1rg" else 65536)
    elif variant == "parquet-list-64k":
        path = folder / "node_data" / "feat.parquet"
        offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * dim)
        vec = pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1)))
        pq.write_table(pa.table({"vector": vec}), path, row_group_size=65536)
    elif variant == "csv":
        path, fmt = folder / "node_data" / "feat.csv", {"name": "csv", "delimiter": ","}
        pacsv.write_csv(pa.table({str(j): values[:, j] for j in range(dim)}), path,
                        pacsv.WriteOptions(include_header=False, delimiter=","))
    else:
        raise ValueError(f"unknown variant {variant!r}")
    meta = json.loads(meta_path.read_text())
    meta["node_data"] = {"_N": {"feat": {"format": fmt, "data": [path.relative_to(folder).as_posix()]}}}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return folder


def worker(folder: str, max_mb: int, out: str) -> None:
    """Run under mpiexec: read this rank's block of `_N/feat` in dispatch's batches."""
    from mpi4py import MPI
    from distpart.dispatch.dispatch import _batch_rows
    from distpart.chunked.metadata import load_metadata
    from distpart.chunked.readers import FeatureSource, block_bounds

    comm = MPI.COMM_WORLD
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    comm.Barrier()
    t0 = time.perf_counter()
    error = None
    try:
        meta = load_metadata(folder)
        source = FeatureSource(meta.node_features("_N")["feat"])
        lo, hi = (int(x) for x in block_bounds(source.rows, comm.Get_size())[comm.Get_rank():comm.Get_rank() + 2])
        batch = _batch_rows(source.row_bytes, max_mb << 20)
        check = 0.0
        for a in range(lo, hi, batch):
            rows = source.read(a, min(a + batch, hi))
            check += float(rows[:1].sum()) if len(rows) else 0.0
    except Exception as e:  # noqa: BLE001 - a refused variant is a result, not a crash
        error = f"{type(e).__name__}: {e}"
    wall = time.perf_counter() - t0
    comm.Barrier()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    everyone = comm.gather({"wall_s": wall, "peak_rss_mb": peak, "base_rss_mb": base, "error": error}, root=0)
    if comm.Get_rank() == 0:
        Path(out).write_text(json.dumps(everyone))


def run_read(folder: Path, ranks: int, max_mb: int, work: Path) -> dict:
    out = work / "read.json"
    cmd = mpiexec(ranks, ["--worker", folder, "--max-message-mb", max_mb, "--worker-out", out], script=Path(__file__))
    subprocess.run(cmd, check=True, env=mpi_env(), cwd=work)   # not the checkout: -m would import it
    per_rank = json.loads(out.read_text())
    errors = [r["error"] for r in per_rank if r["error"]]
    return {"wall_s": round(max(r["wall_s"] for r in per_rank), 3),
            "peak_rss_mb": [round(r["peak_rss_mb"], 1) for r in per_rank],
            "base_rss_mb": [round(r["base_rss_mb"], 1) for r in per_rank],
            "error": errors[0] if errors else None}


def run_pipeline(folder: Path, ranks: int, max_mb: int, work: Path) -> dict:
    out_dir, stats = work / "out", work / "stats.json"
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = mpiexec(ranks, ["pipeline", folder, out_dir, "--num-parts", ranks, "--method", "random", "--no-verify",
                          "--max-message-mb", max_mb, "--stats-json", stats, "--quiet"])
    proc = subprocess.run(cmd, env=mpi_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=work)
    if proc.returncode != 0:
        said = [line for line in proc.stderr.splitlines() if "error:" in line]
        return {"error": (said or proc.stderr.strip().splitlines() or ["failed"])[0]}
    rows = json.loads(stats.read_text())["stages"]
    nodes = next(r for r in rows if r["stage"] == "nodes")
    before = rows[rows.index(nodes) - 1]
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"wall_s": nodes["wall_s"], "peak_rss_mb": nodes["peak_rss_mb"],
            "peak_rss_mb_before_nodes": before["peak_rss_mb"], "error": None}


def _median(runs: List[dict]) -> dict:
    """The run of median wall time (peaks barely vary between runs), with every wall time."""
    if any(r.get("error") for r in runs):
        return next(r for r in runs if r.get("error"))
    ordered = sorted(runs, key=lambda r: r["wall_s"])
    return {**ordered[len(ordered) // 2], "wall_s_runs": [r["wall_s"] for r in runs]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--max-message-mb", type=int, nargs="+", default=[256, 16])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--modes", nargs="+", default=["read", "pipeline"], choices=["read", "pipeline"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median wall time is kept")
    ap.add_argument("--work-dir", type=Path, help="default: a temporary folder, removed afterwards")
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "readers.json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.max_message_mb[0], args.worker_out)
        return 0

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="distpart-bench-readers-"))
    results: List[dict] = []
    try:
        for variant in args.variants:
            t0 = time.perf_counter()
            folder = write_variant(work / "in", variant, args.rows, args.dim, args.edges)
            size = sum(p.stat().st_size for p in (folder / "node_data").iterdir())
            print(f"{variant}: written in {time.perf_counter() - t0:.1f} s, {size / 2**20:.1f} MiB", flush=True)
            for max_mb in args.max_message_mb:
                for mode in args.modes:
                    run = run_read if mode == "read" else run_pipeline
                    runs = [run(folder, args.ranks, max_mb, work) for _ in range(args.repeat)]
                    results.append({"variant": variant, "mode": mode, "max_message_mb": max_mb,
                                    **_median(runs)})
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)

    head = f"{'variant':<18} {'mode':<9} {'msg_mb':>6} {'wall_s':>8}  peak_rss_mb per rank"
    print(f"\n{args.rows} x {args.dim} float32, {args.ranks} ranks, median of {args.repeat} runs\n{head}")
    for r in results:
        if r.get("error"):
            cells = f"{'-':>8}  error: {r['error'][:90]}"
        else:
            cells = f"{r['wall_s']:>8.3f}  " + " ".join(f"{v:>7.1f}" for v in r["peak_rss_mb"])
        print(f"{r['variant']:<18} {r['mode']:<9} {r['max_message_mb']:>6} {cells}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    import distpart
    args.json.write_text(json.dumps({"rows": args.rows, "dim": args.dim, "ranks": args.ranks, "edges": args.edges,
                                     "repeat": args.repeat, "distpart": str(Path(distpart.__file__).parent),
                                     "results": results}, indent=2) + "\n")
    print(f"written {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark `distpart pipeline` at scale: per-stage wall time, peak RSS per rank, bytes per
input edge, the cut, and the memory guard's estimate beside each measured peak.

The input is an RMAT graph (`synthetic.rmat_graph`: node types user and item, three edge
types) with a 16-float node feature on both node types and a float32 edge feature on every
edge type, in Parquet chunks. It is generated once per (edges, nodes, seed) under
--work-dir and reused; generation streams one chunk at a time (at most ~4M edges of one
type in memory), so a 200M-edge graph is written in bounded memory.

    python benchmarks/bench_scale.py --generate-only --edges 200m         # the input alone
    python benchmarks/bench_scale.py --edges 20m --ranks 2                # results/scale_20m.json
    python benchmarks/bench_scale.py --edges 20m --ranks 2 --stages-apart # each stage's own peak
    python benchmarks/bench_scale.py --weak --edges-per-rank 5m           # R = 1, 2, 4
    python benchmarks/bench_scale.py --fit results/scale_20m.json ...     # refit the guard's constants

Peak RSS is a per-process high-water mark: in one `pipeline` process a stage's column is the
peak so far, so a stage that needs less than an earlier one shows the earlier peak. The
guard's estimate is compared the same way (the largest estimate of the stages so far);
`--stages-apart` runs assign, dispatch and verify as separate jobs instead, so each
stage's own peak is measured (what `--fit` needs to fit one stage's constants).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from distpart.chunked.estimate import DISPATCH_STAGES, STAGE_MODELS, estimate_stage_peaks, feature_bytes
from distpart.chunked.metadata import load_metadata
from distpart.synthetic import FeatureSpec, rmat_graph
from common import mpi_env, mpiexec, print_table, write_json

RESULTS = Path(__file__).parent / "results"
FEAT_DIM = 16
EDGE_TYPES = ("user:follows:user", "user:buys:item", "item:similar:item")
# The largest chunk of one edge type: what the generator holds at once (RMAT: ~50 B/edge).
MAX_CHUNK_EDGES = 4_000_000
# Stages whose estimate the guard computes, by the name `distpart` logs them under.
MODELLED = ("assign", "dispatch", "verify")


def parse_count(text: str) -> int:
    """'200m' -> 200_000_000, '12.5M' -> 12_500_000, '5k', '1g', '1000'."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgb]?)\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"expected a count like 200m, 5m, 20k or 1000, got {text!r}")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9}[m.group(2)]
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole count of at least 1, got {text!r}")
    return int(value)


def size_name(n: int) -> str:
    """200_000_000 -> '200m', 5_000_000 -> '5m', 20_000 -> '20k' (file names)."""
    for div, unit in ((10**9, "g"), (10**6, "m"), (10**3, "k")):
        if n >= div and n % (div // 10) == 0:
            return f"{n / div:g}{unit}"
    return str(n)


def default_nodes(edges: int) -> int:
    """16 edges per node: the issue's 12.5M nodes for 200M edges."""
    return max(16, edges // 16)


def scale_features() -> List[FeatureSpec]:
    feats = [FeatureSpec(nt, "feat", "float32", (FEAT_DIM,), fmt="parquet") for nt in ("user", "item")]
    return feats + [FeatureSpec(et, "weight", "float32", (), fmt="parquet") for et in EDGE_TYPES]


def num_chunks(edges: int) -> int:
    # user:follows:user holds 40% of the edges; at least 4 chunks so every rank count reads.
    return max(4, math.ceil(0.4 * edges / MAX_CHUNK_EDGES))


def generate(work_dir: Path, edges: int, nodes: int, seed: int) -> Path:
    """The input folder (generated now unless a complete one is cached there)."""
    folder = work_dir / f"rmat-{size_name(edges)}e-{size_name(nodes)}n-s{seed}"
    if (folder / "metadata.json").exists():  # written last: its presence means complete
        print(f"input cached: {folder}", flush=True)
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    print(f"generating {edges} edges, {nodes} nodes (seed {seed}) in {folder} ...", flush=True)
    rmat_graph(folder, nodes, edges, num_chunks=num_chunks(edges), fmt="parquet", seed=seed,
               features=scale_features())
    print(f"generated in {time.perf_counter() - t0:.1f} s", flush=True)
    return folder


def _cut(stdout: str) -> Optional[dict]:
    m = re.search(r"edge cut: (\d+) of (\d+) edges", stdout)
    return {"edge_cut": int(m.group(1)), "edges": int(m.group(2)),
            "edge_cut_fraction": round(int(m.group(1)) / max(1, int(m.group(2))), 6)} if m else None


BALANCE_FLAGS = {"default": [], "nodes": ["--no-balance-ntypes", "--no-balance-edges"]}


def run_jobs(in_dir: Path, out: Path, ranks: int, parts: int, method: str, stages_apart: bool,
             balance: str = "default") -> tuple:
    """Run the pipeline (or its three commands); return (stats, cut, mpiexec wall seconds)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if stages_apart:
        assign = out / "assignment"
        jobs = [["assign", in_dir, assign, "--num-parts", parts, "--method", method, *BALANCE_FLAGS[balance]],
                ["dispatch", in_dir, assign, out / "parts"],
                ["verify", in_dir, assign, out / "parts"]]
    else:
        jobs = [["pipeline", in_dir, out / "parts", "--num-parts", parts, "--method", method, *BALANCE_FLAGS[balance]]]
    stats: dict = {"ranks": ranks, "stages": []}
    cut = None
    t0 = time.perf_counter()
    verified = []
    for i, job in enumerate(jobs):
        path = out / f"stats{i}.json"
        # The progress lines also go to a file, to follow a run of an hour while it runs.
        run = subprocess.run(mpiexec(ranks, [*job, "--stats-json", path, "--log-file", out / f"log{i}.txt"]),
                             env=mpi_env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if run.returncode != 0:
            sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
            raise SystemExit(f"{job[0]} failed with exit {run.returncode}")
        cut = cut or _cut(run.stdout)
        verified += [line for line in run.stdout.splitlines() if line.startswith("verify: ")]
        job_stats = json.loads(path.read_text())
        for row in job_stats["stages"]:
            row["job"] = str(job[0])
        stats["stages"] += job_stats["stages"]
    stats["verify"] = verified[-1] if verified else None   # the check's own line ("verify: OK (...)")
    return stats, cut, time.perf_counter() - t0


def balance_columns(balance: str, meta) -> int:
    """The constraint columns Step 1 balances under `--balance` (what the guard is told)."""
    from distpart.assign.balance import BalanceOptions
    return len(BalanceOptions(ntypes=balance == "default", edges=balance == "default").names(meta))


def stage_rows(stats: dict, in_dir: Path, ranks: int, parts: int, method: str, balance: str = "default") -> List[dict]:
    """Per stage: wall, peak per rank, B/edge (summed peak / input edges), the guard's
    estimate of the largest rank's peak so far in its job, and measured/estimate."""
    meta = load_metadata(in_dir)
    edges = sum(meta.edge_counts)
    est = estimate_stage_peaks(meta, ranks, method, columns=balance_columns(balance, meta))
    rows, job, est_so_far = [], None, 0
    for row in stats["stages"]:
        if row.get("job") != job:  # a new process: its high-water mark starts again
            job, est_so_far = row.get("job"), 0
        peaks = row["peak_rss_mb"]
        out = {"stage": row["stage"], "wall_s": row["wall_s"], "peak_rss_mb": peaks,
               "max_peak_mb": max(peaks), "bytes_per_edge": round(sum(peaks) * 2**20 / edges, 1)}
        model = "dispatch" if row["stage"] in DISPATCH_STAGES else row["stage"]
        if model in est:
            est_so_far = max(est_so_far, est[model])
        if est_so_far:
            out["estimate_mb"] = round(est_so_far / 2**20, 1)
            out["measured_over_estimate"] = round(max(peaks) * 2**20 / est_so_far, 3)
        if job != "pipeline":
            out["job"] = job
        rows.append(out)
    return rows


def measure(args: argparse.Namespace, edges: int, ranks: int, label: str) -> dict:
    nodes = args.nodes or default_nodes(edges)
    in_dir = generate(args.work_dir, edges, nodes, args.seed)
    parts = args.num_parts or ranks
    out = args.work_dir / f"out-{label}"
    print(f"running {'assign/dispatch/verify' if args.stages_apart else 'pipeline'} on {ranks} ranks, "
          f"{parts} partitions, --method {args.method} ...", flush=True)
    stats, cut, wall = run_jobs(in_dir, out, ranks, parts, args.method, args.stages_apart, args.balance)
    rows = stage_rows(stats, in_dir, ranks, parts, args.method, args.balance)
    result = {"graph": f"rmat {nodes} nodes / {edges} edges, 2 node types, {FEAT_DIM}-float node feature, "
                       f"float32 edge feature, parquet", "nodes": nodes, "edges": edges, "seed": args.seed,
              "method": args.method, "balance": args.balance, "ranks": ranks, "num_parts": parts,
              "stages_apart": args.stages_apart,
              "feature_bytes": feature_bytes(load_metadata(in_dir)),
              "mpiexec_wall_s": round(wall, 1), "cut": cut, "verify": stats.get("verify"), "stages": rows,
              "commit": code_commit(),
              "command": command_line(args, edges, ranks)}
    print(f"{result['graph']}: {args.method}, {ranks} ranks; mpiexec wall {wall:.1f} s; cut {cut}")
    print_table([{**r, "peak_rss_mb": " ".join(f"{v:.0f}" for v in r["peak_rss_mb"])} for r in rows])
    if not args.keep_output:
        shutil.rmtree(out, ignore_errors=True)
    # Each run kept on its own too: a series cut short keeps its runs (--weak-from rebuilds it).
    write_json(args.work_dir / f"result-{label}.json", result)
    return result


def code_commit() -> Optional[str]:
    """The commit of the code that ran (short hash; DISTPART_COMMIT for a copy outside git)."""
    if os.environ.get("DISTPART_COMMIT"):
        return os.environ["DISTPART_COMMIT"]
    run = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return (run.stdout.strip() or None) if run.returncode == 0 else None


def command_line(args: argparse.Namespace, edges: int, ranks: int) -> str:
    parts = [f"python benchmarks/bench_scale.py --edges {size_name(edges)} --ranks {ranks}"]
    if args.nodes:
        parts.append(f"--nodes {size_name(args.nodes)}")
    if args.num_parts:
        parts.append(f"--num-parts {args.num_parts}")
    if args.method != "multilevel":
        parts.append(f"--method {args.method}")
    if args.stages_apart:
        parts.append("--stages-apart")
    if args.balance != "default":
        parts.append(f"--balance {args.balance}")
    return " ".join(parts)


def weak(args: argparse.Namespace) -> dict:
    """R = 1, 2, 4 with args.edges_per_rank edges per rank: the largest rank's peak per stage."""
    return weak_result([measure(args, args.edges_per_rank * r, r, f"weak-{r}") for r in args.weak_ranks])


def weak_result(runs: Sequence[dict]) -> dict:
    """The weak-scaling table of single runs (`measure`'s results, as many edges per rank each)."""
    per_rank = {run["edges"] // run["ranks"] for run in runs}
    if len(per_rank) != 1:
        raise SystemExit(f"weak scaling needs the same edges per rank in every run, got {sorted(per_rank)}")
    edges_per_rank = per_rank.pop()
    stages = list(dict.fromkeys(s["stage"] for run in runs for s in run["stages"]))
    table = []
    for name in stages:
        row = {"stage": name}
        for run in runs:
            s = next((s for s in run["stages"] if s["stage"] == name), None)
            row[f"R={run['ranks']} max_peak_mb"] = s["max_peak_mb"] if s else None
            row[f"R={run['ranks']} wall_s"] = s["wall_s"] if s else None
        peaks = [row[f"R={r['ranks']} max_peak_mb"] for r in runs if row[f"R={r['ranks']} max_peak_mb"]]
        row["spread"] = round(max(peaks) / min(peaks) - 1, 3) if peaks else None
        table.append(row)
    print(f"weak scaling, {edges_per_rank} edges per rank (largest rank's peak so far, MiB; "
          f"spread = max/min - 1 over R):")
    print_table(table)
    return {"edges_per_rank": edges_per_rank, "ranks": [run["ranks"] for run in runs], "table": table,
            "runs": list(runs),
            "command": f"python benchmarks/bench_scale.py --weak --edges-per-rank {size_name(edges_per_rank)}"}


def model_key(stage: str, method: str) -> Optional[str]:
    """The guard's model of a logged stage: "assign/<method>", "dispatch", "verify" or None."""
    if stage == "assign":
        return f"assign/{method}"
    if stage in DISPATCH_STAGES:
        return "dispatch"
    return stage if stage in MODELLED else None


def fit(paths: Sequence[Path]) -> Dict[str, float]:
    """Print, per modelled stage, the bytes per input edge summed over ranks that the measured
    peaks imply once the model's fixed, per-node and feature parts are taken off (the largest
    over the runs: an estimate must not fall short), beside the current constant."""
    from distpart.chunked.estimate import BASE_BYTES
    per_stage: Dict[str, List[float]] = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        for run in data.get("runs", [data]):
            so_far = 0.0
            job = None
            for row in run["stages"]:
                if row.get("job") != job:
                    job, so_far = row.get("job"), 0.0
                key = model_key(row["stage"], run["method"])
                own = row["max_peak_mb"] > so_far  # only a peak that rose is this stage's own
                so_far = max(so_far, row["max_peak_mb"])
                if key is None or not own:
                    continue
                model = STAGE_MODELS[key]
                if key.startswith("assign/") and run.get("balance", "default") != "nodes":
                    key += " multi"   # Step 1 balancing several columns: per_edge_multi
                rank_bytes = row["max_peak_mb"] * 2**20 - BASE_BYTES
                spread = 1 if model.whole_graph else run["ranks"]
                rest = model.per_node * run["nodes"] + model.features * run.get("feature_bytes", 0)
                per_stage.setdefault(key, []).append((rank_bytes * spread - rest) / run["edges"])
    fitted = {}
    for key, values in sorted(per_stage.items()):
        fitted[key] = round(max(values), 1)
        model = STAGE_MODELS[key.split()[0]]
        current = model.per_edge_multi if key.endswith(" multi") else model.per_edge
        print(f"{key:<26} per_edge fitted {fitted[key]:7.1f}  current {current or 0:7.1f}  "
              f"(from {len(values)} measurements: {', '.join(f'{v:.1f}' for v in values)})")
    return fitted


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=parse_count, default=parse_count("20m"), help="input edges (200m, 20m, 5m...)")
    ap.add_argument("--nodes", type=parse_count, help="input nodes (default: edges / 16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--num-parts", type=int, help="default: the number of ranks")
    ap.add_argument("--method", default="multilevel", choices=["multilevel", "parmetis", "kaminpar", "random"])
    ap.add_argument("--balance", choices=sorted(BALANCE_FLAGS), default="default",
                    help="the constraints Step 1 balances: distpart's default (node types and edges) or "
                         "node counts only (--no-balance-ntypes --no-balance-edges)")
    ap.add_argument("--work-dir", type=Path, default=Path("/var/tmp/scale"),
                    help="inputs (cached) and outputs (default /var/tmp/scale)")
    ap.add_argument("--generate-only", action="store_true", help="write the input and stop")
    ap.add_argument("--stages-apart", action="store_true",
                    help="run assign, dispatch and verify as separate jobs (each stage's own peak)")
    ap.add_argument("--weak", action="store_true", help="weak scaling: R = 1, 2, 4 at --edges-per-rank")
    ap.add_argument("--edges-per-rank", type=parse_count, default=parse_count("5m"))
    ap.add_argument("--weak-ranks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--keep-output", action="store_true", help="keep the partitions under --work-dir")
    ap.add_argument("--fit", type=Path, nargs="+", metavar="RESULTS_JSON",
                    help="print the guard's per-stage constants these results imply, and stop")
    ap.add_argument("--weak-from", type=Path, nargs="+", metavar="RUN_JSON",
                    help="build the weak-scaling result from single runs' results files instead of running")
    ap.add_argument("--json", type=Path, help="default: results/scale_<edges>[_r<R>|_weak_<E>].json")
    args = ap.parse_args(argv)
    if args.fit:
        fit(args.fit)
        return 0
    if args.generate_only:
        generate(args.work_dir, args.edges, args.nodes or default_nodes(args.edges), args.seed)
        return 0
    if args.weak or args.weak_from:
        result = weak_result([json.loads(p.read_text()) for p in args.weak_from]) if args.weak_from else weak(args)
        name = f"scale_weak_{size_name(result['edges_per_rank'])}"
    else:
        result = measure(args, args.edges, args.ranks, f"{size_name(args.edges)}-r{args.ranks}")
        name = f"scale_{size_name(args.edges)}" + (f"_r{args.ranks}" if args.ranks != 2 else "")
    if args.method != "multilevel":
        name += f"_{args.method}"
    if args.balance == "default":
        name += "_default"   # node-count runs came first and kept the plain names
    if args.stages_apart:
        name += "_apart"
    write_json(args.json or RESULTS / f"{name}.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

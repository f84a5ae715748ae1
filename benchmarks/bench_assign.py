"""Benchmark Step 1: what each assignment method costs distributed training, beside serial
METIS references, on every graph and constraint set (issue 19).

Graphs (bench_graphs.py; each has 2 node types and two training masks that follow its
structure, about 10% and 1% of the first type): RMAT 200k/2M and 2M/20M, a Chung-Lu
power-law graph with 100 planted communities, the 2-D torus mesh, and the Debian package
dependency graph built from apt's Packages index (run `apt-get update` first).

Constraint sets, as `distpart assign` options:
  C0  node counts only
  C1  every node type (--balance-ntypes)
  C2  C1 + the 10% train mask (--balance-feature NTYPE/train_mask)
  C3  C2 + edges, as in-degree per node type (--balance-edges)
  C2s, C3s  as C2, C3 with the 1% mask (NTYPE/sparse_train_mask)

Methods: distpart's `--method` names (multilevel, parmetis, kaminpar, random; `NAME:EXTRA
OPTIONS` passes options to assign), each under `mpiexec -n R` for every R of --ranks; a
failed run is recorded as "failed (exit N)", a refused one as "n/a (refused)" (kaminpar
takes one constraint), and the suite goes on. Serial references, through our ctypes binding
to the system libmetis 5 (distpart.assign.metis), each in its own process:
  "METIS k-way"                METIS_PartGraphKway, C0
  "METIS recursive bisection"  METIS_PartGraphRecursive, C0
  "METIS k-way ncon"           METIS_PartGraphKway with one vertex-weight column per
                               constraint of the set (distpart's own columns), C1 and up
all on the symmetrized simple graph, ubvec = --imbalance, seed = --seed.

Quality is computed the same way for every method from its assignment files, with the
report's functions (distpart.check.report): cut % on the symmetrized simple graph; halo
(total and largest) as DGL's partitions hold them (each partition keeps every in-edge of its
nodes; its halo is their distinct sources owned elsewhere); the largest partition's share of
the input's edges; the imbalance (max/avg) of nodes, each type, both masks and edges; and
the "moved" seeds: training nodes DGL's even split (node_split, force_even=True) hands to
another partition's trainer. Time is the assign stage's wall time (METIS: its call);
peak RSS is per rank at the end of the assign stage (METIS: its whole process, graph
included; KaMinPar's own process on rank 0 is shown apart).

    python benchmarks/bench_assign.py --graphs small --work-dir /var/tmp/bench   # 200k graphs + debian
    python benchmarks/bench_assign.py --graphs rmat-2m --ranks 1,2,4 --work-dir /var/tmp/bench
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from bench_graphs import build, graph_names, info as graph_info
from assign_tables import imbalance_cells
from common import mpi_env, mpiexec, print_table, write_json
from distpart.check.report import imbalance, partition_loads, seed_split, training_costs

CONSTRAINT_SETS = ("C0", "C1", "C2", "C3", "C2s", "C3s")
DEFAULT_CONSTRAINTS = "C0,C1,C2,C3,C2s"
# Reference key -> the name printed, exactly.
REFERENCES = {"metis-kway": "METIS k-way", "metis-rb": "METIS recursive bisection",
              "metis-ncon": "METIS k-way ncon"}
DEFAULT_METHODS = "multilevel,parmetis,kaminpar,random,metis-kway,metis-rb,metis-ncon"


@dataclass
class Graph:
    """One benchmark graph in memory as the quality functions need it (homogeneous IDs)."""

    name: str
    folder: Path
    ntypes: List[str]
    offsets: np.ndarray                 # type t is homogeneous IDs [offsets[t], offsets[t+1])
    src: np.ndarray                     # the input's directed edges
    dst: np.ndarray
    lo: np.ndarray                      # the symmetrized simple graph's edges, lo < hi
    hi: np.ndarray
    masks: Dict[str, np.ndarray]        # "train"/"sparse" -> homogeneous IDs of training nodes
    specs: Dict[str, str]               # "train"/"sparse" -> NTYPE/FEAT
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.offsets[-1])


def load_graph(name: str, folder: Path) -> Graph:
    """Read a built graph whole (the reference reader, independent of the pipeline) into
    homogeneous IDs in node-type order. About 64 bytes per input edge (2M/20M: 1.2 GB)."""
    from distpart.synthetic import read_whole_graph
    meta = json.loads((folder / "metadata.json").read_text())
    ntypes = meta["node_type"]
    offsets = np.concatenate([[0], np.cumsum([sum(c) for c in meta["num_nodes_per_chunk"]])]).astype(np.int64)
    ref = read_whole_graph(folder / "metadata.json")
    src = np.concatenate([s + offsets[ntypes.index(e.split(":")[0])] for e, (s, _) in ref["edges"].items()])
    dst = np.concatenate([d + offsets[ntypes.index(e.split(":")[2])] for e, (_, d) in ref["edges"].items()])
    gi = graph_info(folder)
    specs = {"train": gi["train_mask"], "sparse": gi["sparse_train_mask"]}
    masks = {}
    for key, spec in specs.items():
        ntype, _, feat = spec.partition("/")
        masks[key] = offsets[ntypes.index(ntype)] + np.flatnonzero(ref["node_feats"][(ntype, feat)])
    del ref
    n = int(offsets[-1])
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    keep = lo != hi
    key = np.sort(lo[keep] * n + hi[keep])
    del lo, hi, keep
    if len(key):   # distinct pairs by a sort: np.unique is far slower on 10^7 keys (numpy 2.4)
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    return Graph(name, folder, ntypes, offsets, src, dst, key // n, key % n, masks, specs, gi)


def constraint_options(cset: str, g: Graph) -> List[str]:
    """`distpart assign` options of a constraint set."""
    opts: List[str] = []   # every set spelled out: distpart's default balances types and edges
    opts.append("--no-balance-ntypes" if cset == "C0" else "--balance-ntypes")
    if cset not in ("C3", "C3s"):
        opts.append("--no-balance-edges")
    if cset in ("C2", "C3"):
        opts += ["--balance-feature", g.specs["train"]]
    if cset in ("C2s", "C3s"):
        opts += ["--balance-feature", g.specs["sparse"]]
    if cset in ("C3", "C3s"):
        opts.append("--balance-edges")
    return opts


def balance_columns(cset: str, g: Graph, num_parts: int, ub: float) -> "tuple[Optional[np.ndarray], List[str]]":
    """The vertex-weight columns distpart builds for the set (assign.balance), minus those
    it would drop as unbalanceable (usable_constraints): (weights or None for C0, names)."""
    from distpart.assign.balance import BalanceOptions, usable_constraints, vertex_weights
    from distpart.chunked.metadata import load_metadata
    opts = constraint_options(cset, g)
    features = tuple(opts[i + 1] for i, o in enumerate(opts) if o == "--balance-feature")
    balance = BalanceOptions(ntypes="--balance-ntypes" in opts, edges="--balance-edges" in opts,
                             features=features, imbalance=ub)
    in_degree = np.bincount(g.dst, minlength=g.n)
    weights, names = vertex_weights(load_metadata(g.folder), balance, g.offsets, 0, g.n, in_degree)
    keep, _ = usable_constraints(weights.sum(axis=0), names, num_parts, ub)
    if cset == "C0":
        return None, names
    return weights[:, keep], [nm for nm, k in zip(names, keep) if k]


# ----------------------------------------------------------------------------- quality


def quality(g: Graph, part: np.ndarray, num_parts: int, ub: float, checked: Sequence[str]) -> dict:
    """Every number of a row, from an assignment (homogeneous IDs -> partition)."""
    small = part.astype(np.int16 if num_parts < 2**15 else np.int64)
    cut = int(np.count_nonzero(small[g.lo] != small[g.hi]))
    edges, cut_edges, halo = partition_loads(small, g.src, g.dst, num_parts)
    costs = training_costs(edges, cut_edges, halo)
    loads = {"nodes": np.bincount(small, minlength=num_parts)}
    for t, ntype in enumerate(g.ntypes):
        a, b = g.offsets[t], g.offsets[t + 1]
        loads[f"ntype:{ntype}"] = np.bincount(small[a:b], minlength=num_parts)
        owned = (g.dst >= a) & (g.dst < b)
        loads[f"edges:{ntype}"] = np.bincount(small[g.dst[owned]], minlength=num_parts)
    loads["edges"] = edges
    seeds = {}
    for key, ids in g.masks.items():
        loads[f"feature:{g.specs[key]}"] = np.bincount(small[ids], minlength=num_parts)
        seeds[key] = seed_split(loads[f"feature:{g.specs[key]}"])
    imb = {name: imbalance(load) for name, load in loads.items()}
    return {"cut": cut, "cut_pct": round(100 * cut / max(len(g.lo), 1), 2),
            "halo_total": costs["halo_nodes"], "halo_max": costs["max_halo_nodes"],
            "edge_share": round(costs["largest_partition_edge_share"], 4),
            "max_part_cut": costs["max_partition_cut"],
            "imbalance": {k: round(v, 4) for k, v in imb.items()},
            "train": seeds["train"], "sparse_train": seeds["sparse"],
            "over": over_limit({name: loads[name] for name in checked if name in loads}, ub)}


def over_limit(loads: Dict[str, np.ndarray], ub: float) -> Dict[str, dict]:
    """The constraints whose largest load exceeds ub times the average, worst first, with
    by how many units (nodes, edges, training nodes): a METIS-style result can be over by
    a node or two, which a ratio rounded to 3 digits would hide or overstate."""
    out = []
    for name, load in loads.items():
        load = np.asarray(load, dtype=np.float64)
        excess = float(load.max() - ub * load.mean()) if len(load) else 0.0
        if excess > 1e-9:
            out.append((imbalance(load), name, int(np.ceil(excess - 1e-9))))
    return {name: {"imbalance": round(value, 4), "excess": units} for value, name, units in sorted(out, reverse=True)}


def checked_constraints(cset: str, g: Graph, num_parts: int, ub: float) -> List[str]:
    """The imbalance names a run of the set must keep within ub (those distpart uses)."""
    _, names = balance_columns(cset, g, num_parts, ub)
    return names


def read_parts(assign_dir: Path, ntypes: List[str]) -> np.ndarray:
    return np.concatenate([np.array((assign_dir / f"{t}.txt").read_bytes().split(), dtype=np.int64)
                           for t in ntypes])


# ----------------------------------------------------------------------------- runs


def bounded(cmd: Sequence[object], timeout: float, env: Optional[dict] = None) -> "Optional[subprocess.CompletedProcess]":
    """Run cmd in its own process group; None if it ran past `timeout` (then the whole
    group, mpiexec's ranks included, is killed: no orphan keeps a core busy)."""
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_distpart_method(args, g: Graph, method: str, cset: str, ub: float, ranks: int, work: Path) -> dict:
    """One `distpart assign` under mpiexec: {"part"} and its time and memory, or {"status"}."""
    name, _, extra = method.partition(":")
    # Names of this process's own: two benchmarks sharing a --work-dir (to share its graphs)
    # must not read each other's assignment or stats.
    out = work / "assign" / f"run-{os.getpid()}"
    stats = work / "assign" / f"stats-{os.getpid()}.json"
    shutil.rmtree(out, ignore_errors=True)
    stats.unlink(missing_ok=True)
    argv = ["assign", g.folder, out, "--num-parts", args.parts, "--method", name, "--seed", args.seed,
            "--imbalance", ub, *constraint_options(cset, g), *extra.split(), "--quiet", "--stats-json", stats]
    proc = bounded(mpiexec(ranks, argv), args.timeout, env=mpi_env())
    if proc is None:
        return {"status": f"failed (timeout {args.timeout:.0f} s)"}
    if proc.returncode != 0:
        # A refusal's one line, else the end of whatever the run printed (a traceback).
        error = next((ln for ln in proc.stderr.splitlines() if "error:" in ln),
                     (proc.stdout + proc.stderr).strip()[-1000:])
        if proc.returncode == 2 and name == "kaminpar" and cset != "C0":
            return {"status": "n/a (refused)", "error": error}
        return {"status": f"failed (exit {proc.returncode})", "error": error}
    row = next(r for r in json.loads(stats.read_text())["stages"] if r["stage"] == "assign")
    part = read_parts(out, g.ntypes)
    shutil.rmtree(out, ignore_errors=True)
    stats.unlink(missing_ok=True)
    # KaMinPar runs in a child of rank 0; other methods' children are helpers such as
    # ctypes.util.find_library's ldconfig, not part of the method.
    child = max(row.get("child_peak_rss_mb") or [0]) if name == "kaminpar" else 0
    return {"part": part, "time_s": round(row["wall_s"], 2),
            "peak_rss_mb": "/".join(f"{x:.0f}" for x in row["peak_rss_mb"]),
            **({"child_rss_mb": round(child)} if child else {})}


def metis_csr(g: Graph, work: Path) -> Path:
    """The symmetrized simple graph as METIS's CSR, saved once per graph for the workers."""
    folder = work / "metis" / g.name
    if not (folder / "adjncy.npy").exists():
        folder.mkdir(parents=True, exist_ok=True)
        rows = np.concatenate([g.lo, g.hi])
        cols = np.concatenate([g.hi, g.lo])
        order = np.argsort(rows, kind="stable")
        np.save(folder / "xadj.npy", np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=g.n))]))
        np.save(folder / "adjncy.npy", cols[order])
    return folder


def run_reference(args, g: Graph, key: str, cset: str, ub: float, work: Path) -> dict:
    """A serial METIS reference in its own process (its peak RSS is its own)."""
    folder = metis_csr(g, work)
    vwgt, _ = balance_columns(cset, g, args.parts, ub)
    weights = work / "metis" / f"vwgt-{os.getpid()}.npy"
    weights.unlink(missing_ok=True)
    if vwgt is not None:
        np.save(weights, vwgt)
    method = "recursive" if key == "metis-rb" else "kway"
    cmd = [sys.executable, str(Path(__file__)), "--metis-worker", str(folder), "--metis-method", method,
           "--parts", str(args.parts), "--seed", str(args.seed), "--imbalance", str(ub)]
    if vwgt is not None:
        cmd += ["--metis-vwgt", str(weights)]
    proc = bounded(cmd, args.timeout)
    if proc is None:
        return {"status": f"failed (timeout {args.timeout:.0f} s)"}
    if proc.returncode != 0:
        return {"status": f"failed (exit {proc.returncode})", "error": proc.stderr.strip()[-300:]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    part = np.load(folder / "parts.npy")
    return {"part": part, "time_s": res["seconds"], "peak_rss_mb": f"{res['peak_rss_mb']:.0f}", "ncon": res["ncon"]}


def metis_worker(args) -> int:
    """Under --metis-worker: load the CSR (and weights), call METIS, save the parts."""
    from distpart.assign.metis import part_graph
    folder = Path(args.metis_worker)
    xadj, adjncy = np.load(folder / "xadj.npy"), np.load(folder / "adjncy.npy")
    vwgt = np.load(args.metis_vwgt) if args.metis_vwgt else None
    t0 = time.perf_counter()
    _, parts = part_graph(xadj, adjncy, args.parts, vwgt=vwgt, ubvec=args.metis_ub, seed=args.seed,
                          method=args.metis_method)
    seconds = time.perf_counter() - t0
    np.save(folder / "parts.npy", parts)
    print(json.dumps({"seconds": round(seconds, 2), "ncon": 1 if vwgt is None else int(vwgt.shape[1]),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    return 0


def prep_worker(folder: str) -> None:
    """Under mpiexec (--prep-worker): distpart's own memory for the partitioner's graph
    (what parmetis_assignment prepares with the default --vertex-order degree), per rank."""
    from mpi4py import MPI
    from distpart.assign.adjacency import build_csr
    from distpart.assign.ordering import degrees, hubs_first
    from distpart.chunked.metadata import load_metadata
    from distpart.run.guards import return_freed_memory_to_the_os

    return_freed_memory_to_the_os()  # as the distpart command does
    comm = MPI.COMM_WORLD
    meta = load_metadata(Path(folder))
    current = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
    t0 = time.perf_counter()
    # 32-bit indices where they fit, as a 32-bit ParMETIS (Debian's) or KaMinPar gets them.
    index = np.int32 if sum(meta.node_counts) < 2**31 and 2 * sum(meta.edge_counts) < 2**31 else np.int64
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


def measure_prep(ranks: int, folder: Path) -> dict:
    proc = subprocess.run(mpiexec(ranks, ["--prep-worker", folder], script=Path(__file__)),
                          check=True, env=mpi_env(), capture_output=True, text=True)
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: "/".join(str(r[k]) for r in rows) for k in rows[0]}


def applies(key: str, cset: str) -> bool:
    """METIS k-way and RB are the one-constraint references, k-way ncon the others."""
    return (cset == "C0") == (key in ("metis-kway", "metis-rb"))


# ----------------------------------------------------------------------------- the table


def _over(over: Dict[str, dict]) -> str:
    """The worst constraint above ub with its excess in units, and how many more ("-": none)."""
    if not over:
        return "-"
    name, worst = next(iter(over.items()))
    return (f"{name} {worst['imbalance']:.4f} (+{worst['excess']})"
            + (f" +{len(over) - 1} more" if len(over) > 1 else ""))


def display(row: dict) -> dict:
    """The printed columns of a row."""
    out = {"graph": row["graph"], "R": row["ranks"], "ub": row["imbalance_allowed"], "cons": row["constraints"],
           "method": row["method"]}
    if "status" in row:
        return {**out, "cut %": row["status"]}
    out.update({"cut %": row["cut_pct"], "halo tot": row["halo_total"], "halo max": row["halo_max"],
                "edge share": row["edge_share"], **imbalance_cells(row["imbalance"]),
                "moved": row["train"]["moved"], "moved sparse": row["sparse_train"]["moved"],
                "over ub": _over(row["over"]), "time s": row["time_s"], "peak MB/rank": row["peak_rss_mb"]})
    if "child_rss_mb" in row:
        out["peak MB/rank"] += f" (+{row['child_rss_mb']})"
    return out


LEGEND = """\
{parts} parts. cut %: cut edges of the symmetrized simple graph. halo: distinct remote in-neighbours
per partition (the feature rows it fetches), total and largest. edge share: the largest partition's
share of the input's edges (in-edges it keeps). imb: max/avg per partition of nodes, each node type
(in node-type order), the 10% and 1% train masks, edges (in-degree). moved: training nodes DGL's even
split (node_split, force_even=True) hands to another partition's trainer (10% mask; 1% mask).
over ub: the worst constraint of the run's set above ub x its average, (+ by how many nodes or edges),
and how many more are over. time: assign stage wall time
(references: the METIS call). peak MB/rank: peak RSS per rank of the assign stage, (+ KaMinPar's own
process on rank 0); references: their whole serial process, graph included.
References (serial, libmetis 5 through distpart.assign.metis, symmetrized simple graph, ubvec = ub):
  "METIS k-way" = METIS_PartGraphKway; "METIS recursive bisection" = METIS_PartGraphRecursive;
  "METIS k-way ncon" = METIS_PartGraphKway with one vertex-weight column per constraint of the set."""


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metis-worker", help=argparse.SUPPRESS)
    ap.add_argument("--metis-method", help=argparse.SUPPRESS)
    ap.add_argument("--metis-vwgt", help=argparse.SUPPRESS)
    ap.add_argument("--prep-worker", help=argparse.SUPPRESS)
    ap.add_argument("--graphs", default="all",
                    help="comma-separated graph names (rmat-200k, community-200k, mesh-200k, debian, rmat-2m, "
                         "or any rmat-N/community-N/mesh-N), or small (the 200k ones and debian), large, all")
    ap.add_argument("--constraints", default=DEFAULT_CONSTRAINTS, help=f"comma-separated, of {', '.join(CONSTRAINT_SETS)}")
    ap.add_argument("--methods", default=DEFAULT_METHODS,
                    help="comma-separated distpart methods ('NAME:EXTRA OPTIONS' passes options to assign) "
                         "and references metis-kway, metis-rb, metis-ncon")
    ap.add_argument("--ranks", default="2", help="ranks per distpart run; a list such as 1,2,4 gives a row for each")
    ap.add_argument("--imbalance", default="1.03,1.05", help="allowed max/avg per constraint; a list gives rows for each")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per run before it is recorded as failed")
    ap.add_argument("--prep", action="store_true",
                    help="also measure distpart's own memory for the partitioner's graph (build_csr), "
                         "per input edge and rank, on each graph")
    ap.add_argument("--work-dir", type=Path, help="keeps generated graphs between runs (default: temporary)")
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "assign.json")
    ap.add_argument("--update", action="store_true",
                    help="fold this run's rows into --json instead of replacing it: a row of the same graph, "
                         "ranks, imbalance, constraint set and method is replaced, others are kept (to "
                         "rerun one method after a change without rerunning every reference)")
    args = ap.parse_args(argv)
    if args.metis_worker:
        args.metis_ub = float(args.imbalance)
        return metis_worker(args)
    if args.prep_worker:
        prep_worker(args.prep_worker)
        return 0

    graphs = graph_names(args.graphs)
    csets = [c.strip() for c in args.constraints.split(",")]
    unknown = [c for c in csets if c not in CONSTRAINT_SETS]
    if unknown:
        ap.error(f"unknown constraint sets {unknown}; choose from {', '.join(CONSTRAINT_SETS)}")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    ranks = [int(r) for r in args.ranks.split(",")]
    ubs = [float(u) for u in args.imbalance.split(",")]
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="distpart-assign-"))
    (work / "assign").mkdir(parents=True, exist_ok=True)
    (work / "metis").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows: List[dict] = []
    shown: List[dict] = []
    infos: Dict[str, dict] = {}
    try:
        for name in graphs:
            g = load_graph(name, build(name, work))
            infos[name] = {**g.info, "simple_edges": len(g.lo)}
            print(f"{name}: {g.n} nodes, {len(g.src)} edges, {len(g.lo)} undirected simple edges; "
                  f"types {g.ntypes}; masks {g.specs['train']} ({len(g.masks['train'])}), "
                  f"{g.specs['sparse']} ({len(g.masks['sparse'])})", flush=True)
            for ub in ubs:
                for cset in csets:
                    checked = checked_constraints(cset, g, args.parts, ub)
                    for method in methods:
                        for r in ([1] if method in REFERENCES else ranks):
                            if method in REFERENCES and not applies(method, cset):
                                continue
                            label = REFERENCES.get(method, method)
                            run = (run_reference(args, g, method, cset, ub, work) if method in REFERENCES
                                   else run_distpart_method(args, g, method, cset, ub, r, work))
                            row = {"graph": name, "ranks": r, "imbalance_allowed": ub, "constraints": cset,
                                   "method": label, "checked": checked}
                            part = run.pop("part", None)
                            row.update(run)
                            if part is not None:
                                row.update(quality(g, part, args.parts, ub, checked))
                            rows.append(row)
                            shown.append(display(row))
                            print(f"  {name} ub {ub} {cset} {label} R={r}: {shown[-1]['cut %']}"
                                  + (f" cut, {row['time_s']} s" if "time_s" in row else ""), flush=True)
                if args.prep:
                    infos[name]["prep"] = measure_prep(ranks[0], g.folder)
            del g
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    wall = time.perf_counter() - started
    print()
    print(LEGEND.format(parts=args.parts))
    print_table(shown)
    print(f"benchmark wall time {wall:.0f} s")
    result = {"parts": args.parts, "ranks": ranks, "imbalances": ubs, "seed": args.seed,
              "graphs": infos, "wall_s": round(wall, 1), "rows": rows}
    if args.update and args.json.exists():
        result = merged(json.loads(args.json.read_text()), result)
    write_json(args.json, result)
    return 0


def row_key(row: dict) -> tuple:
    return (row["graph"], row["ranks"], row["imbalance_allowed"], row["constraints"], row["method"])


def merged(old: dict, new: dict) -> dict:
    """`old` results with `new`'s rows in place of the rows of the same key (appended where
    old has none), and new's graphs and settings added; a changed --parts or --seed would
    mix incomparable rows, so it is refused (a file that does not record one is taken as it is)."""
    for key in ("parts", "seed"):
        if key in old and old[key] != new[key]:
            raise SystemExit(f"--update: {key} {new[key]} differs from the file's {old.get(key)}")
    fresh = {row_key(r): r for r in new["rows"]}
    rows = [fresh.pop(row_key(r), r) for r in old["rows"]] + list(fresh.values())
    return {**old, "seed": new["seed"], "ranks": sorted(set(old.get("ranks", [])) | set(new["ranks"])),
            "imbalances": sorted(set(old.get("imbalances", [])) | set(new["imbalances"])),
            "graphs": {**old.get("graphs", {}), **new["graphs"]}, "rows": rows,
            "wall_s": round(old.get("wall_s", 0) + new["wall_s"], 1)}


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark Step 1 by what distributed training pays for, measured with DGL 2.1's own servers
and trainers (issue 29, item 3; shared/design/training-objective.md says why these numbers).

For every graph and row (a Step 1 method and its flags), the graph is partitioned with the
project's `distpart pipeline` (mpiexec -n --ranks), `distpart report` gives its cut, halo,
imbalances and moved seeds, and then DGL trains on it: --parts machines, each a network
namespace of its own (own address, a veth to a bridge, private /dev/shm) with one server and
one trainer started with DGL's launcher environment (mpi_tests/dgl_job.py, as the CI's
DistGraph test), a 2-layer R-GCN-style model with DistNodeDataLoader and
MultiLayerNeighborSampler(--fanouts) on the training nodes of the graph's train mask
(node_split, force_even=True), for --epochs epochs. Per epoch the trainers count remote and
local feature rows, remote sampling and feature requests (training/counts.py), and every
machine's eth0 bytes; moved seeds once. Rows of a graph share the balance flags (--balance).

Graphs (bench_graphs.py, built once in --work-dir; a 64-float `feat` on every node type and a
`label` added in a copy, training/features.py): rmat-200k, community-200k, mesh-200k, debian
(the default, `small`), rmat-2m (opt-in). Rows: `--row '[LABEL=]METHOD [FLAGS...]'`,
repeatable; the flags reach distpart unchanged but for `{train_mask}` (the graph's mask),
`{fanouts}` and `{batch_size}` (the trainers'); METHOD `default` gives no --method (with
`--balance=`, a row is the output of `distpart pipeline IN OUT --num-parts P`). The default
rows: random, parmetis, multilevel (the cut objective), `vol=multilevel --objective vol` (the
volume objective) and `fetch=multilevel --objective fetch --train-mask {train_mask}
--fanouts {fanouts} --batch-size {batch_size}` (the training objective). Needs root (namespaces) and
DGL's Python (scripts/setup-dgl.sh).

    sudo .venv/bin/python benchmarks/bench_training.py --work-dir /var/tmp/bench    # training.json says how long
    sudo .venv/bin/python benchmarks/bench_training.py --graphs rmat-2m --work-dir /var/tmp/bench \\
        --json benchmarks/results/training_rmat_2m.json
    sudo .venv/bin/python benchmarks/bench_training.py --graphs rmat-200k --row 'ml2=multilevel --vcycles 2' \\
        --work-dir /var/tmp/bench --update                   # one more row in training.json
    python benchmarks/training_tables.py --out benchmarks/results/training_tables.md   # then docs_numbers.py

Everything it starts is removed at the end, also after a failure, a timeout, Ctrl-C or
SIGTERM: namespaces, links, processes (each subprocess has a timeout), and each machine's
/dev/shm (a mount namespace that dies with its processes).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "mpi_tests"))   # netns, dgl_job, harness: the CI's machines

from bench_graphs import build, graph_names, info as graph_info  # noqa: E402
from common import print_table, write_json  # noqa: E402
from training import rows as R  # noqa: E402
from training.counts import training_summary  # noqa: E402
from training.features import with_features  # noqa: E402
from training.runs import PartitionSettings, TrainSettings, bounded, partition, partition_cells, report, train  # noqa: E402
from training_tables import cells, legend  # noqa: E402

DEFAULT_DGL_PYTHON = "/var/cache/distpart/dgl-2.1.0/bin/python"
SERVER_PORT, MASTER_PORT = 30050, 29500


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default="small",
                    help="comma-separated names (rmat-200k, community-200k, mesh-200k, debian, rmat-2m, any "
                         "rmat-N/community-N/smalltype-N/mesh-N), or small (the 200k ones and debian), large, all")
    ap.add_argument("--row", action="append", metavar="'[LABEL=]METHOD [FLAGS...]'",
                    help=f"a row, repeatable (default: {'; '.join(R.DEFAULT_ROWS)}); METHOD `default`: no --method; flags go to distpart unchanged "
                         "but for {train_mask}, {sparse_train_mask}, {fanouts}, {batch_size}")
    ap.add_argument("--baseline", default=R.BASELINE, help="the label of the row ratios compare to")
    ap.add_argument("--balance", default=R.DEFAULT_BALANCE,
                    help="balance flags of every row ({train_mask}, {sparse_train_mask}: the graph's masks)")
    ap.add_argument("--imbalance", type=float, default=1.05)
    ap.add_argument("--parts", type=int, default=4, help="partitions = machines")
    ap.add_argument("--ranks", type=int, default=2, help="distpart's ranks")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verify", action="store_true", help="let the pipeline verify each output")
    ap.add_argument("--fanouts", default="5,10", help="MultiLayerNeighborSampler's fanouts")
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--feat-dim", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--dgl-python", default=os.environ.get("DISTPART_DGL_PYTHON", DEFAULT_DGL_PYTHON))
    ap.add_argument("--shm-size", default="4g", help="each machine's /dev/shm (tmpfs size)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per distpart run")
    ap.add_argument("--train-timeout", type=float, default=1200, help="seconds per DGL job")
    ap.add_argument("--work-dir", type=Path, help="keeps graphs between runs (default: temporary)")
    ap.add_argument("--keep-outputs", action="store_true", help="keep each row's partitions in --work-dir")
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "training.json")
    ap.add_argument("--update", action="store_true",
                    help="fold this run's rows into --json (same graph and label: replaced)")
    args = ap.parse_args(argv)
    try:
        args.rows = R.parse_rows(args.row or list(R.DEFAULT_ROWS))
        args.graph_list = graph_names(args.graphs)
        if min(int(f) for f in args.fanouts.split(",")) < 1:
            raise ValueError(f"--fanouts {args.fanouts}: every fanout must be at least 1")
    except ValueError as e:
        ap.error(str(e))
    return args


def preflight(args: argparse.Namespace) -> Optional[str]:
    """Why the benchmark cannot run here, or None."""
    from netns import skip_reason
    reason = skip_reason(sshd=False)
    if reason:
        return reason
    probe = bounded([args.dgl_python, "-c", "import dgl, dgl.distributed, torch; print(dgl.__version__)"], 300)
    if probe is None or probe.returncode != 0:
        return (f"{args.dgl_python} cannot import dgl.distributed and torch: build the DGL environment "
                f"(bash scripts/setup-dgl.sh) or pass --dgl-python")
    args.dgl_version = probe.stdout.strip()
    return None


def run_row(args, cluster, name: str, folder: Path, info: Dict, spec: R.RowSpec, balance: List[str],
            work: Path, job: int) -> Dict:
    """Partition, report and train one row; the dict of the JSON's rows."""
    ntypes = list(info["num_nodes"])
    values = {**info, "fanouts": args.fanouts, "batch_size": args.batch_size}   # the rows' placeholders
    row: Dict = {"graph": name, "label": spec.label, "method": spec.method, "flags": R.fill(spec.flags, values),
                 "balance": balance, "balance_label": R.balance_label(balance), "imbalance_allowed": args.imbalance,
                 "checked": R.checked_constraints(balance, ntypes, args.imbalance)}
    run_dir = work / "training" / name / spec.slug
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    out = run_dir / "out"
    try:
        settings = PartitionSettings(args.parts, args.ranks, args.seed, args.imbalance, args.verify, args.timeout)
        part = partition(folder, out, spec.argv(values), balance, settings)
        row.update(part)
        if "status" in part:
            row["status"] = f"partition {part.pop('status')}"
            return row
        rep = report(out, R.report_flags(balance, info["train_mask"]), args.ranks, args.timeout)
        if "report" not in rep:
            row.update(status=f"report {rep['status']}", error=rep["error"])
            return row
        row["partition"] = partition_cells(rep["report"], info["train_mask"])
        row["over"] = R.over_limit(row["partition"]["imbalance"], row["checked"])
        training = TrainSettings(args.dgl_python, args.fanouts, args.batch_size, args.epochs, args.hidden,
                                 args.seed, args.shm_size, args.train_timeout)
        done = train(cluster, out, info["train_mask"], run_dir / "job", training,
                     (SERVER_PORT + 2 * job, MASTER_PORT + job))
        if "reports" not in done:
            row.update(status=f"training {done['status']}", error=done["error"])
            return row
        row["training"] = training_summary(done["reports"])
        row["training"]["job_seconds"] = done["seconds"]
        row["trainers"] = [{k: r[k] for k in ("rank", "partition", "train_nodes", "moved_seeds", "epochs")}
                           for r in done["reports"]]
        row["status"] = "ok"
        return row
    finally:
        if not args.keep_outputs:
            shutil.rmtree(out, ignore_errors=True)


def _stop(signum, frame):   # SIGTERM unwinds like Ctrl-C: every `finally` cleans up
    raise SystemExit(128 + signum)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    reason = preflight(args)
    if reason:
        print(f"bench_training: cannot run: {reason}", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _stop)
    from netns import netns_cluster
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="distpart-training-"))
    started = time.perf_counter()
    results: List[Dict] = []
    graphs: Dict[str, Dict] = {}
    try:
        folders = {}
        for name in args.graph_list:
            base = build(name, work)
            folders[name] = with_features(base, args.feat_dim, args.seed)
            gi = graph_info(base)
            graphs[name] = {"source": gi.get("source"), "types": gi.get("types"), "masks": gi.get("masks"),
                            "num_nodes": gi["num_nodes"], "nodes": sum(gi["num_nodes"].values()),
                            "edges": sum(gi["num_edges"].values()), "train_mask": gi["train_mask"],
                            "sparse_train_mask": gi.get("sparse_train_mask"), "train_nodes": gi["train_nodes"]}
        with netns_cluster(work / "ns", args.parts, sshd=False) as cluster:
            job = 0
            for name in args.graph_list:
                balance = R.balance_flags(args.balance, graphs[name])
                print(f"{name}: {graphs[name]['nodes']} nodes, {graphs[name]['edges']} edges; balance "
                      f"{' '.join(balance)}", flush=True)
                for spec in args.rows:
                    t = time.perf_counter()
                    row = run_row(args, cluster, name, folders[name], graphs[name], spec, balance, work, job)
                    job += 1
                    results.append(row)
                    said = (f"{row['training']['remote_rows_per_epoch']:.0f} remote rows/epoch"
                            if "training" in row else f"{row['status']}: {row.get('error', '')}")
                    print(f"  {name} {spec.label}: {said} ({time.perf_counter() - t:.0f} s)", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    result = {"command": "python benchmarks/bench_training.py " + shlex.join(sys.argv[1:] if argv is None else argv),
              "settings": {"parts": args.parts, "ranks": args.ranks, "seed": args.seed, "imbalance": args.imbalance,
                           "balance": args.balance, "baseline": args.baseline, "fanouts": args.fanouts,
                           "batch_size": args.batch_size, "epochs": args.epochs, "feat_dim": args.feat_dim,
                           "hidden": args.hidden, "dgl_version": args.dgl_version, "verify": args.verify},
              "graphs": graphs, "wall_s": round(time.perf_counter() - started, 1), "rows": results}
    wall = result["wall_s"]
    if args.update and args.json.exists():
        result = merged(json.loads(args.json.read_text()), result)
    print()
    print(legend(result))
    print_table(cells(result["rows"], args.baseline))
    print(f"benchmark wall time {wall:.0f} s")
    write_json(args.json, result)
    return 0 if all(r.get("status") == "ok" for r in results) else 1


def merged(old: Dict, new: Dict) -> Dict:
    """old's rows with new's in place of those of the same graph and label (appended where old has
    none); settings must match (else rows would not compare), graphs are united."""
    for key in ("parts", "imbalance", "balance", "fanouts", "batch_size", "epochs", "feat_dim"):
        if old["settings"].get(key) != new["settings"][key]:
            raise SystemExit(f"--update: {key} {new['settings'][key]!r} differs from the file's "
                             f"{old['settings'].get(key)!r}")
    fresh = {(r["graph"], r["label"]): r for r in new["rows"]}
    rows = [fresh.pop((r["graph"], r["label"]), r) for r in old["rows"]] + list(fresh.values())
    return {**old, "graphs": {**old["graphs"], **new["graphs"]}, "rows": rows,
            "commands": [*old.get("commands", [old["command"]]), new["command"]],
            "wall_s": round(old.get("wall_s", 0) + new["wall_s"], 1)}


if __name__ == "__main__":
    sys.exit(main())

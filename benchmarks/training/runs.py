"""The training benchmark's subprocesses, each with a timeout after which its whole process
group is killed (and killed too when the benchmark itself stops: Ctrl-C, SIGTERM, an error):

- `partition`: `mpiexec -n R python -m distpart.cli pipeline ...` with this Python (the
  project's venv), Step 1's time and peak RSS from `--stats-json`;
- `report`: `distpart report OUT --train-mask ... --json` (cut, halo, imbalances, moved seeds);
- `train`: the DGL job on the network-namespace machines (mpi_tests/dgl_job.py) with DGL's
  Python and training/trainer.py, whose per-trainer reports come back as dicts.

mpi_tests/ must be on sys.path (bench_training.py puts it there).
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

TRAINER = Path(__file__).resolve().parent / "trainer.py"


def bounded(cmd: Sequence[object], timeout: float, env: Optional[Dict[str, str]] = None
            ) -> "Optional[subprocess.CompletedProcess]":
    """Run cmd in its own process group; None if it ran past `timeout`. The group (mpiexec's
    ranks included) is killed then, and on any exception while waiting."""
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as e:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate(timeout=60)
        if isinstance(e, subprocess.TimeoutExpired):
            return None
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _mpiexec(ranks: int, argv: Sequence[object]) -> List[str]:
    from common import mpiexec
    return mpiexec(ranks, argv)


def _failure(proc: "Optional[subprocess.CompletedProcess]", timeout: float) -> Dict[str, str]:
    """A failed run's status and its one telling line (distpart's "error:" line, else the end)."""
    if proc is None:
        return {"status": f"timeout ({timeout:.0f} s)", "error": ""}
    text = proc.stdout + proc.stderr
    error = next((ln.strip() for ln in text.splitlines() if "error:" in ln), text.strip()[-600:])
    return {"status": f"exit {proc.returncode}", "error": error}


@dataclass
class PartitionSettings:
    parts: int
    ranks: int
    seed: int
    imbalance: float
    verify: bool
    timeout: float


def partition(folder: Path, out: Path, row_argv: Sequence[str], balance: Sequence[str], s: PartitionSettings) -> Dict:
    """`distpart pipeline` for one row: {"command", "step1": {...}} or {"command", "status", "error"}.
    The row's own flags (`RowSpec.argv`) come last, so they reach distpart unchanged (and win over ours)."""
    from common import mpi_env
    stats = out.parent / "stats.json"
    argv = ["pipeline", folder, out, "--num-parts", s.parts, "--seed", s.seed, "--imbalance", s.imbalance,
            *balance, *row_argv, *([] if s.verify else ["--no-verify"]), "--quiet", "--stats-json", stats]
    cmd = _mpiexec(s.ranks, argv)
    result: Dict = {"command": "mpiexec -n {} distpart {}".format(s.ranks, shlex.join(map(str, argv)))}
    proc = bounded(cmd, s.timeout, env=mpi_env())
    if proc is None or proc.returncode != 0:
        return {**result, **_failure(proc, s.timeout)}
    stages = json.loads(stats.read_text())["stages"]
    assign = next(r for r in stages if r["stage"] == "assign")
    result["step1"] = {"wall_s": round(assign["wall_s"], 2), "peak_rss_mb": round(max(assign["peak_rss_mb"])),
                       "peak_rss_mb_per_rank": assign["peak_rss_mb"]}
    result["pipeline_wall_s"] = round(sum(r["wall_s"] for r in stages), 2)
    return result


def report(out: Path, flags: Sequence[str], ranks: int, timeout: float) -> Dict:
    """`distpart report OUT FLAGS --json`: {"report": {...}} or {"status", "error"}."""
    from common import mpi_env
    path = out.parent / "report.json"
    proc = bounded(_mpiexec(ranks, ["report", out, *flags, "--json", path, "--quiet"]), timeout, env=mpi_env())
    if proc is None or proc.returncode != 0:
        return _failure(proc, timeout)
    return {"report": json.loads(path.read_text())}


def partition_cells(rep: Dict, train_mask: str) -> Dict:
    """What a row keeps of the report."""
    train = rep.get("train", {}).get(train_mask, {})
    return {"cut_pct": round(100 * rep["edge_cut_fraction"], 2), "edge_cut": rep["edge_cut"], "edges": rep["edges"],
            "halo_total": rep["halo_nodes"], "halo_max": rep["max_halo_nodes"],
            "edge_share": round(rep["largest_partition_edge_share"], 4), "imbalance": rep["imbalance"],
            "train_nodes": train.get("nodes"), "train_per_partition": train.get("per_partition"),
            "moved_seeds": train.get("moved")}


@dataclass
class TrainSettings:
    dgl_python: str
    fanouts: str
    batch_size: int
    epochs: int
    hidden: int
    seed: int
    shm_size: str
    timeout: float


def train(cluster, out: Path, train_mask: str, work: Path, s: TrainSettings, ports: "tuple[int, int]") -> Dict:
    """The DGL job on `out`: {"reports": [per trainer], "seconds"} or {"status", "error"}.
    ports: the servers' and torch's rendezvous port, new per job (no TIME_WAIT clash)."""
    from harness import dgl_env
    from dgl_job import run_machines, write_ip_config, write_job
    work.mkdir(parents=True, exist_ok=True)
    config = out / "metadata.json"
    graph_name = json.loads(config.read_text())["graph_name"]
    ip_config = write_ip_config(cluster, work, ports[0])
    report_path = work / "report.json"
    args = ["--ip-config", ip_config, "--graph-name", graph_name, "--train-mask", train_mask,
            "--report", report_path, "--fanouts", s.fanouts, "--batch-size", s.batch_size, "--epochs", s.epochs,
            "--hidden", s.hidden, "--seed", s.seed, "--iface", cluster.iface]
    job = write_job(cluster, work, python=s.dgl_python, script=str(TRAINER), script_args=args, ip_config=ip_config,
                    part_config=config, master_port=ports[1], timeout=s.timeout - 20, shm_size=s.shm_size)
    outcome = run_machines(cluster, s.dgl_python, job, work, s.timeout, dgl_env())
    reports = [json.loads(p.read_text()) for p in sorted(work.glob("report.json.*"))]
    failed = [r for r in reports if not r.get("ok")]
    if outcome.ok and len(reports) == len(cluster.hosts) and not failed:
        return {"reports": sorted(reports, key=lambda r: r["rank"]), "seconds": round(outcome.seconds, 1)}
    if failed:   # a trainer's own exception: its last line says what
        error = f"trainer {failed[0]['rank']}: " + failed[0]["error"].strip().splitlines()[-1]
    else:
        error = outcome.failure() or f"{len(reports)} of {len(cluster.hosts)} trainers reported"
    print(f"    DGL job failed; machine logs in {work}", file=sys.stderr, flush=True)
    return {"status": "timeout" if outcome.timed_out else "failed", "error": error}

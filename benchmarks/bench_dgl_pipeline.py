"""DGL 2.1.0's own partition pipeline, unmodified, on a distpart scale input: per stage the
wall time, the peak RSS of every process it starts and the bytes per input edge (summed
peak over processes), beside which `scale_tables.extrapolated` puts DGL's pipeline at 200M
edges (issue 31).

The stages are DGL's guide's, with DGL 2.1.0's `tools/` folder (not in DGL's wheel; e.g.
`git clone --depth 1 -b v2.1.0 https://github.com/dmlc/dgl /tmp/dgl`, or `git archive v2.1.0
tools` of a mirror, then `--dgl-tools .../tools`), run by the DGL environment's Python:

    Step 1  PYTHONPATH=TOOLS python TOOLS/partition_algo/random_partition.py \\
                --in_dir IN --out_dir WORK/parts --num_partitions R
    Step 2  python TOOLS/dispatch_data.py --in-dir IN --partitions-dir WORK/parts \\
                --out-dir WORK/out --ip-config WORK/ip_config.txt   (127.0.0.1, R lines)

dispatch_data.py starts DGL's launcher (distgraphlaunch.py), which runs each rank
(distpartitioning/data_proc_pipeline.py, gloo) through `ssh HOST 'CMD'`. This machine has
no sshd, so an `ssh` first on PATH runs CMD on this host with /bin/sh instead and reports
the rank's peak RSS (os.wait4's ru_maxrss: the largest of the shell and its descendants,
i.e. the rank) and wall time; everything else is DGL's code as released. DGL's launcher
sometimes never returns after its ranks have finished (bench_graphstorm.py): a launcher
still running `--hang-grace` seconds after its last rank exited is killed and marked hung
(its output complete: Step 2's wall is then until its last rank exited).

    python benchmarks/bench_dgl_pipeline.py --dgl-tools /var/tmp/dgl-tools-2.1.0/tools \\
        --input /var/tmp/scale/rmat-20me-1250kn-s0 --json benchmarks/results/dgl_pipeline_20m.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from common import SSH_ARGS, print_table, watch_launcher, write_json

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DGL_PYTHON = "/var/cache/distpart/dgl-2.1.0/bin/python"
DEFAULT_TOOLS = Path("/var/tmp/dgl-tools-2.1.0/tools")

# ssh as DGL's launcher calls it (`ssh -o ... -p PORT HOST 'CMD'`): CMD run here, its peak reported.
SSH_SHIM = r'''#!{python} -S
import json, os, re, sys, time
{ssh_args}
cmd = " ".join(args[i + 1:])
t0 = time.monotonic()
pid = os.posix_spawn("/bin/sh", ["/bin/sh", "-c", cmd], os.environ)
_, status, usage = os.wait4(pid, 0)
rank = re.search(r"\bRANK=(\d+)", cmd)
with open("{log}", "a") as f:
    f.write(json.dumps({"rank": int(rank.group(1)) if rank else None, "peak_rss_kib": usage.ru_maxrss,
                        "wall_s": round(time.monotonic() - t0, 2), "status": os.waitstatus_to_exitcode(status),
                        "cmd": cmd}) + "\n")
sys.exit(max(0, os.waitstatus_to_exitcode(status)))
'''


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", type=Path, default=Path("/var/tmp/scale/rmat-20me-1250kn-s0"),
                    help="a chunked input folder with metadata.json (bench_scale.py's)")
    ap.add_argument("--dgl-tools", type=Path, default=DEFAULT_TOOLS, help="DGL 2.1.0's tools/ folder")
    ap.add_argument("--dgl-python", default=os.environ.get("DISTPART_DGL_PYTHON", DEFAULT_DGL_PYTHON),
                    help="the DGL environment's Python (dgl 2.1.0, torch)")
    ap.add_argument("--ranks", type=int, default=2, help="partitions = DGL ranks, all on this machine")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/dgl-pipeline"),
                    help="working folder (assignment, output, logs; emptied first)")
    ap.add_argument("--master-port", type=int, default=12345, help="the gloo rendezvous port")
    ap.add_argument("--hang-grace", type=float, default=60.0,
                    help="seconds the launcher may keep running after its last rank exited")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds per stage")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    if not (args.dgl_tools / "dispatch_data.py").is_file():
        ap.error(f"--dgl-tools {args.dgl_tools}: no dispatch_data.py; give DGL 2.1.0's tools/ folder "
                 "(git clone --depth 1 -b v2.1.0 https://github.com/dmlc/dgl /tmp/dgl; --dgl-tools /tmp/dgl/tools)")
    if not (args.input / "metadata.json").is_file():
        ap.error(f"--input {args.input}: no metadata.json (generate it: bench_scale.py --generate-only)")
    return args


def tools_revision(tools: Path) -> Dict[str, str]:
    """What ran: the REVISION note beside the folder if any, and a hash of its Python files."""
    digest = hashlib.sha256()
    for f in sorted(tools.rglob("*.py")):
        digest.update(f.relative_to(tools).as_posix().encode() + b"\0" + f.read_bytes())
    note = tools.parent / "REVISION"
    return {"path": str(tools), "revision": note.read_text().strip() if note.is_file() else "unknown",
            "py_sha256": digest.hexdigest()}


def run_process(cmd: List[str], env: Dict[str, str], log: Path, cwd: Path, timeout: float) -> Dict:
    """One process to its end: wall time, exit code and peak RSS (os.wait4's ru_maxrss)."""
    t0 = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, start_new_session=True)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.1)
    proc.returncode = os.waitstatus_to_exitcode(status)     # reaped here, so Popen does not wait again
    return {"wall_s": round(time.monotonic() - t0, 2), "returncode": proc.returncode,
            "peak_rss_mb": [round(usage.ru_maxrss / 1024, 1)]}


def read_ranks(log: Path) -> List[dict]:
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def run_dispatch(cmd: List[str], env: Dict[str, str], work: Path, ranks: int, grace: float,
                 timeout: float) -> Dict:
    """dispatch_data.py until it exits, or until `grace` after its last rank reported (hung)."""
    rank_log = work / "ranks.jsonl"
    t0 = time.monotonic()
    with open(work / "step2.log", "w") as f:
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=work, start_new_session=True)
    t_ranks: Optional[float] = None

    def check(now: float) -> Optional[str]:
        nonlocal t_ranks
        if t_ranks is None and len(read_ranks(rank_log)) >= ranks:
            t_ranks = now
        return "hung" if t_ranks is not None and now - t_ranks > grace else None

    outcome = watch_launcher(proc, t0, check, timeout, poll_s=0.2)
    wall = time.monotonic() - t0
    per_rank = sorted(read_ranks(rank_log), key=lambda r: r["rank"])
    return {"wall_s": round(wall if outcome == "exited" else (t_ranks or wall), 2), "outcome": outcome,
            "launcher_returncode": proc.returncode if outcome == "exited" else None,
            "rank_returncodes": [r["status"] for r in per_rank],
            "rank_wall_s": [r["wall_s"] for r in per_rank],
            "peak_rss_mb": [round(r["peak_rss_kib"] / 1024, 1) for r in per_rank],
            "rank_command": per_rank[0]["cmd"] if per_rank else None}


def input_counts(meta: dict) -> Dict[str, int]:
    return {"nodes": sum(map(sum, meta["num_nodes_per_chunk"])), "edges": sum(map(sum, meta["num_edges_per_chunk"]))}


def dgl_input(src: Path, dst: Path) -> Optional[str]:
    """The input as DGL 2.1's random_partition.py reads it: the data folders linked, the
    metadata with `num_nodes_per_type`/`num_edges_per_type` (it raises KeyError without
    them; distpart's generator writes per-chunk counts only). What was changed, or None."""
    meta = json.loads((src / "metadata.json").read_text())
    added = []
    for key, chunks in (("num_nodes_per_type", "num_nodes_per_chunk"), ("num_edges_per_type", "num_edges_per_chunk")):
        if key not in meta:
            meta[key] = [sum(c) for c in meta[chunks]]
            added.append(key)
    dst.mkdir(parents=True)
    for entry in src.iterdir():
        if entry.name != "metadata.json":
            (dst / entry.name).symlink_to(entry.resolve())
    (dst / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    return f"metadata.json with {' and '.join(added)} added (sums of the per-chunk counts)" if added else None


def output_check(out: Path, counts: Dict[str, int]) -> str:
    """DGL's output metadata.json against the input's node and edge counts."""
    path = out / "metadata.json"
    if not path.is_file():
        return "no metadata.json: DGL's pipeline failed (dispatch_data.py exits 0 regardless; see step2.log)"
    meta = json.loads(path.read_text())
    got = {"nodes": meta.get("num_nodes"), "edges": meta.get("num_edges")}
    parts = sorted(p.name for p in out.iterdir() if p.is_dir() and p.name.startswith("part"))
    ok = "OK" if got == counts else "MISMATCH"
    return f"{ok}: metadata.json says {got['nodes']} nodes, {got['edges']} edges; {len(parts)} part folders"


def main() -> int:
    args = parse_args()
    tools = args.dgl_tools.resolve()
    meta = json.loads((args.input / "metadata.json").read_text())
    counts = input_counts(meta)
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    (work / "bin").mkdir(parents=True)
    shim = work / "bin" / "ssh"
    system_python = shutil.which("python3", path="/usr/bin:/bin") or sys._base_executable
    shim.write_text(SSH_SHIM.replace("{ssh_args}", SSH_ARGS).replace("{python}", system_python).replace("{log}", str(work / "ranks.jsonl")))
    shim.chmod(0o755)
    (work / "ip_config.txt").write_text("127.0.0.1\n" * args.ranks)
    converted = dgl_input(args.input, work / "input")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PATH=f"{work / 'bin'}:{Path(args.dgl_python).parent}:/usr/bin:/bin")
    dgl_version = subprocess.run([args.dgl_python, "-c", "import dgl; print(dgl.__version__)"], env=env,
                                 capture_output=True, text=True).stdout.strip()
    step1 = [args.dgl_python, str(tools / "partition_algo" / "random_partition.py"), "--in_dir", str(work / "input"),
             "--out_dir", str(work / "parts"), "--num_partitions", str(args.ranks)]
    step2 = [args.dgl_python, str(tools / "dispatch_data.py"), "--in-dir", str(work / "input"), "--partitions-dir",
             str(work / "parts"), "--out-dir", str(work / "out"), "--ip-config", str(work / "ip_config.txt"),
             "--master-port", str(args.master_port)]
    print(f"input {args.input}: {counts['nodes']:,} nodes, {counts['edges']:,} edges; DGL {dgl_version}; "
          f"tools {tools}; input for DGL: {work / 'input'} ({converted or 'as it is'})", flush=True)
    print("step 1:", " ".join(step1), flush=True)
    r1 = run_process(step1, dict(env, PYTHONPATH=str(tools)), work / "step1.log", work, args.timeout)
    stages = [{"stage": "random_partition.py (Step 1)", **r1}]
    print(f"    {r1}", flush=True)
    if r1["returncode"] == 0:
        print("step 2:", " ".join(step2), flush=True)
        r2 = run_dispatch(step2, env, work, args.ranks, args.hang_grace, args.timeout)
        stages.append({"stage": "dispatch_data.py (Step 2)", **r2})
        print(f"    {r2}", flush=True)
    for row in stages:
        row["bytes_per_edge"] = round(sum(row["peak_rss_mb"]) * 2**20 / counts["edges"], 1)
    check = output_check(work / "out", counts)
    print()
    print_table([{k: v for k, v in r.items() if k in ("stage", "wall_s", "outcome", "peak_rss_mb", "bytes_per_edge")}
                 for r in stages])
    print(f"\noutput: {check}")
    if args.json:
        write_json(args.json, {
            "pipeline": f"DGL {dgl_version}'s tools: random_partition.py, then dispatch_data.py",
            "command": "python benchmarks/bench_dgl_pipeline.py " + " ".join(sys.argv[1:]),
            "input": str(args.input), "input_for_dgl": converted or "the input as it is", **counts, "ranks": args.ranks, "dgl_version": dgl_version,
            "dgl_tools": tools_revision(tools), "commands": {"step1": " ".join(step1), "step2": " ".join(step2)},
            "launch": "DGL's launcher's ssh replaced by a local /bin/sh (no sshd here); each rank's peak is "
                      "os.wait4's ru_maxrss", "stages": stages, "output": check,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "date": time.strftime("%Y-%m-%d %H:%M:%S")})
    return 0 if check.startswith("OK") else 1


if __name__ == "__main__":
    sys.exit(main())

"""GraphStorm's partition command, unmodified, with distpart's tools folder vs DGL 2.1's own
tools: wall time on the same input and machine (issue 20, closing note).

The command is GraphStorm 0.5.0.post1's, run from the DGL environment (scripts/setup-dgl.sh),
on host 0 of two network-namespace hosts with sshd (mpi_tests/netns.py; needs root):

    python -m graphstorm.gpartition.dist_partition_graph --input-path IN \\
        --metadata-filename updated_row_counts_metadata.json --output-path OUT --num-parts P \\
        --dgl-tool-path TOOLS --partition-algorithm random --ip-config ip_list.txt --ssh-port 22

with TOOLS = `distpart tools-path`, then DGL 2.1.0's `tools/` folder (not in DGL's wheel: take
it from a checkout, `git clone --depth 1 -b v2.1.0 https://github.com/dmlc/dgl`, and pass
`--dgl-tools dgl/tools`). Everything else is the same for both: the input, the partition
count, the environment (PATH starts with the DGL environment's bin, so GraphStorm's `python3`
has DGL, torch and pydantic, which DGL's dispatch_data.py and launcher import), and the
`ssh` both launchers use (a wrapper on PATH and Open MPI's rsh agent: the hosts' ssh config,
and `export GLOO_SOCKET_IFNAME=eth0;` before the remote command, since the namespaces'
hostnames do not resolve and DGL's gloo would otherwise bind to loopback; distpart's ranks
ignore it).

Which Python runs distpart's ranks (`--distpart-ranks`): `venv` (default) leaves GraphStorm's
interpreter without distpart, so the tools fall back to this clone's `.venv` (distpart in its
own environment, pyarrow 26); `dgl` puts this clone on PYTHONPATH, so `--python-path`,
GraphStorm's own interpreter (the DGL environment, pyarrow 17.0.0), runs them. pyarrow 17-23's
buffered Parquet stream corrupts some reads (Arrow GH-43060, GH-48311); distpart reads whole
column chunks on those versions (`chunked.readers.parquet.buffered_reads_safe`), so both work.

The input is `write_gsprocessing_graph`'s at the sizes given, with every edge feature re-cut
to its edge type's structure files, as GSProcessing's repartition step leaves it: DGL 2.1's
pipeline fails on edge feature files cut apart from the structure files (its exchange_feature
asserts equal rows per rank), which distpart reads as they are.

Per run: the command's wall time (until it exits), when `dist_graph/metadata.json` appeared,
when the last rank (DGL's data_proc_pipeline.py, distpart's dispatch) exited, and GraphStorm's
own figure for its dispatch step ("DGL graph building took"). DGL's launcher sometimes never
returns after its ranks have finished: a run still going `--hang-grace` seconds after its last
rank exited is killed and reported as hung, with the time its output was complete. Each output
is then checked against the input with `distpart verify` (both are DGL's partition format).
A run still going `--hang-grace` seconds after its log said "error:" or printed a traceback is
killed too ("hung after an error").

    sudo .venv/bin/python benchmarks/bench_graphstorm.py --dgl-tools /tmp/dgl/tools
    sudo .venv/bin/python benchmarks/bench_graphstorm.py --dgl-tools /tmp/dgl/tools --users 2000000 \\
        --items 1000000 --follows 8000000 --buys 8000000 --num-parts 4 --repeat 2 \\
        --json benchmarks/results/graphstorm.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from common import SSH_ARGS, print_table, watch_launcher, write_json

REPO = Path(__file__).resolve().parent.parent
GRAPHSTORM = "graphstorm.gpartition.dist_partition_graph"
METADATA = "updated_row_counts_metadata.json"
DEFAULT_DGL_PYTHON = "/var/cache/distpart/dgl-2.1.0/bin/python"

# A line saying a step failed (distpart's "...: error: ...", a Python traceback).
ERROR_LINE = re.compile(r"^\S+: error: |^Traceback ", re.M)

# ssh as both launchers call it: the test hosts' config, and DGL's gloo told its interface.
SSH_WRAPPER = r'''#!{python} -S
import os, sys
{ssh_args}
if i + 1 < len(args):                            # a host and a remote command
    args.insert(i + 1, "export GLOO_SOCKET_IFNAME={iface};")
os.execv("/usr/bin/ssh", ["ssh", "-F", "{config}", *args])
'''


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dgl-tools", type=Path, help="DGL 2.1.0's tools/ folder (from a checkout of dmlc/dgl at v2.1.0)")
    ap.add_argument("--dgl-python", default=os.environ.get("DISTPART_DGL_PYTHON", DEFAULT_DGL_PYTHON),
                    help="the DGL environment's Python, with GraphStorm (scripts/setup-dgl.sh)")
    ap.add_argument("--tools", nargs="+", choices=("distpart", "dgl"), default=["distpart", "dgl"],
                    help="which tools folders to run, in this order each repeat")
    ap.add_argument("--users", type=int, default=500_000)
    ap.add_argument("--items", type=int, default=250_000)
    ap.add_argument("--follows", type=int, default=2_000_000, help="user:follows:user edges (and as many -rev)")
    ap.add_argument("--buys", type=int, default=2_000_000, help="user:buys:item edges (and as many -rev)")
    ap.add_argument("--feat-dim", type=int, default=16, help="width of user/feat")
    ap.add_argument("--distpart-ranks", choices=("venv", "dgl"), default="venv",
                    help="the Python of distpart's ranks: this clone's .venv, or GraphStorm's (the DGL env)")
    ap.add_argument("--num-parts", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--hang-grace", type=float, default=60.0,
                    help="seconds a command may keep running after its last rank exited")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--work", type=Path, help="working folder (default: a temp folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the working folder")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    if "dgl" in args.tools and (args.dgl_tools is None or not (args.dgl_tools / "dispatch_data.py").is_file()):
        ap.error("--dgl-tools must name DGL 2.1.0's tools/ folder (with dispatch_data.py); "
                 "e.g. git clone --depth 1 -b v2.1.0 https://github.com/dmlc/dgl /tmp/dgl, then --dgl-tools /tmp/dgl/tools")
    return args


# ---------------------------------------------------------------- the input

def write_input(folder: Path, args: argparse.Namespace) -> Dict:
    """The generator's GSProcessing-style graph, edge features re-cut to their structure files."""
    from distpart.synthetic.gsprocessing import write_gsprocessing_graph
    graph = write_gsprocessing_graph(folder, seed=7, num_users=args.users, num_items=args.items,
                                     num_follows=args.follows, num_buys=args.buys, feat_dim=args.feat_dim,
                                     graph_name="bench")
    align_edge_features(graph["metadata"])
    return graph


def align_edge_features(meta_path: Path) -> None:
    """Rewrite every edge feature in files of its edge type's structure row counts (what
    GSProcessing's repartition step does), each edge type its own copy."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    root = meta_path.parent
    meta = json.loads(meta_path.read_text())
    for etype, feats in meta["edge_data"].items():
        sizes = meta["edges"][etype]["row_counts"]
        for name, entry in feats.items():
            table = pa.concat_tables([_read_parquet(root / f) for f in entry["data"]])
            rel_dir = f"edge_data/{etype.replace(':', '_')}-{name}-aligned/parquet"
            (root / rel_dir).mkdir(parents=True, exist_ok=True)
            files, start = [], 0
            for k, n in enumerate(sizes):
                rel = f"{rel_dir}/part-{k:05d}.snappy.parquet"
                pq.write_table(table.slice(start, n), str(root / rel), compression="snappy")
                files.append(rel)
                start += n
            entry.update(data=files, row_counts=list(sizes))
    meta_path.write_text(json.dumps(meta, indent=4) + "\n")


def _read_parquet(path: Path):
    import pyarrow.parquet as pq
    with open(path, "rb") as f:             # an open file: pyarrow takes a path with ':' for a URI
        return pq.read_table(f)


# ---------------------------------------------------------------- one run

def rank_processes(cluster) -> List[int]:
    """PIDs of the ranks on the hosts: DGL's data_proc_pipeline.py, distpart's dispatch."""
    found = []
    for h in cluster.hosts:
        pids = subprocess.run(["ip", "netns", "pids", h.netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (len(argv) > 1 and argv[1].endswith(b"data_proc_pipeline.py")) \
                    or argv[1:4] == [b"-m", b"distpart", b"dispatch"]:
                found.append(int(pid))
    return found


def run_once(cluster, cmd: List[str], env: Dict[str, str], out: Path, log: Path,
             grace: float, timeout: float) -> Dict:
    """Run the command on host 0, watching its ranks and its output; see the module docstring."""
    shutil.rmtree(out, ignore_errors=True)
    config = out / "dist_graph" / "metadata.json"
    t0 = time.monotonic()
    with open(log, "w") as f:
        # Started outside the clone: from there `python -c 'import distpart'` would find it in
        # any interpreter, and the tools would take GraphStorm's for distpart's.
        proc = subprocess.Popen(cluster.hosts[0].command(cmd), env=env, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=log.parent)
    seen_ranks, t_config, t_ranks_done, t_error = False, None, None, None
    polls = 0

    def check(now: float) -> Optional[str]:
        nonlocal seen_ranks, t_config, t_ranks_done, t_error, polls
        polls += 1
        if t_error is None and polls % 10 == 0 and ERROR_LINE.search(log.read_text(errors="replace")):
            t_error = now
        if t_config is None and config.exists():
            t_config = now
        alive = rank_processes(cluster)
        seen_ranks = seen_ranks or bool(alive)
        if seen_ranks and not alive and t_ranks_done is None:
            t_ranks_done = now
        if t_ranks_done is not None and now - t_ranks_done > grace:
            return "hung"
        if t_error is not None and now - t_error > grace:
            return "hung after an error"
        return None

    outcome = watch_launcher(proc, t0, check, timeout, poll_s=0.1)
    wall = time.monotonic() - t0
    cluster.kill_jobs()
    text = log.read_text(errors="replace")
    took = re.search(r"DGL graph building took (-?[0-9.]+) sec", text)   # GraphStorm logs it negated
    ranks = re.search(r"^distpart launch: .* (\S+) -m distpart dispatch ", text, re.M)
    return {"outcome": outcome, "returncode": proc.returncode if outcome == "exited" else None,
            "wall_s": round(wall, 2) if outcome == "exited" else None,
            "output_complete_s": round(t_config, 2) if t_config is not None else None,
            "ranks_done_s": round(t_ranks_done, 2) if t_ranks_done is not None else None,
            "graphstorm_dispatch_s": round(abs(float(took.group(1))), 2) if took else None,
            "distpart_ranks_python": ranks.group(1) if ranks else None}


def verify(graph: Dict, out: Path) -> str:
    """`distpart verify` of the output against the input: 'OK (...)' or the error."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    done = subprocess.run([shutil.which("mpiexec") or "mpiexec", "-n", "2", sys.executable, "-m", "distpart",
                           "verify", str(graph["metadata"]), str(out / "partition_assignment"),
                           str(out / "dist_graph")], capture_output=True, text=True, env=env, cwd=out)
    said = [ln for ln in (done.stdout + done.stderr).splitlines() if "verify: OK" in ln or "error" in ln]
    return (said or [f"exit {done.returncode}"])[0].strip()


def tree(out: Path) -> List[str]:
    """`find OUT -maxdepth 2`, sorted."""
    return sorted(subprocess.run(["find", str(out), "-maxdepth", "2"], capture_output=True, text=True)
                  .stdout.splitlines())


# ---------------------------------------------------------------- main

def job_env(cluster, work: Path, dgl_python: str, distpart_ranks: str) -> Dict[str, str]:
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "ssh"
    system_python = shutil.which("python3", path="/usr/bin:/bin") or sys._base_executable
    wrapper.write_text(SSH_WRAPPER.replace("{ssh_args}", SSH_ARGS).replace("{python}", system_python).replace("{iface}", cluster.iface)
                       .replace("{config}", str(cluster.ssh_config)))
    wrapper.chmod(0o755)
    env = dict(cluster.env)
    for var in ("VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(var, None)
    env.update(PATH=f"{bin_dir}:{Path(dgl_python).parent}:/usr/bin:/bin", OMPI_MCA_plm_rsh_agent=str(wrapper))
    if distpart_ranks == "dgl":
        env["PYTHONPATH"] = str(REPO)
    return env


def main() -> int:
    args = parse_args()
    sys.path.insert(0, str(REPO / "mpi_tests"))
    from netns import netns_cluster   # noqa: E402 - the test hosts (needs root)
    tools_path = subprocess.run([sys.executable, "-m", "distpart", "tools-path"], capture_output=True, text=True,
                                check=True).stdout.strip()
    tools = {"distpart": tools_path, "dgl": str(args.dgl_tools.resolve()) if args.dgl_tools else None}
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-graphstorm-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t = time.monotonic()
        graph = write_input(work / "in", args)
        print(f"input: {work / 'in'} written in {time.monotonic() - t:.1f} s "
              f"({sum(graph['num_nodes'].values())} nodes, {sum(len(s) for s, _ in graph['edges'].values())} edges)",
              flush=True)
        results: List[Dict] = []
        trees: Dict[str, List[str]] = {}
        commands: Dict[str, str] = {}
        with netns_cluster(work / "ns", 2) as cluster:
            env = job_env(cluster, work, args.dgl_python, args.distpart_ranks)
            ips = work / "ip_list.txt"
            ips.write_text("".join(f"{h.address}\n" for h in cluster.hosts))
            for rep in range(args.repeat):
                for name in args.tools:
                    out = work / f"out-{name}"
                    cmd = [args.dgl_python, "-m", GRAPHSTORM, "--input-path", str(work / "in"),
                           "--metadata-filename", METADATA, "--output-path", str(out),
                           "--num-parts", str(args.num_parts), "--dgl-tool-path", tools[name],
                           "--partition-algorithm", "random", "--ip-config", str(ips), "--ssh-port", "22"]
                    commands[name] = shlex.join(cmd)
                    print(f"[{rep + 1}/{args.repeat}] {name}: {commands[name]}", flush=True)
                    row = {"tools": name, "repeat": rep + 1,
                           **run_once(cluster, cmd, env, out, work / f"log-{name}-{rep + 1}.txt",
                                      args.hang_grace, args.timeout)}
                    row["verify"] = verify(graph, out) if row["output_complete_s"] is not None else "no output"
                    trees[name] = tree(out)
                    print(f"    {row}", flush=True)
                    results.append(row)
        print()
        print_table(results)
        for name, lines in trees.items():
            print(f"\nfind OUT -maxdepth 2 ({name} tools):")
            print("\n".join(lines))
        if args.json:
            write_json(args.json, {
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                            "hosts": "2 network namespaces on this machine (mpi_tests/netns.py)"},
                "input": {"generator": "write_gsprocessing_graph, edge features re-cut to the structure files",
                          "users": args.users, "items": args.items, "follows": args.follows, "buys": args.buys,
                          "feat_dim": args.feat_dim,
                          "nodes": sum(graph["num_nodes"].values()),
                          "edges": sum(len(s) for s, _ in graph["edges"].values())},
                "num_parts": args.num_parts, "hang_grace_s": args.hang_grace, "distpart_ranks": args.distpart_ranks,
                "commands": commands, "results": results, "output_trees": trees})
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep or args.work:
            print(f"kept {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

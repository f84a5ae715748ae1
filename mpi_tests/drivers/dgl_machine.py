"""One machine of a DGL training job, started as DGL's tools/launch.py starts it.

    dgl_machine.py --machine I --job JOB.json

The launcher ssh-es to machine I and runs there, with the environment variables below,
`num_servers` server commands and one trainer command under `torch.distributed.run`
(DGL 2.1.0's tools/launch.py: construct_dgl_server_env_vars, construct_dgl_client_env_vars,
wrap_udf_in_torch_dist_launcher, submit_jobs). This driver runs the same commands with the same
variables on the machine it is started on, which mpi_tests/test_dgl_training.py makes a network
namespace of its own (own address, like a real machine) and a mount namespace with its own
/dev/shm: DGL servers hand their partition to local trainers through shared memory under
names that do not say which partition, so two machines must not share one /dev/shm.

JOB.json: python, script, script_args, ip_config, part_config, num_machines, num_servers,
num_trainers, num_samplers, graph_format, master_addr, master_port, extra_env, timeout, and
optionally shm_size (the private /dev/shm's tmpfs size, default 2g).
Exit status: the trainer's, or 1 if any process failed or the timeout passed (then every
process this driver started is killed).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Dict, List


def _private_shm(size: str) -> None:
    """A fresh /dev/shm for this machine (the driver runs in its own mount namespace)."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=1777", "tmpfs", "/dev/shm"], check=True,
                   timeout=30)


def _server_env(job: Dict, server_id: int) -> Dict[str, str]:
    tot_num_clients = job["num_trainers"] * (1 + job["num_samplers"]) * job["num_machines"]
    return {"DGL_ROLE": "server", "DGL_NUM_SAMPLER": str(job["num_samplers"]), "OMP_NUM_THREADS": "1",
            "DGL_NUM_CLIENT": str(tot_num_clients), "DGL_CONF_PATH": job["part_config"],
            "DGL_IP_CONFIG": job["ip_config"], "DGL_NUM_SERVER": str(job["num_servers"]),
            "DGL_GRAPH_FORMAT": job["graph_format"], "DGL_SERVER_ID": str(server_id)}


def _client_env(job: Dict) -> Dict[str, str]:
    tot_num_clients = job["num_trainers"] * (1 + job["num_samplers"]) * job["num_machines"]
    return {"DGL_DIST_MODE": "distributed", "DGL_ROLE": "client", "DGL_NUM_SAMPLER": str(job["num_samplers"]),
            "DGL_NUM_CLIENT": str(tot_num_clients), "DGL_CONF_PATH": job["part_config"],
            "DGL_IP_CONFIG": job["ip_config"], "DGL_NUM_SERVER": str(job["num_servers"]),
            "DGL_GRAPH_FORMAT": job["graph_format"], "OMP_NUM_THREADS": "1", "DGL_GROUP_ID": "0"}


def _start(argv: List[str], env: Dict[str, str], tag: str) -> subprocess.Popen:
    full = dict(os.environ, **env)
    print(f"[{tag}] {' '.join(f'{k}={v}' for k, v in sorted(env.items()))} {' '.join(argv)}", flush=True)
    return subprocess.Popen(argv, env=full, start_new_session=True)


def kill_groups(procs: List[subprocess.Popen], wait: float = 10) -> None:
    """SIGKILL the process group of every process still running, then reap each (bounded)."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for proc in procs:
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--machine", type=int, required=True)
    p.add_argument("--job", required=True)
    args = p.parse_args(argv)
    with open(args.job) as f:
        job = json.load(f)
    _private_shm(job.get("shm_size", "2g"))
    udf = [job["python"], job["script"], *job["script_args"]]
    procs: List[subprocess.Popen] = []
    try:
        # Servers first, as the launcher does; the trainers' RPC client retries until they listen.
        for i in range(job["num_servers"]):
            server_id = args.machine * job["num_servers"] + i
            procs.append(_start(udf, {**_server_env(job, server_id), **job["extra_env"]}, f"server {server_id}"))
        torch_run = [job["python"], "-m", "torch.distributed.run", f"--nproc_per_node={job['num_trainers']}",
                     f"--nnodes={job['num_machines']}", f"--node_rank={args.machine}",
                     f"--master_addr={job['master_addr']}", f"--master_port={job['master_port']}"]
        trainer = _start([*torch_run, *udf[1:]], {**_client_env(job), **job["extra_env"]}, f"trainers {args.machine}")
        procs.append(trainer)
        deadline = time.time() + job["timeout"]
        while time.time() < deadline:
            codes = [proc.poll() for proc in procs]
            if all(code is not None for code in codes):
                # Servers exit when the last trainer of the job says goodbye.
                return 0 if all(code == 0 for code in codes) else 1
            if any(code not in (None, 0) for code in codes):
                print(f"machine {args.machine}: a process failed: exit codes {codes}", flush=True)
                return 1
            time.sleep(0.5)
        print(f"machine {args.machine}: timed out after {job['timeout']} s", flush=True)
        return 1
    finally:
        kill_groups(procs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

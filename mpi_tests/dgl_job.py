"""A DGL training job on network-namespace hosts (netns.py), started as DGL's tools/launch.py
starts it: one machine per host, each running drivers/dgl_machine.py (its servers and
trainers, with the launcher's environment variables) in a mount namespace of its own with a
private /dev/shm. test_dgl_training.py and benchmarks/bench_training.py both run their jobs
through here.

    ip_config = write_ip_config(cluster, work, port)
    job = write_job(cluster, work, python=..., script=..., script_args=[...], ip_config=ip_config,
                    part_config=..., master_port=..., timeout=...)
    outcome = run_machines(cluster, python, job, work, timeout, env)

Every process a job starts lives inside the cluster's namespaces: `run_machines` kills what is
left when the job ends, fails or runs out of time (also on an exception, Ctrl-C included).
The private /dev/shm belongs to each machine driver's mount namespace and goes with its last
process.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from drivers.dgl_machine import kill_groups

DRIVERS = Path(__file__).resolve().parent / "drivers"

# DGL failures worth naming on their own, most telling first (the launcher's traceback around
# them says little); else the last exception line of a log.
KNOWN_FAILURES = ("Failed to map shared memory", "Address already in use", "out of memory")
EXCEPTION_LINE = re.compile(r"^\s*[\w.]*(Error|Exception|Interrupt)\b.*")


def write_ip_config(cluster, work: Path, port: int) -> Path:
    """DGL's ip_config.txt: one line per machine, its address and the servers' port."""
    path = work / "ip_config.txt"
    path.write_text("".join(f"{h.address} {port}\n" for h in cluster.hosts))
    return path


def write_job(cluster, work: Path, *, python: str, script: str, script_args: Sequence[str], ip_config: Path,
              part_config: Path, master_port: int, timeout: float, extra_env: Optional[Dict[str, str]] = None,
              num_servers: int = 1, num_trainers: int = 1, num_samplers: int = 0, graph_format: str = "csc",
              shm_size: Optional[str] = None) -> Path:
    """JOB.json for drivers/dgl_machine.py; `timeout` is each machine's own limit (keep it below
    run_machines' so a machine reports its timeout itself). gloo is told the machines'
    interface, as `launch.py --extra_envs GLOO_SOCKET_IFNAME=...` would."""
    job = {"python": python, "script": str(script), "script_args": [str(a) for a in script_args],
           "ip_config": str(ip_config), "part_config": str(part_config), "num_machines": len(cluster.hosts),
           "num_servers": num_servers, "num_trainers": num_trainers, "num_samplers": num_samplers,
           "graph_format": graph_format, "master_addr": cluster.hosts[0].address, "master_port": master_port,
           "extra_env": {"GLOO_SOCKET_IFNAME": cluster.iface, **(extra_env or {})}, "timeout": timeout}
    if shm_size:
        job["shm_size"] = shm_size
    path = work / "job.json"
    path.write_text(json.dumps(job))
    return path


@dataclass
class JobOutcome:
    returncodes: List[Optional[int]]   # per machine; None: still running when the job was stopped
    logs: List[Path]                   # per machine: its servers' and trainers' output
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(code == 0 for code in self.returncodes)

    def log_tail(self, machine: int, chars: int = 6000) -> str:
        path = self.logs[machine]
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def failure(self) -> Optional[str]:
        """None for a job that succeeded; else the first known DGL failure line of any machine's
        log, or which machines failed and how."""
        if self.ok:
            return None
        texts = [path.read_text(errors="replace") if path.exists() else "" for path in self.logs]
        for known in KNOWN_FAILURES:
            for i, text in enumerate(texts):
                line = next((ln for ln in text.splitlines() if known in ln), None)
                if line is not None:
                    return f"machine {i}: {line.strip()[:300]}"
        for i, text in enumerate(texts):
            raised = [ln for ln in text.splitlines() if EXCEPTION_LINE.match(ln)]
            if raised:
                return f"machine {i}: {raised[-1].strip()[:300]}"
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        return f"machine exit codes {self.returncodes}"


def run_machines(cluster, python: str, job: Path, work: Path, timeout: float, env: Dict[str, str]) -> JobOutcome:
    """Start every machine's driver (host i is machine i); wait until all have exited, one has
    failed (the others would wait for it until their timeout) or `timeout` has passed; then
    kill whatever is left on the hosts."""
    procs: List[subprocess.Popen] = []
    logs = [work / f"machine{h.index}.log" for h in cluster.hosts]
    files = []
    start = time.monotonic()
    timed_out = False
    try:
        for h, log in zip(cluster.hosts, logs):
            f = open(log, "w")
            files.append(f)
            argv = h.command(["unshare", "--mount", "--propagation", "private", python,
                              DRIVERS / "dgl_machine.py", "--machine", h.index, "--job", job])
            procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=env, start_new_session=True))
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
                break
            if time.monotonic() - start > timeout:
                timed_out = True
                break
            time.sleep(0.5)
    finally:
        kill_groups(procs, wait=30)
        cluster.kill_jobs()   # whatever a machine driver left behind (servers, torch's workers)
        for f in files:
            f.close()
    codes = [p.returncode for p in procs]
    return JobOutcome(codes, logs, timed_out, time.monotonic() - start)

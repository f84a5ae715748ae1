"""A one-machine SLURM for tests: munged, slurmctld and slurmd configured in a temp dir.

Debian's slurm-wlm and munge packages, started by the test itself on loopback with ports
it picks, state, spool, logs and the munge key all under the temp dir; clients find the
configuration through SLURM_CONF. Every daemon (and any slurmstepd left by a job) is
stopped afterwards, also on failure. Skips, with the reason, where the packages are
missing or the test is not root.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from conftest import mpi_env

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
CLIENTS = ("sbatch", "srun", "sinfo", "scancel", "squeue")


@dataclass
class Slurm:
    dir: Path
    conf: Path
    node: str
    env: Dict[str, str]

    def run(self, argv: List[str], timeout: float = 240) -> subprocess.CompletedProcess:
        """A SLURM client command; a job still running at the timeout is cancelled."""
        try:
            return subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            subprocess.run(["scancel", "--user", "root"], env=self.env, timeout=30)
            pytest.fail(f"timed out after {timeout}s: {' '.join(map(str, argv))}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _skip_reason() -> str:
    if os.geteuid() != 0:
        return "the test SLURM runs its daemons as root"
    missing = [d for d in DAEMONS if not Path(d).exists()] + [c for c in CLIENTS if not shutil.which(c)]
    return f"not installed: {', '.join(missing)} (scripts/setup-test.sh installs slurmctld, slurmd, " \
           f"slurm-client and munge)" if missing else ""


def _config(d: Path, node: str, cpus: int, mem_mb: int) -> str:
    return f"""ClusterName=distpart-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d / 'munge.socket'}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d / 'state'}
SlurmdSpoolDir={d / 'spool'}
SlurmctldPidFile={d / 'slurmctld.pid'}
SlurmdPidFile={d / 'slurmd.pid'}
SlurmctldLogFile={d / 'slurmctld.log'}
SlurmdLogFile={d / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


def _stop(procs: List[subprocess.Popen], d: Path) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.time() + 10
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    # Job step daemons that outlived slurmd (they would keep the spool dir busy).
    for line in subprocess.run(["pgrep", "-f", f"slurmstepd.*{d}|slurmstepd"], capture_output=True,
                               text=True).stdout.split():
        try:
            cmdline = Path(f"/proc/{line}/cmdline").read_bytes()
            if b"slurmstepd" in cmdline:
                os.kill(int(line), signal.SIGKILL)
        except (OSError, ValueError):
            pass


@contextmanager
def slurm(tmp: Path) -> Iterator[Slurm]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    d = tmp / "slurm"
    for sub in ("state", "spool"):
        (d / sub).mkdir(parents=True)
    os.chmod(d, 0o755)
    node = socket.gethostname()
    conf = d / "slurm.conf"
    conf.write_text(_config(d, node, os.cpu_count() or 2, 4000))
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    env = mpi_env()
    env["SLURM_CONF"] = str(conf)
    procs: List[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(
            ["/usr/sbin/munged", "-F", "-f", f"--key-file={key}", f"--socket={d / 'munge.socket'}",
             f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'munged.seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True))
        deadline = time.time() + 15
        while not (d / "munge.socket").exists():
            if procs[0].poll() is not None or time.time() > deadline:
                raise RuntimeError(f"munged did not start: {procs[0].stderr.read().decode() if procs[0].stderr else ''}")
            time.sleep(0.1)
        for daemon in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd"):
            procs.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True))
        deadline = time.time() + 60
        while True:
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=env,
                                   timeout=30).stdout.strip()
            if state in ("idle", "mixed"):
                break
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                logs = "\n".join((d / f).read_text()[-2000:] for f in ("slurmctld.log", "slurmd.log")
                                 if (d / f).exists())
                raise RuntimeError(f"SLURM did not come up (node state {state!r}):\n{logs}")
            time.sleep(0.3)
        yield Slurm(d, conf, node, env)
    finally:
        _stop(procs, d)

"""A one-machine SLURM cluster for tests: Debian's munged, slurmctld and slurmd, configured
and run in a temp dir, always stopped afterwards.

    with slurm_cluster(tmp_path) as cluster:
        job = cluster.sbatch(script, "-N", "1", "-n", "2", timeout=180)
        run = cluster.run(["srun", "--mpi=pmix", "-n", "2", ...], timeout=120)

Everything lives under the temp dir: the munge key, socket, pid, log and seed files, slurm.conf
(`AuthInfo=socket=` that munge socket), state, spool, the jobs' TmpFS, logs and pid files. The controller
and the node are this machine's hostname at 127.0.0.1 in a network namespace of the cluster's
own (the supervisor below starts in it through `unshare --net`; it has `lo` and a veth pair): no traffic
leaves it, and SLURM's ports cannot collide with anything else on the machine. Choosing
"free" ports in the shared namespace raced with the parallel tests' own connections (seen in
CI: slurmd "Address already in use"). Client commands enter the namespace with `nsenter`
(`cluster.command`); it goes away with the supervisor's process tree. The system's own
munge/SLURM (if any) is neither used nor touched. Clients find the configuration through
`SLURM_CONF` in `cluster.env`.

The daemons run under a small supervisor process (this file run as a script) that is a
child subreaper: every process of the cluster, including the `slurmstepd`s that daemonize
out of slurmd and the job's tasks, stays below it, so it reaps them (no `<defunct>` left
on machines whose PID 1 does not reap) and, on `stop` or when the test process dies
(its stdin closes), terminates the whole tree. Afterwards the fixture checks, by the
marker variable every process of this cluster carries in its environment, that nothing
survived, and fails the test otherwise.

Every client call is bounded: a command (or job) that outlives its timeout has its jobs
`scancel`ed and its process group killed, and the test fails with the daemons' log tails.
Skips (saying why) only when not root or when the packages are missing.
"""
from __future__ import annotations

import ctypes
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

MUNGED = "/usr/sbin/munged"
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
SLURMSTEPD = "/usr/sbin/slurmstepd"
CLIENTS = ("sbatch", "srun", "salloc", "sinfo", "squeue", "scontrol", "scancel")
MARKER = "DISTPART_TEST_SLURM"          # set to the cluster's dir in every process it starts
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
PR_SET_CHILD_SUBREAPER = 36

from harness import Run, mpi_env   # imports no pytest: the supervisor runs without it


# --------------------------------------------------------------------------------------
# The supervisor (runs as `python slurm.py --supervise`, no pytest in this process)
# --------------------------------------------------------------------------------------

def _children(pid: int) -> List[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) "
            if int(fields[1]) == pid:
                kids.append(int(entry))
    return kids


def _reap() -> Dict[int, int]:
    """Reap every finished child (the supervisor owns nothing else): pid -> wait status."""
    done = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done[pid] = status


def _supervise() -> None:
    """Start daemons on request, reap everything below us, tear the tree down on `stop` or EOF.

    Protocol: one JSON object per line on stdin, one reply per line on stdout.
      {"start": argv, "env": {...}, "out": path}  -> {"pid": N}
      {"stop": seconds}                           -> {"survivors": [pids]}, then exit
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(json.dumps({"error": f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}"}), flush=True)
        return
    # Our network namespace (unshare --net) starts with lo down: SLURM talks over 127.0.0.1.
    # slurmd binds through getaddrinfo(AI_ADDRCONFIG), which finds no IPv4 at all while lo is
    # the only interface, so one end of a veth pair (both ends in this namespace; containers
    # often lack the dummy driver) gets one address (TEST-NET-1, RFC 5737; nothing is sent
    # to it). They vanish with the namespace.
    for cmd in (["link", "set", "lo", "up"], ["link", "add", "dp0", "type", "veth", "peer", "name", "dp1"],
                ["addr", "add", "192.0.2.1/32", "dev", "dp0"], ["link", "set", "dp1", "up"],
                ["link", "set", "dp0", "up"]):
        done = subprocess.run(["ip", *cmd], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            print(json.dumps({"error": f"ip {' '.join(cmd)}: {done.stderr.strip()}"}), flush=True)
            return
    print(json.dumps({"ready": os.getpid()}), flush=True)
    started: List[int] = []
    grace = 10.0
    buf = b""
    while True:
        ready, _, _ = select.select([sys.stdin.buffer], [], [], 0.2)
        _reap()
        if not ready:
            continue
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:                       # the test process is gone: clean up anyway
            break
        buf += chunk
        stop = False
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            if "start" in req:
                with open(req["out"], "ab") as out:
                    proc = subprocess.Popen(req["start"], env=req["env"], stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=subprocess.STDOUT)
                started.append(proc.pid)
                print(json.dumps({"pid": proc.pid}), flush=True)
            elif "stop" in req:
                grace = float(req["stop"])
                stop = True
        if stop:
            break
    survivors = _teardown(started, grace)
    try:
        print(json.dumps({"survivors": survivors}), flush=True)
    except BrokenPipeError:
        pass


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _teardown(started: List[int], grace: float) -> List[int]:
    """SIGTERM the daemons (slurmd, slurmctld, munged: reverse start order), wait up to
    `grace` s, then SIGKILL whatever is left below us, generation by generation (orphans
    are re-parented to us), reaping all of it. Returns any pid still alive."""
    me = os.getpid()
    deadline = time.monotonic() + grace
    for pid in reversed(started):       # one by one: slurmctld still needs munged to shut down
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        while time.monotonic() < deadline and _alive(pid):
            _reap()
            time.sleep(0.05)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        _reap()
        kids = _children(me)
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    _reap()
    return [p for p in _children(me) if _alive(p)]


# --------------------------------------------------------------------------------------
# The test side
# --------------------------------------------------------------------------------------

def skip_reason() -> str:
    """Why the SLURM tests cannot run here, or ""."""
    if os.geteuid() != 0:
        return "the test SLURM runs munged, slurmctld and slurmd as root (SlurmUser=root): run as root"
    missing = [p for p in (MUNGED, SLURMCTLD, SLURMD, SLURMSTEPD) if not Path(p).exists()]
    missing += [c for c in (*CLIENTS, "unshare", "nsenter", "ip") if shutil.which(c) is None]
    if missing:
        return (f"not installed: {', '.join(missing)} (scripts/setup-test.sh installs munge, "
                f"slurmctld, slurmd and slurm-client)")
    return ""


@dataclass
class Job:
    id: str
    info: Dict[str, str]

    @property
    def state(self) -> str:
        return self.info.get("JobState", "?")

    @property
    def exit_code(self) -> str:
        return self.info.get("ExitCode", "?")


class ClusterFailure(AssertionError):
    """A command or job outlived its timeout, or the cluster misbehaved."""


def _node_line(node: str) -> str:
    """This machine as slurmd sees it (`slurmd -C`): CPUs, sockets, cores, threads, RealMemory."""
    try:
        out = subprocess.run([SLURMD, "-C"], capture_output=True, text=True, timeout=30).stdout
        line = next(l for l in out.splitlines() if l.startswith("NodeName="))
        fields = dict(f.split("=", 1) for f in line.split())
    except (subprocess.TimeoutExpired, StopIteration, ValueError):
        mem_kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        fields = {"CPUs": str(os.cpu_count() or 1), "RealMemory": str(mem_kb // 1024)}
    keep = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    return f"NodeName={node} NodeAddr=127.0.0.1 " + " ".join(f"{k}={fields[k]}" for k in keep if k in fields)


def _config(d: Path, node: str, extra: Sequence[str]) -> str:
    # SLURM's own default ports: the cluster's network namespace has nothing else in it.
    ctld_port, slurmd_port = 6817, 6818
    lines = [
        "ClusterName=distpart-test",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        # Job IDs from a random start, not 1: Open MPI names its shared-memory segments and SLURM's
        # PMIx plugin its folders after the job and step, so two test SLURMs on one machine (two
        # test runs at once) both at job 1 would share them (seen: a rank's segfault in btl_vader).
        f"FirstJobId={random.randrange(10_000, 9_000_000)}",
        f"SlurmdPort={slurmd_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d / 'munge' / 'munge.socket'}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={d / 'state'}",
        f"SlurmdSpoolDir={d / 'spool'}",
        # The jobs' temp dir, where SLURM's PMIx plugin makes spmix_appdir_<uid>_<job>.<step>:
        # in /tmp, a second test SLURM (another test run on this machine) at the same job ID
        # would share that folder and remove it under a running step.
        f"TmpFS={d / 'tmp'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}",
        f"SlurmdPidFile={d / 'slurmd.pid'}",
        f"SlurmctldLogFile={d / 'slurmctld.log'}",
        f"SlurmdLogFile={d / 'slurmd.log'}",
        f"PlugStackConfig={d / 'plugstack.conf'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MailProg=/bin/true",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/builtin",
        # Start a batch job as soon as it is submitted: SLURM's defaults hold it back up to 3 s
        # (batch_sched_delay) and run the main scheduler at most every 2 s (sched_min_interval).
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "KillWait=5",
        "InactiveLimit=0",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        *extra,
        f"{_node_line(node)} State=UNKNOWN",
        f"PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def marked_processes(marker_value: str) -> List[int]:
    """Live (non-zombie) processes whose environment carries MARKER=marker_value."""
    needle = f"{MARKER}={marker_value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in env and _alive(int(entry)):
            found.append(int(entry))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


@dataclass
class SlurmCluster:
    dir: Path
    conf: Path
    node: str
    env: Dict[str, str]
    supervisor: subprocess.Popen
    daemons: Dict[str, int] = field(default_factory=dict)

    # --- plumbing ---------------------------------------------------------------------
    def _ask(self, req: dict, timeout: float = 30) -> dict:
        self.supervisor.stdin.write((json.dumps(req) + "\n").encode())
        self.supervisor.stdin.flush()
        return self._answer(timeout)

    def _answer(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.supervisor.stdout], [], [], timeout)
        line = self.supervisor.stdout.readline() if ready else b""
        if not line:
            raise ClusterFailure(f"the SLURM test supervisor did not answer within {timeout}s")
        return json.loads(line)

    def _start(self, name: str, argv: List[str]) -> int:
        pid = self._ask({"start": argv, "env": self.env, "out": str(self.dir / f"{name}.out")})["pid"]
        self.daemons[name] = pid
        return pid

    def logs(self, tail: int = 3000) -> str:
        """The last bytes of every daemon log and daemon stdout, for failure messages."""
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munge/munged.log", "munged.out",
                     "slurmctld.out", "slurmd.out"):
            f = self.dir / name
            if f.exists() and f.stat().st_size:
                parts.append(f"--- {f} ---\n{f.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    def check_daemons(self) -> None:
        dead = [name for name, pid in self.daemons.items() if not _alive(pid)]
        if dead:
            raise ClusterFailure(f"SLURM daemon(s) died: {', '.join(dead)}\n{self.logs()}")

    # --- clients ----------------------------------------------------------------------
    def command(self, argv: Sequence) -> List[str]:
        """argv run inside the cluster's network namespace (the supervisor's)."""
        return ["nsenter", f"--net=/proc/{self.supervisor.pid}/ns/net", "--", *[str(a) for a in argv]]

    def run(self, argv: Sequence, timeout: float = 60, env: Optional[Dict[str, str]] = None,
            cwd: Optional[Path] = None) -> Run:
        """A client command (srun, salloc, sinfo, ...) in its own process group, run in the
        cluster's dir unless told (so a job's default slurm-N.out lands there). Past the
        timeout every job of this cluster is scancel'ed, the group killed, and the test fails."""
        argv = [str(a) for a in argv]
        proc = subprocess.Popen(self.command(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env or self.env, cwd=cwd or self.dir, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            cancelled = self.cancel_all()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            raise ClusterFailure(f"timed out after {timeout}s (jobs {cancelled or 'none'} cancelled): "
                                 f"{' '.join(argv)}\n{out}\n{err}\n{self.logs()}")
        return Run(proc.returncode, out, err)

    def jobs(self) -> List[str]:
        """IDs of the jobs this cluster still has pending or running."""
        return self._quick(["squeue", "-h", "-o", "%i"]).stdout.split()

    def _quick(self, argv: List[str], timeout: float = 30) -> Run:
        """A short query or control command; never recurses into cancel_all."""
        try:
            r = subprocess.run(self.command(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               env=self.env, cwd=self.dir, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Run(124, "", f"timed out after {timeout}s: {' '.join(argv)}")
        return Run(r.returncode, r.stdout, r.stderr)

    def cancel_all(self) -> List[str]:
        ids = self.jobs()
        if ids:
            self._quick(["scancel", *ids])
        return ids

    def job(self, job_id: str) -> Dict[str, str]:
        """`scontrol show job -o ID` as a dict (JobState, ExitCode, StdOut, ...)."""
        out = self._quick(["scontrol", "show", "job", "-o", job_id]).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def wait_job(self, job_id: str, timeout: float) -> Job:
        """Wait until the job ends; past the timeout scancel it and fail."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.job(job_id)
            if info.get("JobState") in TERMINAL:
                return Job(job_id, info)
            if time.monotonic() > deadline:
                self._quick(["scancel", job_id])
                end = time.monotonic() + 30
                while self.job(job_id).get("JobState") not in TERMINAL and time.monotonic() < end:
                    time.sleep(0.5)
                raise ClusterFailure(f"job {job_id} still {info.get('JobState')} after {timeout}s: "
                                     f"cancelled\n{self.logs()}")
            self.check_daemons()
            time.sleep(0.1)

    def sbatch(self, script: Path, *options, timeout: float = 180) -> Job:
        """Submit a batch script (`sbatch --parsable OPTIONS SCRIPT`) and wait for it to end."""
        run = self.run(["sbatch", "--parsable", *options, script], timeout=30)
        if run.returncode != 0:
            raise ClusterFailure(f"sbatch refused the job:\n{run.output}\n{self.logs()}")
        return self.wait_job(run.stdout.strip().split(";")[0], timeout)

    # --- lifecycle --------------------------------------------------------------------
    def wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            self.check_daemons()
            state = self._quick(["sinfo", "-h", "-N", "-o", "%T"], timeout=15).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.3)
        raise ClusterFailure(f"SLURM did not come up within {timeout}s (node state {state!r})\n{self.logs()}")

    def stop(self, grace: float = 10) -> None:
        """Cancel the jobs, stop every daemon and job process, check that nothing survived."""
        problems = []
        if self.supervisor.poll() is None:
            if self.daemons and all(_alive(p) for p in self.daemons.values()):
                self.cancel_all()
            try:
                survivors = self._ask({"stop": grace}, timeout=grace + 30).get("survivors", [])
                if survivors:
                    problems.append(f"still alive under the supervisor: {survivors}")
            except (ClusterFailure, BrokenPipeError, ValueError) as e:
                problems.append(str(e))
            try:
                self.supervisor.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.supervisor.kill()
                self.supervisor.wait(timeout=10)
                problems.append("the supervisor did not exit")
        for f in (self.supervisor.stdin, self.supervisor.stdout):
            f.close()
        # Independently of the supervisor: anything carrying this cluster's marker.
        left = marked_processes(str(self.dir))
        left += [p for p in self.daemons.values() if _alive(p) and p not in left]
        if left:
            problems.append("left running: " + "; ".join(f"{p} {_cmdline(p)}" for p in left))
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if problems:
            raise ClusterFailure("stopping the test SLURM: " + "\n".join(problems))


@contextmanager
def slurm_cluster(tmp: Path, extra_conf: Sequence[str] = (), start_timeout: float = 60) -> Iterator[SlurmCluster]:
    """A running one-node SLURM under tmp/slurm-XXXXXX; stopped (and checked) on exit, also on failure.
    Skips the test when not root or the packages are missing."""
    reason = skip_reason()
    if reason:
        import pytest
        pytest.skip(reason)
    d = (tmp / f"slurm-{uuid.uuid4().hex[:6]}").resolve()
    # A PMIx step's server socket is SlurmdSpoolDir/stepd.slurm.pmix.<job>.<step>, and a UNIX
    # socket path has at most 107 bytes: past that every srun --mpi=pmix step fails to launch
    # ("Unspecified error"; slurmd.log: "UNIX socket path is too long"). pytest-xdist makes
    # tmp_path 10 bytes longer, which a test's own tmp_path did not survive.
    if len(str(d / "spool")) > 107 - len("/stepd.slurm.pmix.9999999.999"):
        raise ClusterFailure(f"{d}: too long a path for the PMIx step sockets under it: give "
                             f"slurm_cluster a shorter folder (tmp_path_factory.mktemp)")
    for sub in ("state", "spool", "munge", "tmp"):
        (d / sub).mkdir(parents=True)
    for sub in (d, d / "munge"):
        os.chmod(sub, 0o755)     # munged: socket dir searchable by all, key dir writable by root only
    node = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(_config(d, node, extra_conf))
    (d / "plugstack.conf").write_text("")
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)

    # Open MPI's root/oversubscribe settings (harness.mpi_env), reaching every job through sbatch's and
    # srun's default --export=ALL; no SLURM variables of an enclosing real job.
    env = {k: v for k, v in mpi_env().items() if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_"))}
    env["SLURM_CONF"] = str(conf)
    env[MARKER] = str(d)

    supervisor = subprocess.Popen(["unshare", "--net", "--", sys.executable, str(Path(__file__).resolve()),
                                   "--supervise"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                  cwd=d, start_new_session=True)
    cluster = SlurmCluster(d, conf, node, env, supervisor)
    with ExitStack() as stack:
        stack.callback(cluster.stop)
        hello = cluster._answer(30)
        if "ready" not in hello:
            raise ClusterFailure(f"the SLURM test supervisor could not start: {hello}")
        munge = d / "munge"
        # --force: pytest's tmp dirs are 0700, so the socket is reachable by root only, which is
        # all this cluster needs (SlurmUser=root, jobs run as root); munged would refuse otherwise.
        cluster._start("munged", [MUNGED, "--foreground", "--force", f"--key-file={munge / 'munge.key'}",
                                  f"--socket={munge / 'munge.socket'}", f"--pid-file={munge / 'munged.pid'}",
                                  f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"])
        deadline = time.monotonic() + 15
        while not (munge / "munge.socket").exists():
            cluster.check_daemons()
            if time.monotonic() > deadline:
                raise ClusterFailure(f"munged did not create its socket within 15s\n{cluster.logs()}")
            time.sleep(0.05)
        cluster._start("slurmctld", [SLURMCTLD, "-D", "-f", str(conf)])
        cluster._start("slurmd", [SLURMD, "-D", "-f", str(conf)])
        cluster.wait_idle(start_timeout)
        yield cluster


if __name__ == "__main__" and sys.argv[1:] == ["--supervise"]:
    _supervise()

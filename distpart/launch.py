"""Starting a distpart job across machines: DGL's ip_config.txt or a hostfile -> mpiexec.

DGL's tools take a job's machines from `ip_config.txt` (one machine per line, `IP [PORT]
[more columns]`); batch systems hand out node lists (`$PBS_NODEFILE`, one line per slot);
mpiexec wants a hostfile in its own dialect (Open MPI `host slots=N`, MPICH/Hydra
`host:N`). `distpart launch` reads any of these, detects the site's MPI from
`mpiexec --version`, writes the hostfile for it, checks that every remote host answers
over ssh (so an unreachable node is named at once instead of hanging mpiexec), and starts
the job with what remote ranks need: PATH and the virtualenv (a remote ssh session does not
have them), and the network interface MPI must use.

The parsing and command building are pure functions; `launch_main` runs them.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import InputError

FLAVORS = ("openmpi", "mpich")
# Variables remote ranks need to find the same Python, venv and libraries as the launcher.
FORWARDED_ENV = ("PATH", "VIRTUAL_ENV", "PYTHONPATH", "LD_LIBRARY_PATH", "MPI4PY_MPIABI", "MPI4PY_LIBMPI",
                 "PARMETIS_LIB", "PARMETIS_IDXWIDTH", "PARMETIS_REALWIDTH")
SSH_TIMEOUT_S = 10


# ---------------------------------------------------------------- host lists

def read_ip_config(path: "str | Path") -> List[str]:
    """Hosts of a DGL ip_config.txt in order, one per line (port and further columns ignored)."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    hosts = []
    for i, line in enumerate(lines, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) >= 2 and not fields[1].isdigit():
            raise InputError(path, f"line {i}: expected 'IP [PORT] ...', found {line.strip()!r}")
        hosts.append(fields[0])
    if not hosts:
        raise InputError(path, "names no machine")
    return hosts


def read_hostfile(path: "str | Path") -> List[Tuple[str, int]]:
    """(host, slots) in order from an Open MPI (`host slots=N`), MPICH (`host:N`) or plain
    (`host` per line; repeats add a slot, as in $PBS_NODEFILE) hostfile."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise InputError(path, "file does not exist") from None
    slots: Dict[str, int] = {}
    for i, line in enumerate(lines, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        host, n = fields[0], 1
        if ":" in host and host.count(":") == 1:          # MPICH host:N (not an IPv6 address)
            host, _, count = host.partition(":")
            if not count.isdigit() or int(count) < 1:
                raise InputError(path, f"line {i}: bad slot count in {fields[0]!r}")
            n = int(count)
        for field in fields[1:]:
            key, _, value = field.partition("=")
            if key in ("slots", "cpu", "cpus") and value:
                if not value.isdigit() or int(value) < 1:
                    raise InputError(path, f"line {i}: bad slot count in {field!r}")
                n = int(value)
        slots[host] = slots.get(host, 0) + n
    if not slots:
        raise InputError(path, "names no machine")
    return list(slots.items())


def host_slots(hosts: Sequence[str], slots: int) -> List[Tuple[str, int]]:
    """Repeated hosts merged (order kept), `slots` each per mention."""
    merged: Dict[str, int] = {}
    for h in hosts:
        merged[h] = merged.get(h, 0) + slots
    return list(merged.items())


def hostfile_text(hosts: List[str], slots: int, flavor: str = "openmpi") -> str:
    """A hostfile giving each host `slots` ranks (repeated hosts are merged, order kept)."""
    if slots < 1:
        raise InputError(None, f"--slots must be at least 1, got {slots}")
    return format_hostfile(host_slots(hosts, slots), flavor)


def format_hostfile(entries: Sequence[Tuple[str, int]], flavor: str) -> str:
    if flavor not in FLAVORS:
        raise InputError(None, f"unknown MPI flavour {flavor!r}; expected one of {', '.join(FLAVORS)}")
    fmt = "{h} slots={n}" if flavor == "openmpi" else "{h}:{n}"
    return "".join(fmt.format(h=h, n=n) + "\n" for h, n in entries)


# ---------------------------------------------------------------- the command

def detect_flavor(version_text: str) -> str:
    """'openmpi' or 'mpich' from the output of `mpiexec --version`."""
    text = version_text.lower()
    if "open mpi" in text or "openrte" in text or "open-mpi" in text:
        return "openmpi"
    if "hydra" in text or "mpich" in text or "intel(r) mpi" in text:
        return "mpich"
    raise InputError(None, "cannot tell which MPI `mpiexec --version` belongs to (neither Open MPI "
                           f"nor MPICH/Hydra): {version_text.strip()[:200]!r}")


@dataclass(frozen=True)
class LaunchPlan:
    """Everything `mpiexec` is started with."""

    mpiexec: str
    flavor: str
    hostfile: Path
    ranks: int
    interface: Optional[str]
    forwarded: Tuple[str, ...]
    job: Tuple[str, ...]

    def argv(self) -> List[str]:
        cmd = [self.mpiexec]
        if self.flavor == "openmpi":
            cmd += ["--hostfile", str(self.hostfile), "-n", str(self.ranks)]
            for var in self.forwarded:
                cmd += ["-x", var]
            if self.interface:
                cmd += ["--mca", "btl_tcp_if_include", self.interface,
                        "--mca", "oob_tcp_if_include", self.interface]
        else:
            cmd += ["-f", str(self.hostfile), "-n", str(self.ranks)]
            if self.forwarded:
                cmd += ["-genvlist", ",".join(self.forwarded)]
            if self.interface:
                cmd += ["-iface", self.interface]
        return cmd + list(self.job)


def job_argv(python: str, subcommand_args: Sequence[str]) -> Tuple[str, ...]:
    """The ranks' command: this interpreter by absolute path (a remote ssh session's PATH
    may not have the venv), running distpart."""
    args = list(subcommand_args)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        raise InputError(None, "no job given: distpart launch ... -- SUBCOMMAND ARGS")
    if args[0] in ("launch", "hostfile", "example"):
        raise InputError(None, f"'{args[0]}' is not a job to launch across hosts")
    return (python, "-m", "distpart", *args)


def is_local(host: str) -> bool:
    """localhost, 127.x, this machine's name, or an address of one of its interfaces."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    if addr.is_loopback:
        return True
    try:  # binding to an address succeeds only when it is one of this host's
        family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.bind((host, 0))
        return True
    except OSError:
        return False


def remote_shell(env: Mapping[str, str]) -> List[str]:
    """The remote shell Open MPI uses (OMPI_MCA_plm_rsh_agent, e.g. 'ssh -F cfg'), else ssh."""
    agent = env.get("OMPI_MCA_plm_rsh_agent") or env.get("HYDRA_LAUNCHER_EXEC") or "ssh"
    return shlex.split(agent.split(":")[0])


def check_reachable(hosts: Sequence[str], env: Mapping[str, str], timeout: int = SSH_TIMEOUT_S) -> None:
    """InputError naming the first remote host that does not answer `ssh HOST true`."""
    remote = [h for h in hosts if not is_local(h)]
    if not remote:
        return
    shell = remote_shell(env)

    def probe(host: str) -> Optional[str]:
        cmd = shell + ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}", host, "true"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 5,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"no answer within {timeout + 5} s"
        except FileNotFoundError:
            return f"remote shell {shell[0]!r} not found"
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            return reason
        return None

    with ThreadPoolExecutor(max_workers=min(32, len(remote))) as pool:
        for host, problem in zip(remote, pool.map(probe, remote)):
            if problem:
                raise InputError(None, f"cannot reach host {host} with `{' '.join(shell)}`: {problem} "
                                       f"(distpart needs passwordless ssh to every host)")


# ---------------------------------------------------------------- the subcommand

def add_launch_arguments(sp: argparse.ArgumentParser) -> None:
    """The `distpart launch` options (the parser of the `launch` subcommand)."""
    src = sp.add_mutually_exclusive_group(required=True)
    src.add_argument("--ip-config", type=Path, help="DGL's ip_config.txt: one machine per line, 'IP [PORT] ...'")
    src.add_argument("--hostfile", type=Path,
                     help="an Open MPI, MPICH or plain (one host per line, e.g. $PBS_NODEFILE) hostfile")
    sp.add_argument("--ranks-per-host", type=int,
                    help="ranks on each machine (default: 1 for --ip-config, the file's slots for --hostfile)")
    sp.add_argument("--interface", help="network interface name or CIDR subnet MPI traffic must use")
    sp.add_argument("--mpiexec", default="mpiexec", help="the launcher to use (default: mpiexec on PATH)")
    sp.add_argument("--no-check", action="store_true", help="do not check that every host answers over ssh first")
    sp.add_argument("--dry-run", action="store_true", help="print the mpiexec command (and keep its hostfile) only")
    sp.add_argument("job", nargs=argparse.REMAINDER, help="-- SUBCOMMAND ARGS...: the distpart job to start")


def plan_from_args(args: argparse.Namespace, env: Mapping[str, str], version_text: str,
                   hostfile: Path, python: str) -> Tuple[LaunchPlan, str]:
    """(the plan, the hostfile text to write) for parsed `launch` arguments."""
    if args.ranks_per_host is not None and args.ranks_per_host < 1:
        raise InputError(None, f"--ranks-per-host must be at least 1, got {args.ranks_per_host}")
    if args.ip_config is not None:
        entries = host_slots(read_ip_config(args.ip_config), args.ranks_per_host or 1)
    else:
        entries = read_hostfile(args.hostfile)
        if args.ranks_per_host is not None:
            entries = [(h, args.ranks_per_host) for h, _ in entries]
    flavor = detect_flavor(version_text)
    forwarded = tuple(v for v in FORWARDED_ENV if env.get(v))
    plan = LaunchPlan(args.mpiexec, flavor, hostfile, sum(n for _, n in entries), args.interface,
                      forwarded, job_argv(python, args.job))
    return plan, format_hostfile(entries, flavor)


def launch_main(args: argparse.Namespace) -> int:
    """Run `distpart launch`; returns mpiexec's exit status (2 for a launch error)."""
    try:
        mpiexec = shutil.which(args.mpiexec)
        if mpiexec is None:
            raise InputError(None, f"{args.mpiexec!r} not found: install MPI or pass --mpiexec PATH")
        args.mpiexec = mpiexec
        version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=60,
                                 stdin=subprocess.DEVNULL)
        fd, name = tempfile.mkstemp(prefix="distpart-hosts-", suffix=".txt")
        os.close(fd)
        plan, text = plan_from_args(args, os.environ, version.stdout + version.stderr, Path(name), sys.executable)
        plan.hostfile.write_text(text)
        command = shlex.join(plan.argv())
        if args.dry_run:
            print(f"# hostfile {plan.hostfile}:\n" + "".join(f"#   {ln}\n" for ln in text.splitlines()) + command)
            return 0
        hosts = [h for h, _ in (read_hostfile(plan.hostfile))]
        if not args.no_check:
            check_reachable(hosts, os.environ)
        print(f"distpart launch: {command}", file=sys.stderr, flush=True)
        return _run(plan.argv(), plan.hostfile)
    except InputError as e:
        print(f"distpart launch: error: {e}", file=sys.stderr)
        return 2


def _run(argv: List[str], hostfile: Path) -> int:
    """Run mpiexec, forwarding Ctrl-C/SIGTERM to it, and remove the hostfile afterwards."""
    proc = subprocess.Popen(argv)

    def forward(signum, _frame):
        proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        hostfile.unlink(missing_ok=True)

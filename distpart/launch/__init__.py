"""Starting a distpart job across machines: DGL's ip_config.txt or a hostfile -> mpiexec.

`hosts` reads the host lists, every line checked: DGL's `ip_config.txt` and hostfiles (Open
MPI `host slots=N`, MPICH/Hydra `host:N`, one host per line as batch systems write them), and
refuses two names of one machine (issue 28: Open MPI stops on them with an internal error).
`distpart launch` (here) detects the site's MPI from `mpiexec --version`, writes the
hostfile for it, checks that every remote host answers over the remote shell mpiexec will
use (so an unreachable node is named at once instead of hanging mpiexec) and has this
virtualenv's interpreter, and starts the job with what remote ranks need: PATH and the
virtualenv variables (a non-interactive ssh session has neither), the interpreter by
absolute path, and the network interface MPI must use (issue 10: Open MPI hangs on a node
with a second, unroutable network unless told which one to use).

The parsing and command building are pure functions, unit-tested without MPI or ssh;
`launch_main` runs them.
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

from ..errors import InputError
# The host lists, here too: `distpart hostfile` and the tests take them from distpart.launch.
from .hosts import (FLAVORS, Resolver, distinct_hosts, format_hostfile, host_problem, host_slots,  # noqa: F401
                    hostfile_lines, hostfile_text, ip_config_lines, merged_slots, own_address, read_hostfile,
                    read_ip_config, refuse_one_machine_twice, resolve_machines)

# Variables remote ranks need to find the same Python, venv and libraries as the launcher
# (forwarded only when set). The MPI4PY_*/PARMETIS_* ones select the MPI ABI and a site
# ParMETIS (see README); a rank that misses them would load a different library.
FORWARDED_ENV = ("PATH", "VIRTUAL_ENV", "PYTHONPATH", "LD_LIBRARY_PATH", "MPI4PY_MPIABI", "MPI4PY_LIBMPI",
                 "PARMETIS_LIB", "METIS_LIB", "PARMETIS_IDXWIDTH", "PARMETIS_REALWIDTH")
SSH_TIMEOUT_S = 10          # ssh's ConnectTimeout per host; all hosts are probed in parallel
PROBE_SLACK_S = 10          # on top of that for authentication and the remote `test`
MAX_PROBES = 64             # parallel ssh processes at most
# What a remote host prints when it has (or lacks) our interpreter; anything else means the
# remote shell itself failed (works for ssh and for agents such as the MPI Operator's kubexec.sh).
_PY_OK, _PY_MISSING = "distpart-python-ok", "distpart-python-missing"


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


def parse_ip_addr(text: str) -> Dict[str, List[str]]:
    """{interface: [address/prefix, ...]} from `ip -o addr show` output."""
    found: Dict[str, List[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("inet", "inet6"):
            found.setdefault(fields[1].split("@")[0], []).append(fields[3])
    return found


def hydra_interface(interface: str, local_addresses: Mapping[str, Sequence[str]]) -> str:
    """Hydra's `-iface` takes an interface name only: a CIDR subnet becomes the name of this
    machine's interface in it (which must then be the same on every node, as with -iface)."""
    try:
        net = ipaddress.ip_network(interface, strict=False)
    except ValueError:
        return interface                     # already a name such as ib0
    for name, addrs in local_addresses.items():
        for a in addrs:
            if ipaddress.ip_interface(a).ip in net:
                return name
    raise InputError(None, f"--interface {interface}: MPICH's mpiexec needs an interface name (-iface), "
                           "and no interface of this machine has an address in that subnet")


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
    hosts: Tuple[str, ...] = ()

    def argv(self) -> List[str]:
        cmd = [self.mpiexec]
        if self.flavor == "openmpi":
            cmd += ["--hostfile", str(self.hostfile), "-n", str(self.ranks)]
            for var in self.forwarded:
                cmd += ["-x", var]
            if self.interface:
                # Both layers: oob carries mpiexec <-> orted wire-up, btl the ranks' messages.
                # Either one trying an unroutable network hangs (issue 10). Both accept an
                # interface name or a CIDR subnet.
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


def plan_from_args(args: argparse.Namespace, env: Mapping[str, str], version_text: str,
                   hostfile: Path, python: str,
                   local_addresses: Optional[Mapping[str, Sequence[str]]] = None,
                   resolve: Optional[Resolver] = None) -> Tuple[LaunchPlan, str]:
    """(the plan, the hostfile text to write) for parsed `launch` arguments. With `resolve`
    (`resolve_machines`; launch_main passes it), two names of one machine are refused."""
    if args.ranks_per_host is not None and args.ranks_per_host < 1:
        raise InputError(None, f"--ranks-per-host must be at least 1, got {args.ranks_per_host}")
    if args.ip_config is not None:
        named = ip_config_lines(args.ip_config)
        entries = distinct_hosts([h for _, h in named], args.ranks_per_host or 1)
    else:
        lines = hostfile_lines(args.hostfile)
        named, entries = [(i, h) for i, h, _ in lines], merged_slots(lines)
        if args.ranks_per_host is not None:
            entries = [(h, args.ranks_per_host) for h, _ in entries]
    if resolve is not None:
        refuse_one_machine_twice(args.ip_config or args.hostfile, named, resolve)
    flavor = detect_flavor(version_text)
    ipv6 = [h for h, _ in entries if ":" in h]
    if ipv6 and (flavor == "mpich" or "openrte" in version_text.lower()):
        why = ("MPICH's hostfile (host:N) cuts a name at its first ':'" if flavor == "mpich" else
               "Open MPI up to 4.x refuses node names other than letters, digits, '.' and '-'")
        raise InputError(args.ip_config or args.hostfile, f"host {ipv6[0]} is an IPv6 address, which this mpiexec "
                                                          f"cannot take ({why}): name the host instead")
    interface = args.interface
    if interface and flavor == "mpich":
        interface = hydra_interface(interface, local_addresses or {})
    forwarded = tuple(v for v in FORWARDED_ENV if env.get(v))
    plan = LaunchPlan(args.mpiexec, flavor, hostfile, sum(n for _, n in entries), interface,
                      forwarded, job_argv(python, args.job), tuple(h for h, _ in entries))
    return plan, format_hostfile(entries, flavor)


# ---------------------------------------------------------------- reachability

def is_local(host: str) -> bool:
    """localhost, 127.x, this machine's name, or an address of one of its interfaces
    (mpiexec starts those ranks without ssh, so they need no check)."""
    if host == "localhost" or host == socket.gethostname():
        return True
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host == socket.getfqdn()      # last: it may ask DNS
    return own_address((host, 0))


def remote_shell(env: Mapping[str, str], flavor: str = "openmpi") -> List[str]:
    """The remote shell mpiexec will use: Open MPI's OMPI_MCA_plm_rsh_agent (e.g. 'ssh -F cfg';
    of alternatives 'a : b' the first) plus OMPI_MCA_plm_rsh_args; Hydra's HYDRA_LAUNCHER_EXEC;
    else ssh."""
    if flavor == "mpich":
        return shlex.split(env.get("HYDRA_LAUNCHER_EXEC") or "ssh")
    agent = (env.get("OMPI_MCA_plm_rsh_agent") or "ssh").split(":")[0].strip() or "ssh"
    return shlex.split(agent) + shlex.split(env.get("OMPI_MCA_plm_rsh_args", ""))


def probe_command(shell: Sequence[str], host: str, python: str, timeout: int) -> List[str]:
    """`<shell> HOST test -x PYTHON && echo ok || echo missing`; for ssh also BatchMode (never
    ask for a password: fail) and a connect timeout. Other agents (kubexec.sh) get no ssh options."""
    cmd = list(shell)
    if Path(cmd[0]).name == "ssh":
        cmd += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}"]
    remote = f"if test -x {shlex.quote(python)}; then echo {_PY_OK}; else echo {_PY_MISSING}; fi"
    return cmd + [host, remote]


def probe_verdict(host: str, python: str, returncode: Optional[int], stdout: str, stderr: str,
                  waited: float) -> Optional[str]:
    """None if the host is fine, else one line saying what is wrong with it."""
    if returncode is None:
        return f"cannot reach host {host}: no answer within {waited:.0f} s"
    if _PY_OK in stdout:
        return None
    if _PY_MISSING in stdout:
        return (f"host {host} has no {python} (the virtualenv must sit at the same path on every "
                "node, e.g. on the shared file system)")
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    reason = lines[-1] if lines else f"exit status {returncode}"
    return f"cannot reach host {host}: {reason}"


def check_hosts(hosts: Sequence[str], env: Mapping[str, str], python: str, flavor: str = "openmpi",
                timeout: int = SSH_TIMEOUT_S) -> None:
    """InputError naming every remote host that does not answer over the remote shell or lacks
    this interpreter; all probed in parallel, each bounded by `timeout` + PROBE_SLACK_S."""
    remote = [h for h in dict.fromkeys(hosts) if not is_local(h)]
    if not remote:
        return
    shell = remote_shell(env, flavor)
    limit = timeout + PROBE_SLACK_S

    def probe(host: str) -> Optional[str]:
        try:
            done = subprocess.run(probe_command(shell, host, python, timeout), capture_output=True, text=True,
                                  timeout=limit, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return probe_verdict(host, python, None, "", "", limit)
        except FileNotFoundError:
            return f"cannot reach host {host}: remote shell {shell[0]!r} not found"
        return probe_verdict(host, python, done.returncode, done.stdout, done.stderr, limit)

    with ThreadPoolExecutor(max_workers=min(MAX_PROBES, len(remote))) as pool:
        problems = [p for p in pool.map(probe, remote) if p]
    if problems:
        raise InputError(None, "; ".join(problems) + f" (checked with `{shlex.join(shell)}`; distpart launch "
                         "needs passwordless ssh to every host)")


# ---------------------------------------------------------------- the subcommand

def add_launch_arguments(sp: argparse.ArgumentParser) -> None:
    """The `distpart launch` options (the parser of the `launch` subcommand)."""
    src = sp.add_mutually_exclusive_group(required=True)
    src.add_argument("--ip-config", type=Path, help="DGL's ip_config.txt: one machine per line, 'IP [PORT] ...'")
    src.add_argument("--hostfile", type=Path,
                     help="an Open MPI (host slots=N), MPICH (host:N) or plain (one host per line, "
                          "repeats add slots: $PBS_NODEFILE) hostfile")
    sp.add_argument("--ranks-per-host", type=int,
                    help="ranks on each distinct machine (default: 1 for --ip-config, the file's slots for --hostfile)")
    sp.add_argument("--interface",
                    help="network MPI traffic must use: an interface name (ib0) or a CIDR subnet "
                         "(10.1.0.0/24); give it when nodes have more than one network")
    sp.add_argument("--mpiexec", default="mpiexec", help="the launcher to use (default: mpiexec on PATH)")
    sp.add_argument("--no-check", action="store_true",
                    help="do not check first that every host answers over ssh and has this virtualenv")
    sp.add_argument("--dry-run", action="store_true",
                    help="print the mpiexec command only (and keep the hostfile it names)")
    sp.add_argument("job", nargs=argparse.REMAINDER, help="-- SUBCOMMAND ARGS...: the distpart job to start")


def _local_addresses() -> Dict[str, List[str]]:
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_ip_addr(out)


def launch_main(args: argparse.Namespace) -> int:
    """Run `distpart launch`; returns mpiexec's exit status (2 for a launch error)."""
    hostfile: Optional[Path] = None
    keep = False                        # only a successful --dry-run keeps its hostfile
    try:
        mpiexec = shutil.which(args.mpiexec)
        if mpiexec is None:
            raise InputError(None, f"{args.mpiexec!r} not found: install MPI or pass --mpiexec PATH")
        # Absolute: Open MPI then also starts its remote daemons from the same prefix.
        args.mpiexec = mpiexec
        try:
            version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=60,
                                     stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise InputError(None, f"`{mpiexec} --version` did not finish within 60 s") from None
        fd, name = tempfile.mkstemp(prefix="distpart-hosts-", suffix=".txt")
        os.close(fd)
        hostfile = Path(name)
        plan, text = plan_from_args(args, os.environ, version.stdout + version.stderr, hostfile, sys.executable,
                                    _local_addresses() if args.interface else None, resolve_machines)
        hostfile.write_text(text)
        command = shlex.join(plan.argv())
        if args.dry_run:
            # stdout: the command alone (usable as is); the kept hostfile's content to stderr.
            print(f"distpart launch: hostfile {hostfile} (kept):\n" + text, end="", file=sys.stderr)
            print(command, flush=True)
            keep = True
            return 0
        if not args.no_check:
            check_hosts(plan.hosts, os.environ, sys.executable, plan.flavor)
        print(f"distpart launch: {command}", file=sys.stderr, flush=True)
        return _run(plan.argv())
    except InputError as e:
        print(f"distpart launch: error: {e}", file=sys.stderr, flush=True)
        return 2
    finally:
        if hostfile is not None and not keep:
            hostfile.unlink(missing_ok=True)


def _run(argv: List[str]) -> int:
    """Run mpiexec and return its exit status (128+N if a signal N killed it).

    mpiexec stays in our process group, so a batch system or test harness that kills the
    group reaches it. SIGINT/SIGTERM/SIGHUP sent to this process alone (kill PID, a job
    scheduler) are forwarded; on Ctrl-C it gets SIGINT twice (from the terminal and from us),
    which Open MPI and Hydra both handle as an abort of the job."""
    proc = subprocess.Popen(argv)

    def forward(signum, _frame):
        if proc.poll() is None:
            proc.send_signal(signum)

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, forward) for s in signals}
    try:
        status = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - status if status < 0 else status

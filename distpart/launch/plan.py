"""The mpiexec command of `distpart launch`, planned from its arguments as pure functions
(unit-tested without MPI or ssh): which MPI `mpiexec --version` belongs to, the hostfile in
its dialect, the ranks' command (this interpreter by absolute path, a remote ssh session's
PATH may not have the venv), the variables remote ranks need, and the network interface MPI
must use (issue 10: Open MPI hangs on a node with a second, unroutable network unless told
which one to use).
"""
from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import InputError
from .hosts import (Resolver, distinct_hosts, format_hostfile, hostfile_lines, ip_config_lines, merged_slots,
                    refuse_one_machine_twice)

# Variables remote ranks need to find the same Python, venv and libraries as the launcher
# (forwarded only when set). The MPI4PY_*/PARMETIS_* ones select the MPI ABI and a site
# ParMETIS (see README); a rank that misses them would load a different library.
FORWARDED_ENV = ("PATH", "VIRTUAL_ENV", "PYTHONPATH", "LD_LIBRARY_PATH", "MPI4PY_MPIABI", "MPI4PY_LIBMPI",
                 "PARMETIS_LIB", "METIS_LIB", "PARMETIS_IDXWIDTH", "PARMETIS_REALWIDTH")


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

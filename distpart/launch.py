"""Launching on a cluster: turning DGL's ip_config.txt into an MPI hostfile.

DGL's tools take the machines of a job from `ip_config.txt` (one `IP [PORT]` per line);
mpiexec wants a hostfile. Open MPI writes `HOST slots=N`, MPICH/Hydra `HOST:N`. Under
SLURM, PBS or a Kubeflow MPIJob the launcher already knows the hosts and no file is needed.
"""
from __future__ import annotations

from pathlib import Path
from typing import List

from .errors import InputError

FLAVORS = ("openmpi", "mpich")


def read_ip_config(path: "str | Path") -> List[str]:
    """Hosts of a DGL ip_config.txt in order, one per line (the port, if any, is ignored)."""
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
        if len(fields) > 2 or (len(fields) == 2 and not fields[1].isdigit()):
            raise InputError(path, f"line {i}: expected 'IP [PORT]', found {line.strip()!r}")
        hosts.append(fields[0])
    if not hosts:
        raise InputError(path, "names no machine")
    return hosts


def hostfile_text(hosts: List[str], slots: int, flavor: str = "openmpi") -> str:
    """A hostfile giving each host `slots` ranks (repeated hosts are merged, order kept)."""
    if slots < 1:
        raise InputError(None, f"--slots must be at least 1, got {slots}")
    if flavor not in FLAVORS:
        raise InputError(None, f"unknown MPI flavour {flavor!r}; expected one of {', '.join(FLAVORS)}")
    merged: dict = {}
    for h in hosts:
        merged[h] = merged.get(h, 0) + slots
    fmt = "{h} slots={n}" if flavor == "openmpi" else "{h}:{n}"
    return "".join(fmt.format(h=h, n=n) + "\n" for h, n in merged.items())


def add_launch_arguments(sp) -> None:
    """The `distpart launch` options (the parser of the `launch` subcommand)."""
    import argparse
    src = sp.add_mutually_exclusive_group(required=True)
    src.add_argument("--ip-config", type=Path, help="DGL's ip_config.txt: one machine per line, 'IP [PORT] ...'")
    src.add_argument("--hostfile", type=Path, help="an Open MPI, MPICH or plain (one host per line) hostfile")
    sp.add_argument("--ranks-per-host", type=int, help="ranks on each machine")
    sp.add_argument("--interface", help="network interface name or CIDR subnet MPI traffic must use")
    sp.add_argument("--dry-run", action="store_true", help="print the mpiexec command only")
    sp.add_argument("job", nargs=argparse.REMAINDER, help="-- SUBCOMMAND ARGS...: the distpart job to start")


def launch_main(args) -> int:
    """Start the job with the site's mpiexec (work in progress: being written)."""
    raise SystemExit("distpart launch: not available yet in this build")

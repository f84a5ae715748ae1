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

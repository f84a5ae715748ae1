"""The `distpart launch` and `distpart hostfile` subcommands: their options, and the run of
the planned mpiexec (`plan`) after the hosts were probed (`probe`).
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from ..errors import InputError
from .hosts import FLAVORS, hostfile_text, ip_config_lines, read_ip_config, refuse_one_machine_twice, resolve_machines
from .plan import parse_ip_addr, plan_from_args
from .probe import check_hosts

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


def add_hostfile_arguments(sp: argparse.ArgumentParser) -> None:
    """The `distpart hostfile` options."""
    sp.add_argument("ip_config", type=Path)
    sp.add_argument("--slots", type=int, default=1, help="ranks per machine")
    sp.add_argument("--flavor", choices=FLAVORS, default="openmpi")


def hostfile_main(args: argparse.Namespace) -> None:
    """Run `distpart hostfile`: the MPI hostfile of ip_config.txt's machines, on stdout."""
    refuse_one_machine_twice(args.ip_config, ip_config_lines(args.ip_config))
    sys.stdout.write(hostfile_text(read_ip_config(args.ip_config), args.slots, args.flavor))


def _local_addresses() -> Dict[str, List[str]]:
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_ip_addr(out)


def launch_main(args: argparse.Namespace) -> int:
    """Run `distpart launch`; returns mpiexec's exit status (a launch error is an InputError)."""
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

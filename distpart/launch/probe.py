"""Before mpiexec starts: every remote host answers over the remote shell mpiexec will use
and has this virtualenv's interpreter, so an unreachable node is named at once instead of
hanging mpiexec. All hosts are probed in parallel, each bounded in time.
"""
from __future__ import annotations

import ipaddress
import shlex
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from ..errors import InputError
from .hosts import own_address

SSH_TIMEOUT_S = 10          # ssh's ConnectTimeout per host; all hosts are probed in parallel
PROBE_SLACK_S = 10          # on top of that for authentication and the remote `test`
MAX_PROBES = 64             # parallel ssh processes at most
# What a remote host prints when it has (or lacks) our interpreter; anything else means the
# remote shell itself failed (works for ssh and for agents such as the MPI Operator's kubexec.sh).
_PY_OK, _PY_MISSING = "distpart-python-ok", "distpart-python-missing"


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

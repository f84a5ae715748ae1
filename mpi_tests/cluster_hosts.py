"""Test hosts made of network namespaces: each with its own address, hostname and sshd.

A multi-host launch needs hosts that reach each other over the network and accept ssh.
`cluster(n)` builds them on this machine: n network namespaces joined by veth pairs to a
bridge in a namespace of their own (so the root namespace gets no address and no traffic
leaves the test's own hosts), an address per host from one /24 the test picks, a UTS
namespace per host so each has its own hostname (MPI then tells the hosts apart, and the
test can see where ranks ran), and an sshd per host bound only to that host's address,
with keys and configuration in a temp dir. Commands run "on" a host with `host.run(...)`.

Everything is removed afterwards, also on failure: daemons killed, namespaces (and with
them every link in them) deleted. Skips, with the reason, where namespaces cannot be made.
"""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

from conftest import Run, mpi_env, run_bounded


_SERIAL = itertools.count()  # clusters made by this test process get distinct names and subnets


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


@dataclass
class Host:
    name: str            # hostname inside the host (and netns name)
    netns: str
    address: str
    sshd: Optional[subprocess.Popen] = None

    def command(self, argv: Sequence[str]) -> List[str]:
        """argv run inside this host: its network namespace and a UTS namespace with its name."""
        inner = f'hostname {self.name} && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "sh", "-c", inner, "sh", *map(str, argv)]

    def run(self, argv: Sequence, env: Optional[Dict[str, str]] = None, timeout: float = 240,
            cwd: Optional[Path] = None) -> Run:
        """Run argv on this host with a hard timeout (the whole process group is killed)."""
        return run_bounded(self.command(argv), env, timeout, cwd)


@dataclass
class Cluster:
    hosts: List[Host]
    subnet: str
    ssh_config: Path
    unused_address: str        # in the subnet, but no host answers there
    dir: Path
    env: Dict[str, str] = field(default_factory=dict)


def _can_build() -> Optional[str]:
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup-test.sh installs iproute2 and openssh)"
    if not Path("/usr/sbin/sshd").exists():
        return "openssh-server is not installed (scripts/setup-test.sh installs it)"
    probe = f"dptprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _write_ssh_files(d: Path, hosts: List[Host]) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id")], check=True, timeout=30)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "hostkey")], check=True, timeout=30)
    (d / "authorized_keys").write_text((d / "id.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    for h in hosts:
        (d / f"sshd-{h.name}.conf").write_text(
            f"ListenAddress {h.address}\nPort 22\nHostKey {d / 'hostkey'}\nPidFile {d / f'sshd-{h.name}.pid'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "PrintMotd no\n")
    config = d / "ssh_config"
    config.write_text(f"Host *\n  User root\n  IdentityFile {d / 'id'}\n  IdentitiesOnly yes\n"
                      "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  BatchMode yes\n"
                      "  LogLevel ERROR\n  ConnectTimeout 5\n")
    return config


def _wait_for_sshd(host: Host, config: Path, deadline: float) -> None:
    while time.time() < deadline:
        if host.sshd.poll() is not None:
            raise RuntimeError(f"sshd on {host.name} exited: {host.sshd.stderr.read() if host.sshd.stderr else ''}")
        probe = subprocess.run(["ip", "netns", "exec", host.netns, "ssh", "-F", str(config), host.address, "true"],
                               capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"sshd on {host.name} did not answer in time")


@contextmanager
def cluster(tmp: Path, n: int = 2) -> Iterator[Cluster]:
    """n test hosts with sshd; everything created is removed on exit."""
    reason = _can_build()
    if reason:
        pytest.skip(reason)
    serial = next(_SERIAL)
    tag = f"dpt{os.getpid() % 100000}c{serial}"
    octet = 16 + (os.getpid() + serial) % 200
    subnet = f"10.213.{octet}.0/24"
    hosts = [Host(f"{tag}h{i}", f"{tag}h{i}", f"10.213.{octet}.{i + 1}") for i in range(n)]
    switch = f"{tag}sw"
    made: List[str] = []
    d = tmp / "cluster"
    d.mkdir()
    try:
        for ns in [switch] + [h.netns for h in hosts]:
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        for i, h in enumerate(hosts):
            # Created inside the switch namespace and moved: no link ever sits in the root one.
            _ip("-n", switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", h.netns)
            _ip("-n", switch, "link", "set", f"p{i}", "master", "br0", "up")
            _ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", "eth0")
            _ip("-n", h.netns, "link", "set", "eth0", "up")
        config = _write_ssh_files(d, hosts)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        for h in hosts:
            h.sshd = subprocess.Popen(h.command(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / f"sshd-{h.name}.conf")]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True)
        deadline = time.time() + 30
        for h in hosts:
            _wait_for_sshd(h, config, deadline)
        env = mpi_env()
        env["OMPI_MCA_plm_rsh_agent"] = f"ssh -F {config}"
        yield Cluster(hosts, subnet, config, f"10.213.{octet}.{n + 50}", d, env)
    finally:
        for h in hosts:
            if h.sshd is not None and h.sshd.poll() is None:
                os.killpg(h.sshd.pid, signal.SIGKILL)
                h.sshd.wait(timeout=10)
        for ns in reversed(made):
            # Kill anything still running inside (stray orted or ranks), then the namespace.
            pids = _ip("netns", "pids", ns, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", ns, check=False)


def leftovers(tag_prefix: str = "dpt") -> List[str]:
    """Namespaces of ours still present (a test asserts there are none)."""
    out = _ip("netns", "list", check=False).stdout.split("\n")
    return [line.split()[0] for line in out if line.startswith(tag_prefix)]

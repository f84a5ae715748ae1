"""Test "hosts" made of Linux network namespaces, each with its own address, hostname and sshd.

A multi-host launch (`distpart launch`, mpiexec over ssh) needs machines that reach each other
over a network and accept passwordless ssh. `netns_cluster(tmp, n)` builds n of them on this
machine, as root, without touching anything outside the test:

- namespaces `dpn<pid>s<serial>h<i>` (the hosts) and `dpn<pid>s<serial>sw` (the switch): the
  test process's PID in the name makes them unique and lets a later run recognise, and remove,
  leftovers of a killed run (`clean_leftovers`) without touching a live run's;
- each host has `lo` up and `eth0`, one end of a veth pair whose other end sits on a bridge in
  the switch namespace. Every link is created inside our own namespaces, so the root namespace
  gets no link and no address, and there is no default route: traffic can only go to
  loopback or to the addresses assigned here;
- addresses come from one /24 in 10.213.0.0/16: hosts get .1, .2, ... of its lower half
  (`subnet`, a /25), `unused_address` is in that /25 but nobody has it;
- with `side_network=True` each host also gets `eth1` with an address in the upper /25
  (`side_subnet`): a second network that looks routable between the hosts but silently drops
  everything (a veth whose peer stays inside the host, and permanent neighbour entries so a
  connect hangs instead of failing fast), like a node's firewalled second NIC (issue 10).
  Open MPI uses every interface it finds unless told `--mca btl_tcp_if_include`, i.e.
  `distpart launch --interface`;
- each command "on" a host runs in its network namespace and in a fresh UTS namespace with the
  host's own hostname, so MPI (`MPI_Get_processor_name`) and the tests see where ranks ran;
- each host runs `/usr/sbin/sshd -D` bound to its own address only, with host keys,
  authorized_keys, pid file and log in the temp dir (never /root/.ssh); clients use
  `ssh -F <dir>/ssh_config`, handed to Open MPI as `OMPI_MCA_plm_rsh_agent` in `cluster.env`.
  The sshd log (`host.accepted_logins()`) proves that a connection reached that host.

The tests use one such pair for the whole session, conftest.py's `netns_pair` fixture (which
kills what a test left running on the hosts after it):

    @pytest.fixture(scope="session")
    def _netns_session(tmp_path_factory):
        with netns_cluster(tmp_path_factory.mktemp("netns"), 2, side_network=True) as c:
            yield c

`netns_cluster(tmp, n, sshd=False)` builds the same hosts without ssh (no keys, no daemons):
for jobs started on each host directly, such as DGL's servers and trainers
(`dgl_job.py`, benchmarks/bench_training.py), which need only the network.

Teardown, also when the test fails: every sshd is killed, then every process still inside a
namespace (a stray orted or rank), every link created is deleted, then every namespace.
Building skips the test, saying why, only where namespaces cannot be made (not root, no `ip`,
`unshare`, `ssh`, `sshd`). Every subprocess has a timeout.
"""
from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import pytest

from harness import Run, mpi_env, run_bounded

PREFIX = "dpn"                      # every namespace this module creates starts with this
SSHD = "/usr/sbin/sshd"
_SERIAL = itertools.count()         # clusters of one test process get distinct names
_NAME = re.compile(rf"^{PREFIX}(\d+)s\d+(?:h\d+|sw)$")


def _ip(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


# ---------------------------------------------------------------- availability and leftovers

def skip_reason(sshd: bool = True) -> Optional[str]:
    """Why namespaces (with sshd on each host, unless sshd=False) cannot be built here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", *(("ssh", "ssh-keygen") if sshd else ())):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup-test.sh installs iproute2 and openssh)"
    if sshd and not os.access(SSHD, os.X_OK):
        return f"{SSHD} is missing (scripts/setup-test.sh installs openssh-server)"
    probe = f"{PREFIX}{os.getpid()}probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def namespaces(prefix: str = PREFIX) -> List[str]:
    """Network namespaces present whose name starts with prefix."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def _kill_inside(netns: str) -> None:
    """SIGKILL every process whose network namespace is netns, until none is left (max ~5 s)."""
    for _ in range(50):
        pids = _ip("netns", "pids", netns, check=False).stdout.split()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        time.sleep(0.1)


def _remove_namespaces(names: Sequence[str]) -> None:
    for ns in names:
        _kill_inside(ns)
    for ns in names:
        # Deleting a namespace destroys its links (and a veth's peer) too; listing them first
        # and deleting each makes that explicit and leaves nothing if the namespace lingers.
        links = _ip("-n", ns, "-o", "link", "show", check=False).stdout.splitlines()
        for line in links:
            name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
            if name and name != "lo":
                _ip("-n", ns, "link", "del", name, check=False)
        _ip("netns", "del", ns, check=False)


def clean_leftovers() -> List[str]:
    """Remove namespaces of ours left by a test process that no longer exists (killed before
    its teardown ran); a live process's namespaces are left alone. Returns the names removed."""
    stale = []
    for ns in namespaces():
        m = _NAME.match(ns)
        if m and int(m.group(1)) != os.getpid() and not Path(f"/proc/{m.group(1)}").exists():
            stale.append(ns)
    _remove_namespaces(stale)
    return stale


# ---------------------------------------------------------------- hosts and clusters

@dataclass
class NetnsHost:
    index: int
    name: str                 # its hostname, and the name of its network namespace
    address: str              # on eth0
    sshd_log: Path
    side_address: Optional[str] = None  # on eth1 (the dead second network), if any
    sshd: Optional[subprocess.Popen] = None

    @property
    def netns(self) -> str:
        return self.name

    def command(self, argv: Sequence) -> List[str]:
        """argv run on this host: in its network namespace and a UTS namespace with its name."""
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.name, *map(str, argv)]

    def run(self, argv: Sequence, env: Optional[Dict[str, str]] = None, timeout: float = 120,
            cwd: Optional[Path] = None) -> Run:
        """Run argv on this host; on timeout the whole process group is killed and the test fails."""
        return run_bounded(self.command(argv), env, timeout, cwd)

    def run_for(self, argv: Sequence, env: Dict[str, str], seconds: float,
                stop_when: Optional[Callable[[], bool]] = None) -> Optional[Run]:
        """Run argv on this host for at most `seconds`, or until `stop_when()` (polled every
        0.2 s) says it is stuck; None if it was still running then. Its process group then
        gets SIGTERM (so `distpart launch` can stop mpiexec and remove its hostfile), SIGKILL
        5 s later; what it left on other hosts: `NetnsCluster.kill_jobs`."""
        proc = subprocess.Popen(self.command(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + seconds
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline or (stop_when is not None and stop_when()):
                        raise
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)
            return None
        return Run(proc.returncode, out, err)

    def accepted_logins(self) -> List[str]:
        """The sshd log lines of connections this host accepted (proof that ssh reached it)."""
        if not self.sshd_log.exists():
            return []
        return [ln for ln in self.sshd_log.read_text(errors="replace").splitlines() if "Accepted publickey" in ln]


@dataclass
class NetnsCluster:
    hosts: List[NetnsHost]
    tag: str                   # namespace name prefix of this cluster
    subnet: str                # the hosts' network (CIDR), on eth0
    side_subnet: Optional[str]  # the dead second network (CIDR), on eth1, if any
    unused_address: str        # inside `subnet`, but no host has it
    ssh_config: Path
    dir: Path
    env: Dict[str, str] = field(default_factory=dict)  # mpi_env() + the ssh client for Open MPI
    created: List[str] = field(default_factory=list)   # namespaces made, switch first

    @property
    def iface(self) -> str:
        """The hosts' interface on `subnet` (same name on every host)."""
        return "eth0"

    def kill_jobs(self) -> None:
        """Kill every process on the hosts except their sshd listeners (a hung job's orted and
        ranks), so the next test starts on idle hosts."""
        keep = {h.sshd.pid for h in self.hosts if h.sshd is not None}
        for h in self.hosts:
            for pid in _ip("netns", "pids", h.netns, check=False).stdout.split():
                if int(pid) not in keep:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass


def _ssh_files(d: Path, hosts: List[NetnsHost]) -> Path:
    """Client key, per-host host keys and sshd configs, client config; returns the client config."""
    def keygen(path: Path) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
                       check=True, timeout=30, capture_output=True)

    keygen(d / "id_ed25519")
    (d / "authorized_keys").write_text((d / "id_ed25519.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    for h in hosts:
        keygen(d / f"{h.name}_host_ed25519")
        (d / f"{h.name}_sshd_config").write_text(
            f"ListenAddress {h.address}\nPort 22\n"
            f"HostKey {d / f'{h.name}_host_ed25519'}\n"
            f"PidFile {d / f'{h.name}_sshd.pid'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes no\nPrintMotd no\nPrintLastLog no\n"
            # mpiexec opens one connection per remote host at once; keep sshd from dropping any.
            "MaxStartups 100\nLogLevel INFO\n")
    config = d / "ssh_config"
    config.write_text(
        "Host *\n  User root\n"
        f"  IdentityFile {d / 'id_ed25519'}\n  IdentitiesOnly yes\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  GlobalKnownHostsFile /dev/null\n"
        "  BatchMode yes\n  LogLevel ERROR\n  ConnectTimeout 5\n")
    return config


def _wait_for_sshd(cluster: NetnsCluster, deadline: float) -> None:
    """Until every host's sshd answers `ssh HOST true` from host 0 (the way mpiexec will come)."""
    h0 = cluster.hosts[0]
    for h in cluster.hosts:
        while True:
            if h.sshd is not None and h.sshd.poll() is not None:
                raise RuntimeError(f"sshd on {h.name} exited: {h.sshd_log.read_text()[-2000:]}")
            probe = subprocess.run(h0.command(["ssh", "-F", cluster.ssh_config, h.address, "true"]),
                                   capture_output=True, text=True, timeout=20)
            if probe.returncode == 0:
                break
            if time.time() > deadline:
                raise RuntimeError(f"sshd on {h.name} ({h.address}) did not answer: {probe.stderr.strip()}")
            time.sleep(0.2)


def _stop(proc: Optional[subprocess.Popen]) -> None:
    """SIGTERM a daemon's process group, SIGKILL it after 5 s; best effort (the namespace
    teardown that follows kills anything left inside)."""
    if proc is None or proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
            return
        except ProcessLookupError:
            proc.poll()
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def netns_cluster(tmp: Path, n: int = 2, side_network: bool = False, sshd: bool = True) -> Iterator[NetnsCluster]:
    """n hosts, with sshd unless sshd=False (see the module docstring); everything created is
    removed on exit."""
    reason = skip_reason(sshd)
    if reason:
        pytest.skip(reason)
    clean_leftovers()
    if not 1 <= n <= 100:
        raise ValueError("1 <= n <= 100 hosts")
    serial = next(_SERIAL)
    tag = f"{PREFIX}{os.getpid()}s{serial}"
    octet = 16 + (os.getpid() * 7 + serial) % 200      # distinct per run, purely cosmetic: the
    net = f"10.213.{octet}"                            # namespaces isolate clusters anyway
    d = tmp / tag
    d.mkdir(parents=True)
    hosts = [NetnsHost(i, f"{tag}h{i}", f"{net}.{i + 1}", d / f"{tag}h{i}_sshd.log",
                       f"{net}.{129 + i}" if side_network else None) for i in range(n)]
    switch = f"{tag}sw"
    cluster = NetnsCluster(hosts, tag, f"{net}.0/25", f"{net}.128/25" if side_network else None,
                           f"{net}.{n + 100}", d / "ssh_config", d)
    try:
        for ns in [switch] + [h.netns for h in hosts]:
            _ip("netns", "add", ns)
            cluster.created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        for h in hosts:
            # Made inside the switch namespace with the peer put straight into the host's:
            # no link ever appears in the root namespace.
            port = f"p{h.index}"
            _ip("-n", switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
            _ip("-n", switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", h.netns, "addr", "add", f"{h.address}/25", "dev", "eth0")
            _ip("-n", h.netns, "link", "set", "eth0", "up")
            if h.side_address:
                # A veth pair with both ends inside the host (the kernel here may lack the
                # dummy driver); frames leave eth1 and die on eth1p.
                _ip("-n", h.netns, "link", "add", "eth1", "type", "veth", "peer", "name", "eth1p")
                _ip("-n", h.netns, "addr", "add", f"{h.side_address}/25", "dev", "eth1")
                _ip("-n", h.netns, "link", "set", "eth1p", "up")
                _ip("-n", h.netns, "link", "set", "eth1", "up")
                for other in hosts:
                    if other is not h:
                        # The other hosts' side addresses resolve (to a MAC nobody has), so a
                        # connection there is silently dropped, as behind a firewall: a TCP
                        # connect hangs instead of failing fast with "no route to host".
                        _ip("-n", h.netns, "neigh", "add", other.side_address, "lladdr",
                            f"02:00:00:00:00:{other.index + 1:02x}", "dev", "eth1", "nud", "permanent")
        cluster.env = mpi_env()
        if sshd:
            _ssh_files(d, hosts)
            Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # sshd's privsep dir
            for h in hosts:
                with open(h.sshd_log, "w") as log:
                    h.sshd = subprocess.Popen(h.command([SSHD, "-D", "-e", "-f", d / f"{h.name}_sshd_config"]),
                                              stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                              start_new_session=True)
            _wait_for_sshd(cluster, time.time() + 30)
            cluster.env["OMPI_MCA_plm_rsh_agent"] = f"ssh -F {cluster.ssh_config}"
        # The tests run up to 4 ranks on this machine's 2 cores while the hostfile claims a slot
        # per rank, so Open MPI does not know it is oversubscribed and busy-polls: idle ranks
        # starve working ones (verify of the example: 4.1 s -> 0.7 s with yielding).
        cluster.env["OMPI_MCA_mpi_yield_when_idle"] = "1"
        yield cluster
    finally:
        try:
            for h in hosts:
                _stop(h.sshd)
        finally:
            _remove_namespaces(cluster.created)   # also kills whatever _stop could not


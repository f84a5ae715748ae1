"""Host lists of `distpart launch --hostfile/--ip-config` and `distpart hostfile` (issue 18
item 10): every host is an RFC 1123 name, an IPv4 or an IPv6 address, or the line is refused
naming the file, the line and what is wrong; never passed on to ssh (a name starting with
'-' is an option to it) or to mpiexec's own parser. Example tests, then Hypothesis
properties over generated host lists and over arbitrary text."""
from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distpart.errors import InputError
from distpart.launch import add_launch_arguments, hostfile_text, plan_from_args, read_hostfile, read_ip_config
from distpart.launch import hosts as hosts_module
from distpart.launch.hosts import THIS_MACHINE, refuse_one_machine_twice, resolve_machines

OPENMPI_VERSION = "mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
HYDRA_VERSION = "HYDRA build details:\n    Version:                                 4.0.2\n"
PROPERTY = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _args(argv):
    p = argparse.ArgumentParser()
    add_launch_arguments(p)
    return p.parse_args(argv)


def _script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


def _refused(tmp_path: Path, text: str, reader=read_hostfile) -> str:
    f = tmp_path / "hosts.txt"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as e:
        reader(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: ") and "\n" not in msg, msg
    return msg


# ---------------------------------------------------------------- the reported cases

@pytest.mark.parametrize("reader", [read_hostfile, read_ip_config])
def test_a_host_starting_with_a_dash_never_reaches_ssh(tmp_path, reader):
    msg = _refused(tmp_path, "n1\n-oProxyCommand=touch${IFS}/tmp/pwned\n", reader)
    assert "line 2: host '-oProxyCommand=touch${IFS}/tmp/pwned' starts with '-': ssh would read it as an option" in msg


@pytest.mark.parametrize("host", ["node_1", "a..b", "node-", "-", "n1\x00", "x" * 64, "a.b_c", "1234",
                                  "256.1.1.1", "010.0.0.1", "fe80::1::2", "fe80::1%a;b", "user@n1", "n1\u00a0"])
def test_names_mpiexec_cannot_parse_are_refused_with_file_and_line(tmp_path, host):
    msg = _refused(tmp_path, f"# cluster\nok-node\n{host} slots=2\n")
    assert "line 3: " in msg and repr(host) in msg


def test_names_and_addresses_that_are_valid(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("n1\nNode-2.Example.COM slots=2\n1node.example.com\n10.0.0.1:3\nfe80::1\n"
                 "fe80::1%eth0 slots=2\n" + "a" * 63 + "." + "b" * 63 + "\n")
    assert read_hostfile(f) == [("n1", 1), ("Node-2.Example.COM", 2), ("1node.example.com", 1), ("10.0.0.1", 3),
                                ("fe80::1", 1), ("fe80::1%eth0", 2), ("a" * 63 + "." + "b" * 63, 1)]


@pytest.mark.parametrize("reader", [read_hostfile, read_ip_config])
def test_a_utf8_bom_is_not_a_host(tmp_path, reader):
    f = tmp_path / "hosts"
    f.write_bytes("\ufeff10.0.0.1\n10.0.0.2\n".encode("utf-8"))
    got = reader(f)
    assert [h if isinstance(h, str) else h[0] for h in got] == ["10.0.0.1", "10.0.0.2"]


@pytest.mark.parametrize("text, problem", [
    ("n1 slot=4\n", "line 1: unexpected 'slot=4' after host 'n1'"),
    ("node 1 slots=2\n", "line 1: unexpected '1' after host 'node'"),
    ("n1 slots=2 username=bob\n", "line 1: unexpected 'username=bob'"),
    ("n1 slots=4 slots=2\n", "line 1: the slot count is given twice"),
    ("n1:2 slots=3\n", "line 1: the slot count is given twice"),
    ("n1 slots=0\n", "line 1: bad slot count in 'slots=0'"),
    ("n1 slots=\u00b2\n", "line 1: bad slot count"),          # isdigit() is True for '²', int() refuses it
    ("n1 max_slots=x\n", "line 1: bad slot count in 'max_slots=x'"),
    ("n1:\n", "line 1: bad slot count in 'n1:'"),
])
def test_fields_mpiexec_would_ignore_or_misread_are_refused(tmp_path, text, problem):
    assert problem in _refused(tmp_path, text)


def test_open_mpi_spellings_of_the_slot_count(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("a slots = 4 max_slots=8\nb cpu=2\nc count=3 max-slots=5\nd slots=1\r\n")
    assert read_hostfile(f) == [("a", 4), ("b", 2), ("c", 3), ("d", 1)]


def test_ipv6_in_mpich_host_slots_form(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("[fe80::1]:4\n[::1]\n[fe80::1]:2\n1:2:3:4:5:6:7:8:3\nfe80::9 slots=2\n")
    assert read_hostfile(f) == [("fe80::1", 6), ("::1", 1), ("1:2:3:4:5:6:7:8", 3), ("fe80::9", 2)]
    # Both readings are addresses: the address fe80::1:4, or 4 slots on fe80::1.
    msg = _refused(tmp_path, "fe80::1:4\n")
    assert "line 1: 'fe80::1:4' is ambiguous" in msg and "[fe80::1]:4" in msg and "[fe80::1:4]" in msg
    for bad in ("[fe80::1\n", "[10.0.0.1]:2\n", "[fe80::1]x\n", "[fe80::1]:0\n"):
        assert "line 1: " in _refused(tmp_path, bad)


def test_ip_config_hosts_and_ports(tmp_path):
    f = tmp_path / "ip_config.txt"
    f.write_text("[fe80::1] 30050\nnode-a 30050 2 pod-0 0\n")
    assert read_ip_config(f) == ["fe80::1", "node-a"]
    assert "line 1: expected 'IP [PORT] ...'" in _refused(tmp_path, "10.0.0.1 70000\n", read_ip_config)
    assert "line 1: expected 'IP [PORT] ...'" in _refused(tmp_path, "10.0.0.1 \u0663\u0660\n", read_ip_config)
    assert "line 2: 'node_2' is not a valid host name" in _refused(tmp_path, "n1\nnode_2 30050\n", read_ip_config)


def test_not_utf8_and_unreadable(tmp_path):
    f = tmp_path / "hosts"
    f.write_bytes(b"n1\n\xff\xfe\n")
    with pytest.raises(InputError, match="not UTF-8 text"):
        read_hostfile(f)
    with pytest.raises(InputError, match="cannot read"):
        read_ip_config(tmp_path)


def test_ipv6_hosts_with_an_mpiexec_that_cannot_take_them(tmp_path):
    """Hydra cuts host names at ':' (checked with MPICH 4: 'fe80::1' becomes host 'fe80');
    Open MPI 4.1 refuses a node name other than letters, digits, '.' and '-'."""
    f = tmp_path / "hosts"
    f.write_text("n1\n[fe80::1]:2\n")
    for version in (HYDRA_VERSION, OPENMPI_VERSION):
        with pytest.raises(InputError, match=r"host fe80::1 is an IPv6 address, which this mpiexec cannot take") as e:
            plan_from_args(_args(["--hostfile", str(f), "--", "validate", "I"]), {}, version, tmp_path / "h", "/py")
        assert str(e.value).startswith(f"{f}: ")
    with pytest.raises(InputError, match="MPICH's hostfile"):
        hostfile_text(["fe80::1"], 2, "mpich")
    assert hostfile_text(["fe80::1"], 2, "openmpi") == "fe80::1 slots=2\n"


def test_launch_and_hostfile_commands_refuse_with_exit_2_and_write_nothing(tmp_path):
    nodes = tmp_path / "nodes"
    nodes.write_text("localhost\n-oProxyCommand=sh\n")
    fake = _script(tmp_path / "mpiexec", 'if [ "$1" = --version ]; then echo "mpiexec (OpenRTE) 4.1.4"; exit 0; fi\n'
                   f'touch {tmp_path}/ran\n')
    # A TMPDIR of the test's own, where `distpart launch` would make its hostfile
    # (tempfile.mkstemp): other tests' launches meanwhile (scripts/test.sh runs tests in
    # parallel) write theirs to /tmp, where "none was left" could not be told.
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    for extra in ([], ["--dry-run"]):
        run = subprocess.run([sys.executable, "-m", "distpart", "launch", "--hostfile", str(nodes), "--mpiexec",
                              str(fake), *extra, "--", "validate", "IN"], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, TMPDIR=str(tmpdir)))
        assert run.returncode == 2 and run.stdout == ""
        assert run.stderr == (f"distpart launch: error: {nodes}: line 2: host '-oProxyCommand=sh' starts with '-': "
                              "ssh would read it as an option\n")
    assert not (tmp_path / "ran").exists()
    assert not list(tmpdir.glob("distpart-hosts-*"))
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("\ufeff10.0.0.1 30050\nnode_2 30050\n")
    run = subprocess.run([sys.executable, "-m", "distpart", "hostfile", str(cfg)], capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith(f"distpart hostfile: error: {cfg}: line 2: 'node_2' is not a valid host name")


# ---------------------------------------------------------------- one machine under two names (issue 28 item 9)

def test_ip_config_naming_this_machine_twice_is_refused_before_mpiexec(tmp_path):
    """`127.0.0.1` and `localhost`: Open MPI stopped with "multiple definitions of the slot
    count ... An internal error has occurred in ORTE", exit 1. Now one line naming the file,
    both lines and both names, exit 2, and mpiexec is never started (not even --dry-run's)."""
    fake = _script(tmp_path / "mpiexec", 'if [ "$1" = --version ]; then echo "mpiexec (OpenRTE) 4.1.4"; exit 0; fi\n'
                   f'touch {tmp_path}/ran\n')
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    cfg = tmp_path / "ip_config.txt"
    cfg.write_text("# two names, one machine\n127.0.0.1 30050\n\nlocalhost 30050\n")
    nodes = tmp_path / "nodes"
    nodes.write_text("localhost slots=2\nlocalhost slots=2\n127.0.0.2:1\n")
    for source, path, lines in (("--ip-config", cfg, (2, 4, "127.0.0.1", "localhost")),
                                ("--hostfile", nodes, (1, 3, "localhost", "127.0.0.2"))):
        for extra in ([], ["--dry-run"]):
            run = subprocess.run([sys.executable, "-m", "distpart", "launch", source, str(path), "--mpiexec",
                                  str(fake), *extra, "--", "validate", "IN"], capture_output=True, text=True,
                                 timeout=60, env=dict(os.environ, TMPDIR=str(tmpdir)))
            assert run.returncode == 2 and run.stdout == "", run.stderr
            i, j, a, b = lines
            assert run.stderr == (f"distpart launch: error: {path}: lines {i} and {j} name the same machine: "
                                  f"{a!r} and {b!r} are both this machine; list each machine once, under one name\n")
    assert not (tmp_path / "ran").exists()
    assert not list(tmpdir.glob("distpart-hosts-*"))


def _fake_resolver(table):
    return lambda names: {n: frozenset(table[n]) for n in names if n in table}


def test_two_names_of_one_address_name_both_lines(tmp_path):
    table = {"node1": ["10.0.0.5"], "node1.cluster": ["10.0.0.5", "fd00::5"], "node2": ["10.0.0.6"],
             "node3": ["fd00::7"]}
    lines = [(1, "node1"), (2, "node2"), (3, "node1"), (5, "unresolvable"), (6, "node1.cluster")]
    with pytest.raises(InputError) as e:
        refuse_one_machine_twice(tmp_path / "hosts", lines, _fake_resolver(table))
    assert str(e.value) == (f"{tmp_path / 'hosts'}: lines 1 and 6 name the same machine: 'node1' and "
                            "'node1.cluster' both resolve to 10.0.0.5; list each machine once, under one name")
    # The same name again (a node file lists a node once per slot) and names that do not
    # resolve are no conflict.
    refuse_one_machine_twice("h", [(1, "node1"), (2, "node1"), (3, "node2"), (4, "x"), (5, "y"), (6, "node3")],
                             _fake_resolver(table))
    # plan_from_args runs the check when given a resolver (launch_main gives the real one).
    f = tmp_path / "ip_config.txt"
    f.write_text("node2 30050\nnode1 30050\nnode1.cluster 30050\n")
    args = _args(["--ip-config", str(f), "--", "validate", "I"])
    with pytest.raises(InputError, match=r"lines 2 and 3 name the same machine: 'node1' and 'node1.cluster'"):
        plan_from_args(args, {}, OPENMPI_VERSION, tmp_path / "h", "/py", resolve=_fake_resolver(table))
    plan, _ = plan_from_args(args, {}, OPENMPI_VERSION, tmp_path / "h", "/py")   # no resolver: not checked
    assert plan.hosts == ("node2", "node1", "node1.cluster")


def test_resolver_counts_loopback_and_own_addresses_as_this_machine():
    got = resolve_machines(["127.0.0.1", "127.0.0.2", "localhost", "::1", socket.gethostname(), "no-such-host.invalid"])
    assert got["127.0.0.1"] == got["127.0.0.2"] == got["localhost"] == got["::1"] == frozenset([THIS_MACHINE])
    assert got[socket.gethostname()] == frozenset([THIS_MACHINE])      # this machine's own name
    assert "no-such-host.invalid" not in got                            # RFC 2606: never resolves
    assert "192.0.2.1" in resolve_machines(["192.0.2.1"])["192.0.2.1"]  # TEST-NET-1: nobody's here


def test_a_resolver_that_hangs_is_abandoned(monkeypatch):
    release = threading.Event()
    real = socket.getaddrinfo

    def slow(host, *a, **k):
        if host == "slow.example":
            release.wait(30)
            raise socket.gaierror("gave up")
        return real(host, *a, **k)

    monkeypatch.setattr(hosts_module.socket, "getaddrinfo", slow)
    t0 = time.monotonic()
    try:
        got = resolve_machines(["slow.example", "localhost"], timeout=0.5)
    finally:
        release.set()
    assert time.monotonic() - t0 < 5
    assert got == {"localhost": frozenset([THIS_MACHINE])}


# ---------------------------------------------------------------- properties

_labels = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?", fullmatch=True)
names = st.lists(_labels, min_size=1, max_size=4).map(".".join).filter(
    lambda h: not h.split(".")[-1].isdigit())
hosts = st.one_of(names, st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(str))


def _mpich_token(host: str, n: int) -> str:
    return f"[{host}]:{n}" if ":" in host else f"{host}:{n}"


@PROPERTY
@given(entries=st.lists(st.tuples(hosts, st.integers(1, 16), st.sampled_from(["openmpi", "mpich", "plain"])),
                        min_size=1, max_size=8),
       bom=st.booleans(), crlf=st.booleans())
def test_generated_hostfiles_read_back(tmp_path, entries, bom, crlf):
    lines, want = [], {}
    for host, n, dialect in entries:
        if dialect == "openmpi":
            lines.append(f"{host} slots={n}")
        elif dialect == "mpich":
            lines.append(_mpich_token(host, n))
        else:                                   # one line per slot, as $PBS_NODEFILE
            lines.extend([f"[{host}]" if ":" in host else host] * n)
        want[host] = want.get(host, 0) + n
    f = tmp_path / "hosts"
    f.write_bytes((("\ufeff" if bom else "") + ("\r\n" if crlf else "\n").join(lines) + "\n").encode("utf-8"))
    got = read_hostfile(f)
    assert got == list(want.items())
    # What distpart writes for Open MPI reads back the same.
    f.write_text("".join(f"{h} slots={n}\n" for h, n in got))
    assert read_hostfile(f) == got


@PROPERTY
@given(host=hosts, dashes=st.integers(1, 3), form=st.sampled_from(["{} slots=1", "{}:2", "{}", "{} 30050"]))
def test_a_leading_dash_is_always_refused(tmp_path, host, dashes, form):
    line = form.format("-" * dashes + host)
    reader = read_ip_config if form.endswith("30050") else read_hostfile
    assert "line 2: " in _refused(tmp_path, f"n1\n{line}\n", reader)


_pieces = st.sampled_from(["n1", "node-a", "10.0.0.1", "fe80::1", "::1", "[", "]", ":", "4", "0", "slots", "=",
                           "max_slots", "slot", "#", " ", "\t", "\n", "\r", "-", "_", ".", "\ufeff", "\x00", "\u00a0",
                           "\u2028", "%", "eth0", "\u00b2", "x" * 70, "é"])


@PROPERTY
@given(text=st.lists(_pieces, max_size=25).map("".join))
def test_any_text_is_read_or_refused_in_one_line(tmp_path, text):
    """Whatever a hostfile or ip_config holds: hosts every one of which reads back on its own,
    or an InputError naming the file, in one line; nothing else."""
    f = tmp_path / "hosts"
    f.write_text(text, encoding="utf-8")
    for reader in (read_hostfile, read_ip_config):
        try:
            got = reader(f)
        except InputError as e:
            assert str(e).startswith(f"{f}: ") and "\n" not in str(e) and "\r" not in str(e)
            continue
        for host in (h if isinstance(h, str) else h[0] for h in got):
            assert host and not host.startswith("-") and host.isascii() and host.isprintable()
            assert " " not in host and "#" not in host
            if ":" in host:
                ipaddress.IPv6Address(host)
            f2 = tmp_path / "one"
            f2.write_text(f"{host} slots=1\n")
            assert read_hostfile(f2) == [(host, 1)]

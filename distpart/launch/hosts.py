"""Host lists: DGL's ip_config.txt and the hostfiles of batch systems and mpiexec, read and
checked line by line; the hostfile `distpart launch` hands to mpiexec, written.

DGL's tools take a job's machines from `ip_config.txt` (one machine per line, `IP [PORT]
[more columns]`, e.g. the DGL operator's `ip port workers podname gpus`); batch systems hand
out node lists (`$PBS_NODEFILE` and `scontrol show hostnames`: one host per line, a line per
slot); mpiexec wants a hostfile in its own dialect (Open MPI `host slots=N`, MPICH/Hydra
`host:N`). Every host must be an RFC 1123 host name, an IPv4 or an IPv6 address: anything
else would reach ssh (a name starting with '-' as an option) or mpiexec's own parser, whose
error names a temporary hostfile the user never saw. Each bad line is refused with the file,
the line number and what is wrong.

Two lines naming one machine by different names (`127.0.0.1` and `localhost`, a node's name
and its address) are refused too, naming both lines: Open MPI stops on them with "multiple
definitions of the slot count ... An internal error has occurred in ORTE" (issue 28), and
another launcher would start twice the ranks there. `resolve_machines` resolves every name
(this machine's names and addresses, loopback included, count as one); a name that does not
resolve is left to ssh and mpiexec, as before.
"""
from __future__ import annotations

import ipaddress
import queue
import re
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from ..errors import InputError
from ..paths import read_user_text

FLAVORS = ("openmpi", "mpich")
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_DIGITS = re.compile(r"[0-9]+")
# A line's slot count as Open MPI names it (and `cpus`, which distpart always read), and its
# maximum (checked, then left out: the hostfile distpart writes gives the slots only).
_SLOT_KEYS = ("slots", "count", "cpu", "cpus")
_MAX_KEYS = tuple(f"{a}{s}{b}" for k in ("slots", "cpu", "count") for a, b in (("max", k), (k, "max")) for s in "_-")
MAX_SLOTS = 2**31 - 1
# What a name of this machine resolves to in `resolve_machines` (mpiexec starts those ranks locally).
THIS_MACHINE = "this machine"
RESOLVE_TIMEOUT_S = 10.0    # all names together; a slow DNS must not hold the launch longer
MAX_RESOLVERS = 32          # parallel lookups at most
# names -> {name: the machine's addresses}; a name missing from the answer did not resolve.
Resolver = Callable[[Sequence[str]], Mapping[str, FrozenSet[str]]]


def _is_ip(text: str, kind: type = ipaddress.IPv6Address) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def host_problem(host: str) -> Optional[str]:
    """Why `host` is no RFC 1123 host name, IPv4 or IPv6 address (what ssh and mpiexec take), or None."""
    if host.startswith("-"):
        return f"host {host!r} starts with '-': ssh would read it as an option"
    if ":" in host:
        if not _is_ip(host) or not re.fullmatch(r"[^%]*(%[A-Za-z0-9_.-]+)?", host):
            return f"{host!r} is not a valid IPv6 address"
    elif _DIGITS.fullmatch(host.split(".")[-1]):       # RFC 1123 2.1: a name's last label is never all digits
        if not _is_ip(host, ipaddress.IPv4Address):
            return f"{host!r} is not a valid IPv4 address"
    elif len(host) > 253 or not all(_LABEL.fullmatch(label) for label in host.split(".")):
        return (f"{host!r} is not a valid host name (RFC 1123: dot-separated labels of 1-63 letters, digits "
                "and '-', not starting or ending with '-'; or an IPv4 or IPv6 address)")
    return None


def _read_lines(path: Path) -> List[List[str]]:
    """Each line's fields. Only the blanks mpiexec's readers know separate them (any other
    character is part of a name); '#' starts a comment; a UTF-8 BOM is dropped."""
    text = read_user_text(path, InputError, encoding="utf-8-sig")
    lines = []
    for line in text.split("\n"):
        line = re.sub(r"[ \t\f\v]*=[ \t\f\v]*", "=", line.split("#", 1)[0])     # Open MPI reads `slots = 4` too
        lines.append([f for f in re.split(r"[ \t\f\v\r]+", line) if f])
    return lines


def _count(text: str, path: Path, i: int, what: str) -> int:
    if not _DIGITS.fullmatch(text) or not 1 <= int(text) <= MAX_SLOTS:
        raise InputError(path, f"line {i}: bad slot count in {what!r} (a whole number from 1 to {MAX_SLOTS})")
    return int(text)


def _host(host: str, path: Path, i: int) -> str:
    problem = host_problem(host)
    if problem:
        raise InputError(path, f"line {i}: {problem}")
    return host


def ip_config_lines(path: "str | Path") -> List[Tuple[int, str]]:
    """(line number, host) of each machine line of a DGL ip_config.txt, in order. A second
    column must be a port (so a hostfile given by mistake is caught); further columns are ignored."""
    path = Path(path)
    hosts = []
    for i, fields in enumerate(_read_lines(path), 1):
        if fields and len(fields) >= 2 and not (_DIGITS.fullmatch(fields[1]) and int(fields[1]) <= 65535):
            raise InputError(path, f"line {i}: expected 'IP [PORT] ...' (a port from 0 to 65535), "
                                   f"found {' '.join(fields)!r}")
        if fields:
            bracketed = fields[0].startswith("[") and fields[0].endswith("]") and ":" in fields[0]
            hosts.append((i, _host(fields[0][1:-1] if bracketed else fields[0], path, i)))
    if not hosts:
        raise InputError(path, "names no machine")
    return hosts


def read_ip_config(path: "str | Path") -> List[str]:
    """Hosts of a DGL ip_config.txt in order, one per line (see `ip_config_lines`)."""
    return [h for _, h in ip_config_lines(path)]


def _hostfile_line(fields: List[str], path: Path, i: int) -> Tuple[str, int]:
    """(host, slots) of one hostfile line: `host[:N]` (MPICH; `[IPv6]:N`) or `host key=value...`
    (Open MPI: slots=N or max_slots=M, under any of Open MPI's names)."""
    token, n = fields[0], None
    host, colon, count = token.partition(":")
    if token.startswith("["):                      # [IPv6] or [IPv6]:N
        host, bracket, rest = token[1:].partition("]")
        if not bracket or ":" not in host or rest[:1] not in ("", ":"):
            raise InputError(path, f"line {i}: {token!r}: brackets hold an IPv6 address: [ADDRESS] or [ADDRESS]:N")
        n = _count(rest[1:], path, i, token) if rest else None
    elif colon and ":" not in count:               # MPICH host:N
        n = _count(count, path, i, token)
    elif colon:                                    # an IPv6 address, maybe with MPICH's :N after it
        host, (head, _, tail) = token, token.rpartition(":")
        if len(fields) == 1 and _DIGITS.fullmatch(tail) and _is_ip(head):
            if _is_ip(token):
                raise InputError(path, f"line {i}: {token!r} is ambiguous: the IPv6 address {token}, or "
                                       f"{tail} slots on {head}; write [{token}] or [{head}]:{tail}")
            host, n = head, _count(tail, path, i, token)
    _host(host, path, i)
    for field in fields[1:]:
        key, eq, value = field.partition("=")
        if eq and key in _SLOT_KEYS and n is None:
            n = _count(value, path, i, field)
        elif eq and key in _SLOT_KEYS:
            raise InputError(path, f"line {i}: the slot count is given twice in {' '.join(fields)!r}")
        elif eq and key in _MAX_KEYS:
            _count(value, path, i, field)          # checked; not carried into the hostfile distpart writes
        else:
            raise InputError(path, f"line {i}: unexpected {field!r} after host {host!r}: one host a line, "
                                   "then only slots=N or max_slots=N")
    return host, 1 if n is None else n


def hostfile_lines(path: "str | Path") -> List[Tuple[int, str, int]]:
    """(line number, host, slots) of each host line of a hostfile, in order (see `read_hostfile`)."""
    path = Path(path)
    lines = [(i, *_hostfile_line(fields, path, i)) for i, fields in enumerate(_read_lines(path), 1) if fields]
    if not lines:
        raise InputError(path, "names no machine")
    return lines


def read_hostfile(path: "str | Path") -> List[Tuple[str, int]]:
    """(host, slots) in order of first mention from an Open MPI (`host slots=N [max_slots=M]`),
    MPICH (`host:N`, `[IPv6]:N`) or plain (`host` per line) hostfile. Every mention adds its
    slots, so $PBS_NODEFILE (one line per slot) gives each node its count."""
    return merged_slots(hostfile_lines(path))


def merged_slots(lines: Sequence[Tuple[int, str, int]]) -> List[Tuple[str, int]]:
    """(host, slots) in order of first mention from `hostfile_lines`, each host's slots added up."""
    slots: Dict[str, int] = {}
    for _, host, n in lines:
        slots[host] = slots.get(host, 0) + n
    return list(slots.items())


def host_slots(hosts: Sequence[str], slots: int) -> List[Tuple[str, int]]:
    """Repeated hosts merged (order kept), `slots` each per mention (`distpart hostfile`)."""
    merged: Dict[str, int] = {}
    for h in hosts:
        merged[h] = merged.get(h, 0) + slots
    return list(merged.items())


def distinct_hosts(hosts: Sequence[str], slots: int) -> List[Tuple[str, int]]:
    """Each distinct host once (order kept) with `slots` (`--ranks-per-host`)."""
    return [(h, slots) for h in dict.fromkeys(hosts)]


def hostfile_text(hosts: List[str], slots: int, flavor: str = "openmpi") -> str:
    """A hostfile giving each host `slots` ranks (repeated hosts are merged, order kept)."""
    if slots < 1:
        raise InputError(None, f"--slots must be at least 1, got {slots}")
    return format_hostfile(host_slots(hosts, slots), flavor)


def format_hostfile(entries: Sequence[Tuple[str, int]], flavor: str) -> str:
    """Open MPI's `host slots=N` or Hydra's `host:N`, one line per host."""
    if flavor not in FLAVORS:
        raise InputError(None, f"unknown MPI flavour {flavor!r}; expected one of {', '.join(FLAVORS)}")
    for h, _ in entries:
        if flavor == "mpich" and ":" in h:
            raise InputError(None, f"host {h}: MPICH's hostfile (host:N) cannot hold an IPv6 address (Hydra "
                                   "cuts the name at the first ':'); name the host instead")
    fmt = "{h} slots={n}" if flavor == "openmpi" else "{h}:{n}"
    return "".join(fmt.format(h=h, n=n) + "\n" for h, n in entries)


# ---------------------------------------------------------------- one machine, two names

def own_address(sockaddr: tuple) -> bool:
    """Whether a getaddrinfo socket address is loopback or one of this machine's interfaces."""
    try:
        addr = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
    except ValueError:
        return False
    if addr.is_loopback:
        return True
    try:  # binding to an address succeeds only when it is one of this machine's
        with socket.socket(socket.AF_INET6 if addr.version == 6 else socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((sockaddr[0], 0, *sockaddr[2:]))
        return True
    except OSError:
        return False


def machine_of(name: str) -> Optional[FrozenSet[str]]:
    """The addresses `name` resolves to, all of this machine's as THIS_MACHINE; None if it does not resolve."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    return frozenset(THIS_MACHINE if own_address(info[4]) else str(info[4][0]) for info in infos) or None


def resolve_machines(names: Sequence[str], timeout: float = RESOLVE_TIMEOUT_S) -> Dict[str, FrozenSet[str]]:
    """{name: machine_of(name)} for the names that resolve within `timeout` (all together).
    Lookups run on daemon threads, so one that hangs in the resolver is abandoned, not waited for."""
    todo: "queue.Queue[str]" = queue.Queue()
    for name in dict.fromkeys(names):
        todo.put(name)
    found: Dict[str, FrozenSet[str]] = {}
    lock = threading.Lock()

    def work() -> None:
        while True:
            try:
                name = todo.get_nowait()
            except queue.Empty:
                return
            machine = machine_of(name)
            if machine:
                with lock:
                    found[name] = machine

    workers = [threading.Thread(target=work, name="distpart-resolve", daemon=True)
               for _ in range(min(MAX_RESOLVERS, todo.qsize()))]
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return dict(found)


def refuse_one_machine_twice(path: "str | Path", lines: Sequence[Tuple[int, str]],
                             resolve: Resolver = resolve_machines) -> None:
    """InputError naming the file, both lines and both names when two different names of
    `lines` ((line number, host), in file order) resolve to the same machine. The same name
    on several lines is one machine listed again (merged, as $PBS_NODEFILE lists it per slot)."""
    first: Dict[str, int] = {}
    for i, host in lines:
        first.setdefault(host, i)
    machines = resolve(list(first))
    owner: Dict[str, str] = {}                 # address -> the first name that resolved to it
    for host in first:
        for addr in sorted(machines.get(host, ())):
            other = owner.setdefault(addr, host)
            if other != host:
                why = "are both this machine" if addr == THIS_MACHINE else f"both resolve to {addr}"
                raise InputError(path, f"lines {first[other]} and {first[host]} name the same machine: {other!r} "
                                       f"and {host!r} {why}; list each machine once, under one name")

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
"""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

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


def read_ip_config(path: "str | Path") -> List[str]:
    """Hosts of a DGL ip_config.txt in order, one per line. A second column must be a port
    (so a hostfile given by mistake is caught); further columns are ignored."""
    path = Path(path)
    hosts = []
    for i, fields in enumerate(_read_lines(path), 1):
        if fields and len(fields) >= 2 and not (_DIGITS.fullmatch(fields[1]) and int(fields[1]) <= 65535):
            raise InputError(path, f"line {i}: expected 'IP [PORT] ...' (a port from 0 to 65535), "
                                   f"found {' '.join(fields)!r}")
        if fields:
            bracketed = fields[0].startswith("[") and fields[0].endswith("]") and ":" in fields[0]
            hosts.append(_host(fields[0][1:-1] if bracketed else fields[0], path, i))
    if not hosts:
        raise InputError(path, "names no machine")
    return hosts


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


def read_hostfile(path: "str | Path") -> List[Tuple[str, int]]:
    """(host, slots) in order of first mention from an Open MPI (`host slots=N [max_slots=M]`),
    MPICH (`host:N`, `[IPv6]:N`) or plain (`host` per line) hostfile. Every mention adds its
    slots, so $PBS_NODEFILE (one line per slot) gives each node its count."""
    path = Path(path)
    slots: Dict[str, int] = {}
    for i, fields in enumerate(_read_lines(path), 1):
        if fields:
            host, n = _hostfile_line(fields, path, i)
            slots[host] = slots.get(host, 0) + n
    if not slots:
        raise InputError(path, "names no machine")
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

"""The rules for the names of node types, relations and features: what may become a file name
and part of a DGL key (`ntype/feat`, `src:rel:dst`), and how a name is printed in a one-line
report (`printable`)."""
from __future__ import annotations

import unicodedata
from typing import Optional

NAME_MAX = 255          # bytes in one file name (ext4, XFS, Btrfs, NFS, Lustre)
# What distpart appends when a name of a kind becomes a file name: Step 1 writes `<ntype>.txt`.
# (`distpart chunk` checks the longer names of its chunk files itself: write/writer.py.)
FILE_SUFFIX = {"node type": ".txt"}
# Control, format (e.g. bidirectional overrides), surrogate and line/paragraph separator
# characters: they would break or disguise the one-line reports that name a type.
_UNPRINTABLE = ("Cc", "Cf", "Cs", "Zl", "Zp")


def printable(text: str) -> str:
    """`text` with every character of _UNPRINTABLE escaped (\\n, \\x1b, \\u202e), for a report."""
    if not any(unicodedata.category(c) in _UNPRINTABLE for c in text):
        return text
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _UNPRINTABLE else c for c in text)


def name_problem(name: str, kind: str) -> Optional[str]:
    """Why `name` cannot be a node type, relation or feature name, or None if it can.

    Node type names become file names (`<ntype>.txt`), so they must fit in one (NAME_MAX
    bytes with the suffix); every name becomes part of a DGL key (`ntype/feat`,
    `src:rel:dst/feat`) that DGL splits on '/' and ':', and is printed in one-line reports.
    """
    if not isinstance(name, str):
        return f"{kind} name must be a string, found {type(name).__name__}"
    if not name:
        return f"{kind} name must not be empty"
    if "\0" in name:
        return f"{kind} name {name!r} must not contain a NUL character"
    bad = next((c for c in name if unicodedata.category(c) in _UNPRINTABLE), None)
    if bad is not None:
        return (f"{kind} name {name!r} must not contain control, format or line-break characters "
                f"(it holds U+{ord(bad):04X})")
    limit = NAME_MAX - len(FILE_SUFFIX.get(kind, ""))
    size = len(name.encode("utf-8"))
    if size > limit:
        made = (f"it becomes the file name '<name>{FILE_SUFFIX[kind]}'" if kind in FILE_SUFFIX else
                "names must fit in a file name")
        return (f"{kind} name {name[:40]!r}... is {size} bytes in UTF-8; {made}, so it can have at most "
                f"{limit} bytes (a file name holds {NAME_MAX})")
    if "/" in name or "\\" in name:
        return f"{kind} name {name!r} must not contain '/' or '\\' (DGL keys are 'type/feature')"
    if name in (".", ".."):
        return f"{kind} name {name!r} is not allowed (it is used as a file name)"
    if kind in ("node type", "relation") and ":" in name:
        return f"{kind} name {name!r} must not contain ':' (edge types are 'src:rel:dst')"
    return None

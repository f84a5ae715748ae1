"""What a refusal must leave: the file system exactly as it was.

`snapshot` records every file and folder under some roots (type, size, sha256, symlink
target); `unchanged` runs a block and asserts the snapshot after equals the one before,
naming what was added, removed or changed. Refusal tests wrap each refused command in it.
"""
from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Tuple

Entry = Tuple[str, int, str]   # (kind, size, sha256 or link target)


def snapshot(*roots: "str | os.PathLike[str]") -> Dict[str, Entry]:
    """Every entry under each root (the roots themselves included), by path."""
    found: Dict[str, Entry] = {}
    for root in map(Path, roots):
        if not root.exists() and not root.is_symlink():
            continue
        for path in [root, *sorted(root.rglob("*"))]:
            if path.is_symlink():
                found[str(path)] = ("link", 0, os.readlink(path))
            elif path.is_dir():
                found[str(path)] = ("dir", 0, "")
            else:
                data = path.read_bytes()
                found[str(path)] = ("file", len(data), hashlib.sha256(data).hexdigest())
    return found


def differences(before: Dict[str, Entry], after: Dict[str, Entry]) -> str:
    lines = [f"added {p}" for p in sorted(set(after) - set(before))]
    lines += [f"removed {p}" for p in sorted(set(before) - set(after))]
    lines += [f"changed {p}: {before[p][:2]} -> {after[p][:2]}"
              for p in sorted(set(before) & set(after)) if before[p] != after[p]]
    return "\n".join(lines)


@contextmanager
def unchanged(*roots: "str | os.PathLike[str]") -> Iterator[None]:
    """Assert that the block leaves every entry under `roots` as it found it."""
    before = snapshot(*roots)
    yield
    diff = differences(before, snapshot(*roots))
    assert not diff, "the refused command changed the file system:\n" + diff

"""Resuming an interrupted run: the completion records stages and partitions leave behind,
and the checks that decide what a resumed run may reuse.

A folder's record (`.distpart-complete.json`) is written after everything in that folder is
complete and in place: the assignment folder after Step 1, each `part<p>/` after its files
are. It holds what the content was made from (a `RunKey`: the input's fingerprint, the
options, and for partitions the assignment's fingerprint). `--resume` reuses a folder whose
record matches the current run, redoes one without a record, and refuses one whose record
differs: reusing it would mix two different runs in one output.

Records hold no timestamps and no rank counts, so a resumed output equals an uninterrupted
one byte for byte. Pure file and array functions; callers do the MPI.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..arrays import GOLDEN64, splitmix64
from ..errors import InputError

RECORD = ".distpart-complete.json"
VERSION = 1


@dataclass(frozen=True)
class RunKey:
    """What a stage's output depends on: if any part differs, the output differs."""

    input: str                                   # manifest.input_fingerprint of the graph
    options: Mapping[str, Any] = field(default_factory=dict)
    assignment: str = ""                         # assignment_fingerprint; "" for Step 1 itself

    def as_json(self) -> Dict[str, Any]:
        return {"input_fingerprint": self.input, "options": dict(self.options),
                "assignment_fingerprint": self.assignment}


def differences(key: RunKey, record: Mapping[str, Any]) -> List[str]:
    """What changed between the run that wrote `record` and `key`, in words ([] if nothing)."""
    changed = []
    if record.get("input_fingerprint") != key.input:
        changed.append("the input graph changed (metadata.json, or a chunk file's name, size or time)")
    if record.get("assignment_fingerprint", "") != key.assignment:
        changed.append("the assignment changed")
    before = record.get("options") if isinstance(record.get("options"), dict) else {}
    for name in sorted(set(before) | set(key.options)):
        if before.get(name) != key.options.get(name):
            changed.append(f"option {name}: {before.get(name)!r} then, {key.options.get(name)!r} now")
    return changed


def read_record(folder: Path) -> Optional[Dict[str, Any]]:
    """The folder's completion record, or None when it has none (or an unreadable one, which
    a killed writer cannot leave: records are renamed into place)."""
    try:
        record = json.loads((Path(folder) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("version") == VERSION else None


def check_record(folder: Path, key: RunKey) -> Optional[Dict[str, Any]]:
    """The record when it matches `key`; None when there is none; InputError when it was
    written by a run with other inputs or options."""
    record = read_record(folder)
    if record is None:
        return None
    changed = differences(key, record)
    if changed:
        raise InputError(Path(folder) / RECORD, "was written by a run with other inputs or options, so "
                         "--resume cannot continue it: " + "; ".join(changed)
                         + ". Rerun with the original inputs and options, or with --overwrite to start over")
    return record


def write_record(folder: Path, key: RunKey, **content: Any) -> None:
    """Mark `folder` complete (atomically: a killed writer leaves no record)."""
    record = {"version": VERSION, **key.as_json(), **content}
    tmp = Path(folder) / f"{RECORD}.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, Path(folder) / RECORD)


def remove_record(folder: Path) -> None:
    """Before a folder is rewritten: its old record must not vouch for new, partial files."""
    (Path(folder) / RECORD).unlink(missing_ok=True)


def assignment_digest(type_index: int, start: int, parts: np.ndarray) -> int:
    """This block's share of an assignment's fingerprint: a wrapping sum of one hash per
    (type, node, partition). Sums commute, so the total is the same however the nodes are
    split across ranks; callers add the shares of all blocks (mod 2**64)."""
    ids = np.arange(start, start + len(parts), dtype=np.uint64)
    h = splitmix64(ids + np.uint64((type_index + 1) * int(GOLDEN64) % 2**64))
    h = splitmix64(h ^ np.asarray(parts, dtype=np.uint64))
    return int(h.sum(dtype=np.uint64))


def assignment_fingerprint(total: int, num_parts: int) -> str:
    """The fingerprint text from the sum of every block's `assignment_digest`."""
    return f"{num_parts}:{total % 2**64:016x}"

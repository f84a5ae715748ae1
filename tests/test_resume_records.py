"""Completion records and the assignment fingerprint (no MPI)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from distpart.errors import InputError
from distpart.run.resume import (RECORD, RunKey, assignment_digest, assignment_fingerprint, check_record,
                             differences, read_record, remove_record, write_record)

KEY = RunKey("abc", {"seed": 0, "num_parts": 4}, "4:00ff")


def test_record_round_trip_and_match(tmp_path):
    assert check_record(tmp_path, KEY) is None
    write_record(tmp_path, KEY, digest="d")
    record = check_record(tmp_path, KEY)
    assert record["digest"] == "d" and record["options"] == {"seed": 0, "num_parts": 4}
    assert not (tmp_path / f"{RECORD}.tmp").exists()
    remove_record(tmp_path)
    assert read_record(tmp_path) is None
    remove_record(tmp_path)  # absent: no error


def test_record_is_deterministic(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    write_record(tmp_path / "a", KEY, files={"x": 1})
    write_record(tmp_path / "b", KEY, files={"x": 1})
    assert (tmp_path / "a" / RECORD).read_bytes() == (tmp_path / "b" / RECORD).read_bytes()


def test_differences_name_what_changed():
    record = {**KEY.as_json()}
    assert differences(KEY, record) == []
    other = RunKey("abd", {"seed": 1, "num_parts": 4, "method": "random"}, "4:0000")
    changed = differences(other, record)
    assert changed[0].startswith("the input graph changed")
    assert "the assignment changed" in changed
    assert "option seed: 0 then, 1 now" in changed
    assert "option method: None then, 'random' now" in changed
    assert len(changed) == 4


def test_mismatching_record_is_refused(tmp_path):
    write_record(tmp_path, KEY)
    with pytest.raises(InputError, match=r"option seed: 0 then, 5 now.*--overwrite"):
        check_record(tmp_path, RunKey("abc", {"seed": 5, "num_parts": 4}, "4:00ff"))


@pytest.mark.parametrize("text", ["{", "[]", json.dumps({"version": 99})])
def test_unreadable_or_foreign_record_counts_as_absent(tmp_path, text):
    (tmp_path / RECORD).write_text(text)
    assert read_record(tmp_path) is None


def test_assignment_fingerprint_does_not_depend_on_the_split():
    rng = np.random.default_rng(1)
    parts = rng.integers(0, 8, 1000)
    whole = assignment_digest(0, 0, parts)
    for cuts in ([300], [1, 999], [250, 500, 750]):
        bounds = [0, *cuts, 1000]
        split = sum(assignment_digest(0, a, parts[a:b]) for a, b in zip(bounds, bounds[1:]))
        assert assignment_fingerprint(split, 8) == assignment_fingerprint(whole, 8)


def test_assignment_fingerprint_sees_every_change():
    parts = np.zeros(100, dtype=np.int64)
    base = assignment_fingerprint(assignment_digest(0, 0, parts), 2)
    moved = parts.copy()
    moved[57] = 1
    assert assignment_fingerprint(assignment_digest(0, 0, moved), 2) != base
    assert assignment_fingerprint(assignment_digest(1, 0, parts), 2) != base  # another type
    assert assignment_fingerprint(assignment_digest(0, 0, parts), 4) != base  # another P
    swapped = parts.copy()
    swapped[[3, 4]] = [1, 0]
    assert assignment_fingerprint(assignment_digest(0, 0, swapped), 2) != base

"""Property tests of the assignment-file reader (`<ntype>.txt`: one partition ID a line), the
text a user may hand over: any bytes are read or refused with an InputError naming the file,
and how the file is cut between ranks never changes what is read."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distpart.chunked.readers import read_csv_ints
from distpart.errors import InputError

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def read_in_pieces(path: Path, cuts) -> np.ndarray:
    size = path.stat().st_size
    bounds = sorted({0, size, *(min(c, size) for c in cuts)})
    return np.concatenate([read_csv_ints(path, a, b, 1)[:, 0] for a, b in zip(bounds, bounds[1:])]
                          or [np.empty(0, dtype=np.int64)])


@SETTINGS
@given(ids=st.lists(st.integers(0, 2**40), max_size=200), cuts=st.lists(st.integers(0, 4000), max_size=5),
       crlf=st.booleans(), final_newline=st.booleans())
def test_any_cut_reads_the_same_ids(tmp_path_factory, ids, cuts, crlf, final_newline):
    path = tmp_path_factory.mktemp("a") / "paper.txt"
    eol = "\r\n" if crlf else "\n"
    text = eol.join(map(str, ids)) + (eol if final_newline and ids else "")
    path.write_text(text, newline="")
    np.testing.assert_array_equal(read_in_pieces(path, cuts), np.array(ids, dtype=np.int64))


@SETTINGS
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 400), max_size=3))
def test_any_bytes_are_read_or_refused_naming_the_file(tmp_path_factory, data, cuts):
    path = tmp_path_factory.mktemp("b") / "author.txt"
    path.write_bytes(data)
    try:
        whole = read_csv_ints(path, 0, len(data), 1)
    except InputError as e:
        assert str(path) in str(e) and "\n" not in str(e).strip()
        return
    assert whole.dtype == np.int64 and whole.ndim == 2 and whole.shape[1] == 1
    # A file that reads whole reads the same in pieces (each rank reads a byte range).
    np.testing.assert_array_equal(read_in_pieces(path, cuts), whole[:, 0])

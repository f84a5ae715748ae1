"""harness.remove_leaked_segments: at the end of a session, Open MPI's shared-memory files that
the tests' killed jobs left are removed; a file a live process maps, an older one, or another
kind of file stays."""
from __future__ import annotations

import mmap
import os
import time

from harness import remove_leaked_segments


def test_only_unmapped_segments_of_this_session_are_removed(tmp_path):
    started = time.time()
    old = tmp_path / "vader_segment.vm.0.1a.0"
    old.write_bytes(b"\0" * 4096)
    os.utime(old, (started - 3600, started - 3600))
    leaked = tmp_path / "vader_segment.vm.0.2b.1"
    leaked.write_bytes(b"\0" * 4096)
    live = tmp_path / "vader_segment.vm.0.2b.0"
    live.write_bytes(b"\0" * 4096)
    other = tmp_path / "not_a_segment"
    other.write_bytes(b"x")
    with open(live, "r+b") as f, mmap.mmap(f.fileno(), 4096):   # as a live rank maps its own
        removed = remove_leaked_segments(started - 1, tmp_path)
        assert removed == [leaked]
        assert live.exists() and old.exists() and other.exists() and not leaked.exists()


def test_no_folder_is_nothing_to_do(tmp_path):
    assert remove_leaked_segments(0.0, tmp_path / "none") == []

"""Step 2 and verify hold IDs as int32 while they fit (`arrays.id_dtype`) and as int64 past
2**31: both paths give the same bytes. The int64 path is forced by lowering the limit in a
wrapper script, so no graph of 2**31 items is needed."""
from __future__ import annotations

from pathlib import Path

from harness import distpart, mpirun, start_early
from reference import tree_bytes

_FORCE_INT64 = """
import sys
import distpart.arrays
distpart.arrays.INT32_IDS = 0   # every count is past it: int64 everywhere
from distpart.cli import main
sys.exit(main(sys.argv[1:]))
"""


@start_early
def test_int64_ids_give_the_same_output_as_int32(example_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "force_int64.py"
    script.write_text(_FORCE_INT64)
    assign = tmp_path / "assign"
    distpart(2, "assign", example_dir, assign, "--num-parts", 4, "--method", "random", "--seed", 3)
    narrow, wide = tmp_path / "narrow", tmp_path / "wide"
    distpart(2, "dispatch", example_dir, assign, narrow, "--max-message-mb", 1)
    run = mpirun(2, ["dispatch", str(example_dir), str(assign), str(wide), "--max-message-mb", "1"], script=script)
    assert run.returncode == 0, run.output
    run = mpirun(2, ["verify", str(example_dir), str(assign), str(wide)], script=script)
    assert run.returncode == 0 and "verify: OK" in run.stdout, run.output
    got, want = tree_bytes(wide), tree_bytes(narrow)
    assert set(got) == set(want) and "part3/graph.dgl" in got
    for name in want:
        assert got[name] == want[name], name

"""dispatch.publish without MPI: a check that fails after publishing withdraws metadata.json."""
from __future__ import annotations

import pytest

from distpart.dispatch.publish import withdrawn_on_error
from distpart.errors import OutputError
from distpart.partitions.manifest import MANIFEST_FILE
from distpart.paths import CONFIG_FILE


class OneRank:
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def Get_rank(self) -> int:
        return self.rank


@pytest.mark.parametrize("rank", [0, 1])
def test_a_failed_check_withdraws_the_config_and_manifest_on_rank_0(tmp_path, rank):
    for name in (CONFIG_FILE, MANIFEST_FILE, "part0/graph.dgl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    with pytest.raises(OutputError, match="verify found"):
        with withdrawn_on_error(OneRank(rank), tmp_path):
            raise OutputError(tmp_path / "part0", "verify found a wrong array")
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == (["part0/graph.dgl"] if rank == 0 else sorted([CONFIG_FILE, MANIFEST_FILE, "part0/graph.dgl"]))


def test_a_passing_check_keeps_them(tmp_path):
    (tmp_path / CONFIG_FILE).write_text("x")
    with withdrawn_on_error(OneRank(0), tmp_path):
        pass
    assert (tmp_path / CONFIG_FILE).exists()


def test_a_bug_is_not_swallowed_and_leaves_them(tmp_path):
    (tmp_path / CONFIG_FILE).write_text("x")
    with pytest.raises(ZeroDivisionError):
        with withdrawn_on_error(OneRank(0), tmp_path):
            1 / 0
    assert (tmp_path / CONFIG_FILE).exists()

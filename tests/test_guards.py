"""Output-size and memory estimates, and disk errors turned into clear messages (no MPI)."""
import errno
import os

import numpy as np
import pytest

from distpart.errors import InputError, OutputError
from distpart.chunked.estimate import estimate_output_bytes, estimate_peak_rss
from distpart.run.guards import check_memory, check_space, gib, writing
from distpart.chunked.metadata import load_metadata


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    from distpart.synthetic import example_graph
    return load_metadata(example_graph(tmp_path_factory.mktemp("ex") / "g"))


def test_gib():
    assert [gib(n) for n in (12, 2048, 5 << 20, 3 << 30)] == ["12 B", "2 KiB", "5 MiB", "3 GiB"]


def test_output_estimate_is_close_to_a_real_output(example, tmp_path):
    # The example partitioned by a test elsewhere: 4 partitions of it weigh about 0.67 MB.
    est = estimate_output_bytes(example, 4)
    assert 0.5e6 < est < 1.0e6, est
    assert estimate_output_bytes(example, 1) < est      # no halo with one partition


def test_memory_estimate_scales_as_one_over_ranks(example):
    from distpart.chunked.estimate import BASE_BYTES
    one, four = estimate_peak_rss(example, 1), estimate_peak_rss(example, 4)
    assert one > four > BASE_BYTES
    with pytest.raises(InputError, match=r"dispatch needs about .* per rank but --max-memory-gb is 0.01"):
        check_memory(one, 0.01)
    check_memory(one, 64)


def test_space_check_names_both_numbers(tmp_path):
    check_space(tmp_path / "not" / "yet", 1)
    with pytest.raises(InputError, match=r"the output needs about 1 TiB but its file system has .* free"):
        check_space(tmp_path, 1 << 40)


def test_writing_turns_disk_errors_into_output_errors(tmp_path):
    with pytest.raises(OutputError, match="no space left on the output's file system"):
        with writing(tmp_path / "f"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "f"))
    with pytest.raises(OutputError, match="cannot write: Read-only file system"):
        with writing(tmp_path / "f"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))


def test_freed_memory_goes_back_to_the_os(monkeypatch):
    from distpart.run.guards import return_freed_memory_to_the_os
    assert return_freed_memory_to_the_os() is True  # glibc (Debian, the CI machine)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert return_freed_memory_to_the_os() is False  # the user's setting wins


def test_stage_estimates_cover_every_stage_and_scale_with_ranks(example):
    from distpart.chunked.estimate import BASE_BYTES, STAGE_MODELS, estimate_stage_peaks
    one = estimate_stage_peaks(example, 1, "multilevel")
    assert list(one) == ["assign", "dispatch", "verify"]
    assert list(estimate_stage_peaks(example, 1, None, verify=False)) == ["dispatch"]
    four = estimate_stage_peaks(example, 4, "multilevel")
    for stage in one:  # everything above the fixed part is divided among the ranks
        assert one[stage] - BASE_BYTES == pytest.approx(4 * (four[stage] - BASE_BYTES), abs=4)
    # KaMinPar holds the whole graph in rank 0's process: more ranks do not lower Step 1.
    assert STAGE_MODELS["assign/kaminpar"].whole_graph
    assert estimate_stage_peaks(example, 4, "kaminpar")["assign"] == estimate_stage_peaks(example, 1, "kaminpar")["assign"]
    # The guard's dispatch figure is the one the older single-stage estimate gave.
    assert one["dispatch"] == estimate_peak_rss(example, 1)
    # Step 1 balancing several columns holds more per edge than node counts alone.
    several = estimate_stage_peaks(example, 1, "multilevel", columns=4)
    assert several["assign"] > one["assign"] and several["dispatch"] == one["dispatch"]


def test_balance_options_count_the_columns_vertex_weights_builds(example):
    from distpart.assign.balance import BalanceOptions, vertex_weights
    n = sum(example.node_counts)
    offsets = np.concatenate([[0], np.cumsum(example.node_counts)])
    for opts in (BalanceOptions(), BalanceOptions(ntypes=True), BalanceOptions(edges=True),
                 BalanceOptions(ntypes=True, edges=True)):
        weights, names = vertex_weights(example, opts, offsets, 0, n, np.ones(n, dtype=np.int64))
        assert opts.names(example) == names and weights.shape[1] == len(names), names


def test_a_run_that_would_not_fit_is_refused_naming_the_stage_and_its_estimate():
    from distpart.run.guards import check_stage_memory
    gb = 2**30
    estimates = {"assign": 3 * gb, "dispatch": 2 * gb, "verify": 1 * gb}
    check_stage_memory(estimates, 3.5)  # every stage fits: no error
    with pytest.raises(InputError) as e:
        check_stage_memory(estimates, 1.5)
    # The largest stage over the limit is named with its estimate, and every stage is listed.
    assert str(e.value).startswith("assign needs about 3 GiB per rank but --max-memory-gb is 1.5; use more ranks")
    assert "(estimates per rank: assign 3 GiB, dispatch 2 GiB, verify 1 GiB)" in str(e.value)
    with pytest.raises(InputError, match=r"^verify needs about 4 GiB .* is 3\.5"):
        check_stage_memory({"assign": 3 * gb, "dispatch": 2 * gb, "verify": 4 * gb}, 3.5)
    with pytest.raises(InputError, match=r"assign needs about 3 GiB .*--method multilevel"):
        check_stage_memory(estimates, 2.5, whole_graph=["assign"])

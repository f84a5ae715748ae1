"""The ParMETIS binding's guards, without MPI: discovery, type widths, overflow, MPI mismatch.

The MPI-mismatch guard is exercised against tiny fake libraries compiled here with the C
compiler: one whose MPI_Initialized reports 0 (as a ParMETIS linked to another, never
initialised MPI would), and one with no MPI at all.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from distpart.assign import parmetis
from distpart.assign.parmetis import ParMetisError, ParMetisLibrary


def test_missing_explicit_library(tmp_path):
    with pytest.raises(ParMetisError, match=r"PARMETIS_LIB=.*nope\.so: file does not exist"):
        parmetis.find_library({"PARMETIS_LIB": str(tmp_path / "nope.so")})


def test_no_library_anywhere_names_both_ways(monkeypatch):
    monkeypatch.setattr(parmetis.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(ParMetisError) as e:
        parmetis.find_library({})
    assert "PARMETIS_LIB" in str(e.value) and "libparmetis4.0" in str(e.value)


def test_explicit_library_wins(tmp_path, monkeypatch):
    lib = tmp_path / "libparmetis.so"
    lib.write_bytes(b"")
    monkeypatch.setattr(parmetis.ctypes.util, "find_library", lambda name: "/usr/lib/other.so")
    assert parmetis.find_library({"PARMETIS_LIB": str(lib)}) == str(lib)


def test_widths_from_environment_header_and_default(tmp_path):
    lib = tmp_path / "lib" / "libparmetis.so"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    assert parmetis.type_widths(str(lib), {}) == (32, 32)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "metis.h").write_text("#define IDXTYPEWIDTH 64\n#define REALTYPEWIDTH 32\n")
    assert parmetis.type_widths(str(lib), {}) == (64, 32)
    (lib.parent / "metis.h").write_text("#define  IDXTYPEWIDTH 32\n#define REALTYPEWIDTH 64\n")
    assert parmetis.type_widths(str(lib), {}) == (32, 64)
    env = {"PARMETIS_IDXWIDTH": "64", "PARMETIS_REALWIDTH": "64"}
    assert parmetis.type_widths(str(lib), env) == (64, 64)
    with pytest.raises(ParMetisError, match="PARMETIS_IDXWIDTH=16: must be 32 or 64"):
        parmetis.type_widths(str(lib), {"PARMETIS_IDXWIDTH": "16"})


@pytest.mark.parametrize("bits, dtype, limit", [(32, np.int32, 2**31 - 1), (64, np.int64, 2**63 - 1)])
def test_overflow_is_refused(bits, dtype, limit):
    lib = ParMetisLibrary("/x/libparmetis.so", None, bits, 32)
    assert lib.idx_dtype == dtype and lib.idx_max == limit
    parmetis.check_fits(lib, "the number of vertices", limit)
    with pytest.raises(ParMetisError) as e:
        parmetis.check_fits(lib, "the number of vertices", limit + 1)
    assert f"{bits}-bit idx_t" in str(e.value) and "PARMETIS_IDXWIDTH=64" in str(e.value)


def test_compact_vtxdist_drops_empty_ranks():
    compact, keep = parmetis.compact_vtxdist(np.array([0, 0, 5, 5, 9, 9]))
    assert compact.tolist() == [0, 5, 9] and keep.tolist() == [False, True, False, True, False]
    compact, keep = parmetis.compact_vtxdist(np.array([0, 3, 6]))
    assert compact.tolist() == [0, 3, 6] and keep.all()


def _compile(tmp_path: Path, name: str, source: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake ParMETIS libraries")
    src, lib = tmp_path / f"{name}.c", tmp_path / f"lib{name}.so"
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def test_library_linked_to_another_mpi_is_refused(tmp_path):
    lib = _compile(tmp_path, "fakeparmetis", """
        int MPI_Initialized(int *flag) { *flag = 0; return 0; }
        int ParMETIS_V3_PartKway(void) { return 1; }
    """)
    with pytest.raises(ParMetisError, match="linked against a different MPI than mpi4py"):
        parmetis.load({"PARMETIS_LIB": str(lib)})


def test_library_without_mpi_is_refused(tmp_path):
    lib = _compile(tmp_path, "nompi", "int ParMETIS_V3_PartKway(void) { return 1; }\n")
    with pytest.raises(ParMetisError, match="not linked against an MPI library"):
        parmetis.load({"PARMETIS_LIB": str(lib)})


def test_library_without_partkway_is_refused(tmp_path):
    lib = _compile(tmp_path, "notparmetis", "int something(void) { return 1; }\n")
    with pytest.raises(ParMetisError, match="no ParMETIS_V3_PartKway"):
        parmetis.load({"PARMETIS_LIB": str(lib)})


def test_library_that_is_not_a_shared_object(tmp_path):
    bogus = tmp_path / "libparmetis.so"
    bogus.write_text("not an ELF file")
    with pytest.raises(ParMetisError, match="cannot load ParMETIS"):
        parmetis.load({"PARMETIS_LIB": str(bogus)})


# ---------------------------------------------------------------- widths never from the working directory

def _real_library():
    from mpi4py import MPI  # noqa: F401  (the binding calls ParMETIS, which needs MPI started)
    try:
        return parmetis.find_library()
    except parmetis.ParMetisError:
        pytest.skip("the system ParMETIS is not installed (scripts/setup.sh installs it)")


def _metis_h(folder, idx, real):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metis.h").write_text(f"#define IDXTYPEWIDTH {idx}\n#define REALTYPEWIDTH {real}\n")


def test_a_metis_h_in_the_working_directory_is_ignored(tmp_path, monkeypatch):
    _real_library()
    _metis_h(tmp_path, 64, 64)
    _metis_h(tmp_path / "include", 64, 64)
    monkeypatch.chdir(tmp_path)
    for var in ("PARMETIS_LIB", "PARMETIS_IDXWIDTH", "PARMETIS_REALWIDTH"):
        monkeypatch.delenv(var, raising=False)
    assert parmetis.widths_from_header("libparmetis.so.4.0") == {}
    lib = parmetis.load({})
    assert os.path.isabs(lib.path) and not lib.path.startswith(str(tmp_path))
    assert (lib.idx_bits, lib.real_bits) == (32, 32)


def test_a_wrong_declared_width_is_caught_by_the_probe_call(monkeypatch):
    _real_library()
    with pytest.raises(parmetis.ParMetisError) as e:
        parmetis.load({"PARMETIS_IDXWIDTH": "64"})
    text = str(e.value)
    assert "fails a test partitioning with idx_t 64-bit" in text
    assert "taken from PARMETIS_IDXWIDTH" in text
    assert "works with idx_t 32-bit and real_t 32-bit" in text


def test_a_wrong_header_beside_a_copied_library_is_caught(tmp_path):
    import shutil
    src = parmetis.loaded_path(parmetis.ctypes.CDLL(_real_library(), mode=os.RTLD_LOCAL),
                               "ParMETIS_V3_PartKway", "")
    copy = tmp_path / "lib" / "libparmetis.so"
    copy.parent.mkdir()
    shutil.copy(src, copy)
    _metis_h(tmp_path / "include", 64, 32)
    with pytest.raises(parmetis.ParMetisError, match="taken from the metis.h beside it"):
        parmetis.load({"PARMETIS_LIB": str(copy)})


def test_a_graph_past_a_32_bit_idx_t_is_refused_before_any_work(tmp_path, monkeypatch):
    """3e9 nodes from the metadata alone: setup refuses, naming the limit and the way out,
    before a CSR is built (ParMETIS would wrap the IDs, as DGL #7850 reports)."""
    import json

    from distpart.chunked.metadata import load_metadata
    from distpart.assign.balance import BalanceOptions

    counts = [1_500_000_000, 1_500_000_000]
    meta_file = tmp_path / "metadata.json"
    meta_file.write_text(json.dumps({
        "graph_name": "huge", "node_type": ["n"], "num_nodes_per_chunk": [counts],
        "edge_type": ["n:e:n"], "num_edges_per_chunk": [[1, 1]],
        "edges": {"n:e:n": {"format": {"name": "csv", "delimiter": " "}, "data": ["e0.txt", "e1.txt"]}},
        "node_data": {}, "edge_data": {}}))
    meta = load_metadata(meta_file)
    monkeypatch.setattr(parmetis, "load", lambda: ParMetisLibrary("/x/libparmetis.so", None, 32, 32))
    with pytest.raises(ParMetisError) as e:
        parmetis.setup(meta, BalanceOptions(), 0)
    text = str(e.value)
    assert "the number of nodes is 3000000000" in text and "max 2147483647" in text
    assert "--method multilevel" in text and "\n" not in text
    monkeypatch.setattr(parmetis, "load", lambda: ParMetisLibrary("/x/libparmetis.so", None, 64, 32))
    assert parmetis.setup(meta, BalanceOptions(), 0).index_dtype == np.int64

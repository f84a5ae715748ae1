"""Our own thin ctypes binding to ParMETIS_V3_PartKway, loaded at run time.

ParMETIS's licence forbids redistribution, so nothing of it is vendored or compiled in:
the library is found at run time (`PARMETIS_LIB`, else the system's `libparmetis`, e.g.
Debian's `libparmetis4.0` from non-free). The integer and real widths it was built with
(idx_t, real_t) come from `PARMETIS_IDXWIDTH`/`PARMETIS_REALWIDTH`, else a `metis.h` beside
the file the library was really loaded from (never the working directory), else 32/32
(Debian's build), and are then confirmed by a tiny partitioning call on MPI_COMM_SELF:
arrays of the wrong width would otherwise reach the library and fail far from the cause
("sum of tpwgts is not 1.0"). Before any call the binding checks that the library's own
MPI is the one mpi4py initialised: a ParMETIS linked to another MPI would otherwise crash
or hang deep inside a collective.

`partition` is `--method parmetis` (the `step1` interface): ParMETIS_V3_PartKway on the
graph `step1` builds, by default with the hubs first (`ordering`).
"""
from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Tuple

import numpy as np

from ..arrays import offsets, owner_of
from ..errors import DistpartError
from ..mpi.exchange import allreduce_max, allreduce_sum
from .native import NativeLibrary, find_native, loaded_path, padded, silenced
from .step1 import Setup

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ..chunked.metadata import GraphMeta
    from ..run.progress import Progress
    from .balance import BalanceOptions
    from .step1 import Step1Graph

METIS_OK = 1
_RETURN_CODES = {-2: "METIS_ERROR_INPUT (invalid input)", -3: "METIS_ERROR_MEMORY (out of memory)",
                 -4: "METIS_ERROR (ParMETIS failed; see its message above)"}


class ParMetisError(DistpartError):
    """ParMETIS is missing, incompatible, or failed."""


class ParMetisLibrary(NativeLibrary):
    """A loaded ParMETIS."""


def find_library(env: Mapping[str, str] = os.environ) -> str:
    """Path of the ParMETIS shared library to use; ParMetisError naming both ways if none."""
    return find_native(
        env, "PARMETIS_LIB", "parmetis", ParMetisError,
        "ParMETIS library not found: set PARMETIS_LIB=/path/to/libparmetis.so (a site build), or "
        "install the system library (Debian: libparmetis4.0 from the non-free component; "
        "Ubuntu: libparmetis4.0 from multiverse; scripts/setup.sh does this)")


def type_widths(path: str, env: Mapping[str, str] = os.environ) -> Tuple[int, int]:
    """(idx bits, real bits): environment first, then a metis.h beside the library, else (32, 32).

    `path` must be the library's real location (see `loaded_path`); a bare name such as
    'libparmetis.so.4.0' has no folder, and its headers are not looked for.
    """
    from_header = widths_from_header(path)
    widths = []
    for var, key in (("PARMETIS_IDXWIDTH", "IDXTYPEWIDTH"), ("PARMETIS_REALWIDTH", "REALTYPEWIDTH")):
        raw = env.get(var) or from_header.get(key) or "32"
        if raw not in ("32", "64"):
            raise ParMetisError(f"{var}={raw}: must be 32 or 64")
        widths.append(int(raw))
    return widths[0], widths[1]


def widths_from_header(path: str) -> dict:
    """IDXTYPEWIDTH/REALTYPEWIDTH of a metis.h beside the library or in ../include."""
    if not os.path.isabs(path):
        return {}  # a bare library name: its "folder" would be the working directory
    lib = Path(path).resolve()
    for header in (lib.parent / "metis.h", lib.parent.parent / "include" / "metis.h"):
        if header.is_file():
            text = header.read_text(errors="replace")
            return dict(re.findall(r"#define\s+(IDXTYPEWIDTH|REALTYPEWIDTH)\s+(\d+)", text))
    return {}


def load(env: Mapping[str, str] = os.environ) -> ParMetisLibrary:
    """Find, load (RTLD_LOCAL) and type the library, and check it shares mpi4py's MPI."""
    name = find_library(env)
    try:
        handle = ctypes.CDLL(name, mode=os.RTLD_LOCAL)
    except OSError as e:
        raise ParMetisError(f"cannot load ParMETIS from {name}: {e}") from None
    if not hasattr(handle, "ParMETIS_V3_PartKway"):
        raise ParMetisError(f"{name} has no ParMETIS_V3_PartKway: not a ParMETIS 4 library")
    path = loaded_path(handle, "ParMETIS_V3_PartKway", name)
    idx_bits, real_bits = type_widths(path, env)
    lib = ParMetisLibrary(path, handle, idx_bits, real_bits)
    check_same_mpi(lib)
    check_widths(lib, env)
    return lib


def check_widths(lib: ParMetisLibrary, env: Mapping[str, str] = os.environ) -> None:
    """Confirm idx_t/real_t by partitioning a 4-vertex path on MPI_COMM_SELF; if the declared
    widths fail, find the ones that work and say which setting to fix."""
    if _probe(lib):
        return
    working = [(i, r) for i in (32, 64) for r in (32, 64)
               if (i, r) != (lib.idx_bits, lib.real_bits) and _probe(ParMetisLibrary(lib.path, lib.handle, i, r))]
    source = ("PARMETIS_IDXWIDTH/PARMETIS_REALWIDTH" if env.get("PARMETIS_IDXWIDTH") or env.get("PARMETIS_REALWIDTH")
              else "the metis.h beside it" if widths_from_header(lib.path) else "the default (Debian's 32/32)")
    found = (f"it works with idx_t {working[0][0]}-bit and real_t {working[0][1]}-bit: set "
             f"PARMETIS_IDXWIDTH={working[0][0]} PARMETIS_REALWIDTH={working[0][1]}" if working
             else "no width combination works: is it a ParMETIS 4 library?")
    raise ParMetisError(f"{lib.path} fails a test partitioning with idx_t {lib.idx_bits}-bit and real_t "
                        f"{lib.real_bits}-bit (taken from {source}); {found}")


def _probe(lib: ParMetisLibrary) -> bool:
    """Partition the path 0-1-2-3 into 2 parts on MPI_COMM_SELF with `lib`'s widths.

    Every array is zero-padded to twice its length, so a library of the other width reads
    only our memory (and then rejects the values) instead of reading past the buffers. Its
    complaints are printed by the library on stdout/stderr, which are silenced meanwhile.
    """
    from mpi4py import MPI

    idx, real = lib.idx_dtype, lib.real_dtype

    arrays = [padded(v, idx) for v in ([0, 4], [0, 1, 3, 5, 6], [1, 0, 2, 1, 3, 2])]
    scalars = [padded([v], idx) for v in (0, 0, 1, 2)]  # wgtflag, numflag, ncon, nparts
    tpwgts, ubvec = padded([0.5, 0.5], real), padded([1.05], real)
    options, edgecut, part = padded([0, 0, 0], idx), padded([0], idx), padded([-1] * 4, idx)

    def ptr(a):
        return a.ctypes.data_as(ctypes.c_void_p)

    fn = lib.handle.ParMETIS_V3_PartKway
    fn.restype = ctypes.c_int
    with silenced():
        rc = fn(ptr(arrays[0]), ptr(arrays[1]), ptr(arrays[2]), None, None, *map(ptr, scalars),
                ptr(tpwgts), ptr(ubvec), ptr(options), ptr(edgecut), ptr(part),
                ctypes.c_void_p(MPI._addressof(MPI.COMM_SELF)))
    got = part[:4]
    return rc == METIS_OK and set(got.tolist()) == {0, 1} and bool((part[4:] == 0).all())


def check_same_mpi(lib: ParMetisLibrary) -> None:
    """Fail unless the MPI that ParMETIS calls is already initialised (that is, mpi4py's).

    The library was loaded with RTLD_LOCAL, so looking MPI_Initialized up through its
    handle finds the MPI it was linked against. If that is a different MPI from the one
    mpi4py started, it was never initialised and reports 0.
    """
    try:
        fn = lib.handle.MPI_Initialized
    except AttributeError:
        raise ParMetisError(f"{lib.path} is not linked against an MPI library (no MPI_Initialized)") from None
    flag = ctypes.c_int(0)
    fn(ctypes.byref(flag))
    if not flag.value:
        raise ParMetisError(
            f"{lib.path} is linked against a different MPI than mpi4py uses (its MPI_Initialized "
            f"reports 0): rebuild ParMETIS with the MPI mpi4py loads, or point mpi4py at ParMETIS's "
            f"MPI (e.g. do not mix the 'mpich' wheel with a system Open MPI)")


def check_fits(lib: ParMetisLibrary, what: str, value: int) -> None:
    """Refuse counts the library's idx_t cannot hold instead of letting them wrap."""
    if value > lib.idx_max:
        raise ParMetisError(
            f"{what} is {value}, more than the {lib.idx_bits}-bit idx_t of {lib.path} can hold "
            f"(max {lib.idx_max}); use --method multilevel (64-bit IDs throughout), or a ParMETIS built with "
            f"IDXTYPEWIDTH=64 and PARMETIS_IDXWIDTH=64")


def compact_vtxdist(vtxdist: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(vtxdist over non-empty ranks only, mask of non-empty ranks).

    ParMETIS 4.0.3 rejects a rank with no vertices ("Poor initial vertex distribution"),
    so empty ranks are split off into no communicator and the others partition alone.
    """
    counts = np.diff(vtxdist)
    keep = counts > 0
    return offsets(counts[keep]), keep


def part_kway(lib: ParMetisLibrary, comm: Intracomm, vtxdist: np.ndarray, xadj: np.ndarray, adjncy: np.ndarray,
              vwgt: Optional[np.ndarray], num_parts: int, imbalance: "float | np.ndarray" = 1.05,
              seed: int = 0) -> np.ndarray:
    """Partition of this rank's vertices [vtxdist[rank], vtxdist[rank+1]). Collective.

    `xadj`/`adjncy` are the local CSR rows (global neighbour IDs, symmetric, no self loops,
    no duplicates); `vwgt` is (nlocal, ncon) or None for unit weights; `imbalance` is
    ParMETIS's ubvec, one factor or one per constraint.
    """
    from mpi4py import MPI

    nloc = len(xadj) - 1
    ncon = 1 if vwgt is None else vwgt.shape[1]
    if num_parts == 1:
        return np.zeros(nloc, dtype=np.int64)
    check_fits(lib, "the number of vertices", int(vtxdist[-1]))
    check_fits(lib, "the largest local adjacency", int(allreduce_max(comm, np.array([len(adjncy)]))[0]))
    if vwgt is not None:
        totals = allreduce_sum(comm, vwgt.sum(axis=0))
        check_fits(lib, "the largest total vertex weight", int(totals.max()))

    compact, keep = compact_vtxdist(np.asarray(vtxdist, dtype=np.int64))
    sub = comm.Split(0 if nloc > 0 else MPI.UNDEFINED, comm.Get_rank()) if not keep.all() else comm
    if sub == MPI.COMM_NULL:
        return np.empty(0, dtype=np.int64)
    try:
        idx, real = lib.idx_dtype, lib.real_dtype
        arrays = {
            "vtxdist": np.ascontiguousarray(compact, dtype=idx),
            "xadj": np.ascontiguousarray(xadj, dtype=idx),
            # Empty ranks own no IDs, so dropping them moves rank boundaries but no vertex ID.
            "adjncy": np.ascontiguousarray(adjncy, dtype=idx),
            "vwgt": None if vwgt is None else np.ascontiguousarray(vwgt, dtype=idx).reshape(-1),
            "tpwgts": np.full(num_parts * ncon, 1.0 / num_parts, dtype=real),
            "ubvec": np.ascontiguousarray(np.broadcast_to(np.asarray(imbalance, dtype=np.float64), (ncon,)),
                                          dtype=real),
            # Any integer seed is accepted (as by random assignment); ParMETIS takes an idx_t.
            "options": np.array([1, 0, seed % 2**31, 0], dtype=idx),
            "part": np.zeros(max(nloc, 1), dtype=idx),
        }
        scalars = {name: np.array([v], dtype=idx) for name, v in
                   (("wgtflag", 0 if vwgt is None else 2), ("numflag", 0), ("ncon", ncon),
                    ("nparts", num_parts), ("edgecut", 0))}

        def ptr(a):
            return None if a is None else a.ctypes.data_as(ctypes.c_void_p)

        comm_handle = ctypes.c_void_p(MPI._addressof(sub))  # MPI_Comm*: works for pointer or int handles
        fn = lib.handle.ParMETIS_V3_PartKway
        fn.restype = ctypes.c_int
        rc = fn(ptr(arrays["vtxdist"]), ptr(arrays["xadj"]), ptr(arrays["adjncy"]), ptr(arrays["vwgt"]),
                None, ptr(scalars["wgtflag"]), ptr(scalars["numflag"]), ptr(scalars["ncon"]),
                ptr(scalars["nparts"]), ptr(arrays["tpwgts"]), ptr(arrays["ubvec"]), ptr(arrays["options"]),
                ptr(scalars["edgecut"]), ptr(arrays["part"]), comm_handle)
    finally:
        if sub is not comm:
            sub.Free()
    if rc != METIS_OK:
        raise ParMetisError(f"ParMETIS_V3_PartKway returned {rc}: {_RETURN_CODES.get(rc, 'unknown error')}")
    return arrays["part"][:nloc].astype(np.int64)


# ---------------------------------------------------------------- the Step 1 method

ALGO_NAME = "metis"   # DGL's name for a ParMETIS assignment in partition_meta.json
# Seconds per adjacency entry held by a rank, for the progress ETA only: the right order is enough.
S_PER_ARC = 2.5e-6


def setup(meta: "GraphMeta", balance: "BalanceOptions", rank: int, vertex_order: str = "degree") -> "Setup":
    """The loaded library; the CSR in its idx_t. `vertex_order` "degree" hands ParMETIS the
    vertices hubs first (see `ordering`: far smaller cuts on power-law graphs); "input" in
    the input's order."""
    lib = load()
    # Before any work: a graph past idx_t's range would wrap inside ParMETIS (DGL #7850).
    check_fits(lib, "the number of nodes", sum(meta.node_counts))
    return Setup(index_dtype=lib.idx_dtype, vertex_order=vertex_order, context=lib)


def partition(comm: "Intracomm", graph: "Step1Graph", vwgt: np.ndarray, k: int, imbalance: np.ndarray,
              seed: int, setup: "Setup", max_bytes: int, progress: "Progress") -> np.ndarray:
    """ParMETIS's blocks of this rank's input vertices. Collective."""
    from ..mpi.collective import agreed
    from ..mpi.exchange import lookup

    lib, csr, numbering = setup.context, graph.csr, graph.numbering
    if graph.names == ["nodes"]:
        vwgt = None  # plain node balance is ParMETIS's default: no weights needed
    elif numbering is not None:
        vwgt = _renumbered_rows(comm, vwgt, numbering.new_ids, numbering.bounds, max_bytes)
    graph.csr = None
    estimate = 1.0 + S_PER_ARC * len(csr.adjncy)
    with agreed(comm), progress.opaque("ParMETIS_V3_PartKway", estimate):
        part = part_kway(lib, comm, csr.vtxdist, csr.xadj, csr.adjncy, vwgt, k,
                         imbalance if vwgt is not None else float(imbalance[0]), seed)
    del csr, vwgt
    if numbering is not None:  # back to the input's numbering
        part = lookup(comm, numbering.new_ids, numbering.bounds, part, max_bytes)
    return part


def _renumbered_rows(comm: "Intracomm", rows: np.ndarray, new_ids: np.ndarray, bounds: np.ndarray,
                     max_bytes: int) -> np.ndarray:
    """Per-vertex rows moved from the input's numbering to the new one, whose blocks are
    `bounds`. Collective."""
    from ..mpi.exchange import exchange
    (ids, got), _ = exchange(comm, owner_of(bounds, new_ids), [new_ids, rows], max_bytes)
    lo, hi = int(bounds[comm.Get_rank()]), int(bounds[comm.Get_rank() + 1])
    out = np.empty((hi - lo, *rows.shape[1:]), dtype=rows.dtype)
    out[ids - lo] = got
    return out

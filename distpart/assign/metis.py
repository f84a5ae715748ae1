"""Our own thin ctypes binding to serial METIS 5 (METIS_PartGraphKway / METIS_PartGraphRecursive).

Used where one process partitions a graph that fits it: the multilevel method's coarsest
graph (`multilevel/initial.py`, several balance constraints, which pymetis cannot pass) and
the benchmarks' serial references. Like ParMETIS (`parmetis.py`), nothing is vendored: the
library is found at run time (`METIS_LIB`, else the system's `libmetis.so.5`, Debian's and
Ubuntu's `libmetis5`).

The widths of idx_t and real_t are detected at run time rather than read from a header
(Debian ships none with the library): METIS_SetDefaultOptions fills METIS_NOPTIONS idx_t
with -1, so over a zeroed int64 buffer it sets 40 words (64-bit idx_t) or 20 (32-bit).
real_t is then confirmed by a 4-vertex partitioning with explicit target weights, which
METIS rejects ("Incorrect sum ... for tpwgts") when read at the wrong width. Idx must come
first: a 64-bit idx_t array read as 32-bit can still "succeed" with garbage.

METIS trusts its input (an out-of-range neighbour is a segfault, not an error code), so
`part_graph` checks in O(n + m) what it can: CSR shape, neighbour range, no self loops,
weights' signs, sums that fit idx_t, and degrees and weights balanced per vertex (a
necessary condition of symmetry; full symmetry is the caller's promise).
"""
from __future__ import annotations

import ctypes
import os
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import DistpartError
from .native import NativeLibrary, find_native, loaded_path, padded, silenced

INSTALL_HINT = "apt install libmetis5"

METIS_OK = 1
RETURN_CODES = {-2: "METIS_ERROR_INPUT (invalid input)", -3: "METIS_ERROR_MEMORY (out of memory)",
                -4: "METIS_ERROR (METIS failed)"}

# Option indices of METIS 5.1's moptions_et (metis.h); 5.2 only appends after NUMBERING.
METIS_NOPTIONS = 40
METIS_OPTION_SEED = 8
METIS_OPTION_NUMBERING = 17

METHODS = {"kway": "METIS_PartGraphKway", "recursive": "METIS_PartGraphRecursive"}
DEFAULT_UBVEC = 1.03


class MetisError(DistpartError):
    """METIS is missing, incompatible, refused its input, or failed."""


class Metis(NativeLibrary):
    """A loaded METIS 5 and the C types of its idx_t and real_t."""


_LOADED: Dict[str, Metis] = {}


def find_library(env: Mapping[str, str] = os.environ) -> str:
    """Path of the METIS shared library to use; MetisError with the install hint if none."""
    return find_native(env, "METIS_LIB", "metis", MetisError,
                       f"METIS library (libmetis.so.5) not found: {INSTALL_HINT} (Debian/Ubuntu; "
                       f"scripts/setup.sh does this), or set METIS_LIB=/path/to/libmetis.so")


def load(env: Mapping[str, str] = os.environ) -> Metis:
    """Find, load and type the library (once per process and path)."""
    name = find_library(env)
    if name in _LOADED:
        return _LOADED[name]
    try:
        handle = ctypes.CDLL(name, mode=os.RTLD_LOCAL)
    except OSError as e:
        raise MetisError(f"cannot load METIS from {name}: {e}; {INSTALL_HINT}") from None
    for symbol in ("METIS_SetDefaultOptions", *METHODS.values()):
        if not hasattr(handle, symbol):
            raise MetisError(f"{name} has no {symbol}: not a METIS 5 library ({INSTALL_HINT})")
    for symbol in ("METIS_SetDefaultOptions", *METHODS.values()):
        getattr(handle, symbol).restype = ctypes.c_int
    path = loaded_path(handle, "METIS_PartGraphKway", name)
    idx_bits = idx_width(handle)
    real_bits = next((r for r in (32, 64) if _probe(Metis(path, handle, idx_bits, r))), None)
    if real_bits is None:
        raise MetisError(f"{path} fails a test partitioning of a 4-vertex path with idx_t {idx_bits}-bit and "
                         f"real_t of 32 or 64 bits: is it a METIS 5 library?")
    _LOADED[name] = lib = Metis(path, handle, idx_bits, real_bits)
    return lib


def idx_width(handle: ctypes.CDLL) -> int:
    """Bits of idx_t: how many int64 words METIS_SetDefaultOptions sets to -1 (see above)."""
    buf = np.zeros(2 * METIS_NOPTIONS, dtype=np.int64)  # room for the widest case, twice
    handle.METIS_SetDefaultOptions(buf.ctypes.data_as(ctypes.c_void_p))
    filled = int((buf == -1).sum())
    if filled == METIS_NOPTIONS:
        return 64
    if filled == METIS_NOPTIONS // 2:
        return 32
    raise MetisError(f"METIS_SetDefaultOptions set {filled} 64-bit words, expected 20 or 40: not METIS 5.x")


def _probe(lib: Metis) -> bool:
    """Partition the path 0-1-2-3 into 2 parts with explicit tpwgts at `lib`'s widths.

    Arrays are zero-padded to twice their length so a wrong width reads only our memory;
    METIS prints its complaint on stdout, silenced meanwhile.
    """
    idx, real = lib.idx_dtype, lib.real_dtype

    options = _options(lib, 0)
    args = [padded(v, idx) for v in ([4], [1], [0, 1, 3, 5, 6], [1, 0, 2, 1, 3, 2])]
    nparts, tpwgts, ubvec = padded([2], idx), padded([0.5, 0.5], real), padded([1.05], real)
    edgecut, part = padded([0], idx), padded([-1] * 4, idx)
    with silenced():
        rc = lib.handle.METIS_PartGraphKway(*map(_ptr, args), None, None, None, _ptr(nparts), _ptr(tpwgts),
                                            _ptr(ubvec), _ptr(options), _ptr(edgecut), _ptr(part))
    return rc == METIS_OK and sorted(part[:4].tolist()) == [0, 0, 1, 1] and bool((part[4:] == 0).all())


def _ptr(a: Optional[np.ndarray]) -> Optional[ctypes.c_void_p]:
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def _options(lib: Metis, seed: int) -> np.ndarray:
    """METIS's defaults, with C numbering and our seed (METIS takes an idx_t: any int is folded)."""
    options = np.zeros(METIS_NOPTIONS, dtype=lib.idx_dtype)
    lib.handle.METIS_SetDefaultOptions(_ptr(options))
    options[METIS_OPTION_SEED] = int(seed) % 2**31
    options[METIS_OPTION_NUMBERING] = 0
    return options


# ---------------------------------------------------------------- checks (pure)

def _check_fits(lib: Metis, what: str, value: int) -> None:
    if value > lib.idx_max:
        raise MetisError(f"{what} is {value}, more than the {lib.idx_bits}-bit idx_t of {lib.path} can hold "
                         f"(max {lib.idx_max}); use a METIS built with IDXTYPEWIDTH=64 (METIS_LIB=...)")


def check_graph(xadj: np.ndarray, adjncy: np.ndarray, vwgt: Optional[np.ndarray],
                adjwgt: Optional[np.ndarray]) -> None:
    """Refuse, with the reason, a CSR that METIS would crash on or silently misread."""
    n = len(xadj) - 1
    if xadj.ndim != 1 or n < 0 or int(xadj[0]) != 0 or int(xadj[-1]) != len(adjncy):
        raise MetisError(f"xadj must be 1-D, start at 0 and end at len(adjncy) = {len(adjncy)}")
    if n and np.any(np.diff(xadj) < 0):
        raise MetisError("xadj must be non-decreasing")
    if len(adjncy) and (int(adjncy.min()) < 0 or int(adjncy.max()) >= n):
        raise MetisError(f"adjncy holds a neighbour outside [0, {n})")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(xadj))
    if np.any(adjncy == rows):
        raise MetisError(f"the graph has self loops (e.g. vertex {int(rows[adjncy == rows][0])})")
    if not np.array_equal(np.bincount(adjncy, minlength=n), np.diff(xadj)):
        raise MetisError("the graph is not symmetric (a vertex's in-degree differs from its out-degree)")
    if vwgt is not None:
        if vwgt.shape[0] != n:
            raise MetisError(f"vwgt has {vwgt.shape[0]} rows for {n} vertices")
        if vwgt.size and int(vwgt.min()) < 0:
            raise MetisError("vwgt has negative vertex weights")
    if adjwgt is not None:
        if adjwgt.shape != adjncy.shape:
            raise MetisError(f"adjwgt has {adjwgt.size} entries for {len(adjncy)} adjacency entries")
        if adjwgt.size and int(adjwgt.min()) <= 0:
            raise MetisError("adjwgt must be positive (METIS rejects zero or negative edge weights)")
        out_w = np.bincount(rows, weights=adjwgt, minlength=n)
        in_w = np.bincount(adjncy, weights=adjwgt, minlength=n)
        if not np.array_equal(out_w, in_w):
            raise MetisError("adjwgt is not symmetric (a vertex's in- and out-weights differ)")


def _ubvec(ubvec: Union[None, float, Sequence[float], np.ndarray], ncon: int) -> np.ndarray:
    """Allowed max/average block weight per constraint: the default, one for all, or one each."""
    if ubvec is None:
        return np.full(ncon, DEFAULT_UBVEC)
    ub = np.asarray(ubvec, dtype=np.float64).reshape(-1)
    if ub.size == 1:
        ub = np.full(ncon, ub[0])
    if ub.size != ncon:
        raise MetisError(f"ubvec has {ub.size} entries for {ncon} constraints")
    if np.any(~np.isfinite(ub)) or np.any(ub < 1.0):
        raise MetisError(f"ubvec must be at least 1.0 per constraint (max/average block weight), got {ub.tolist()}")
    return ub


# ---------------------------------------------------------------- the call

def part_graph(xadj: np.ndarray, adjncy: np.ndarray, nparts: int, vwgt: Optional[np.ndarray] = None,
               adjwgt: Optional[np.ndarray] = None,
               ubvec: Union[None, float, Sequence[float], np.ndarray] = None, seed: int = 0,
               method: str = "kway", lib: Optional[Metis] = None) -> Tuple[int, np.ndarray]:
    """(edge cut, parts as int64) of a symmetric graph without self loops, in C numbering.

    `vwgt` is None (unit weights), (n,) or (n, ncon) for ncon balance constraints; `ubvec`
    is the allowed max/average block weight per constraint (a scalar applies to all;
    default 1.03). `method` is "kway" (METIS_PartGraphKway) or "recursive"
    (METIS_PartGraphRecursive). The cut is METIS's: the weight of the cut undirected edges.
    """
    if method not in METHODS:
        raise MetisError(f"method must be one of {sorted(METHODS)}, got {method!r}")
    if int(nparts) < 1:
        raise MetisError(f"nparts must be at least 1, got {nparts}")
    xadj = np.asarray(xadj, dtype=np.int64)
    adjncy = np.asarray(adjncy, dtype=np.int64)
    vw = None if vwgt is None else np.asarray(vwgt, dtype=np.int64)
    if vw is not None and vw.ndim == 1:
        vw = vw.reshape(-1, 1)
    aw = None if adjwgt is None else np.asarray(adjwgt, dtype=np.int64)
    check_graph(xadj, adjncy, vw, aw)
    ncon = 1 if vw is None else vw.shape[1]
    if ncon < 1:
        raise MetisError("vwgt has no constraint columns")
    ub = _ubvec(ubvec, ncon)
    n = len(xadj) - 1
    if n == 0 or int(nparts) == 1:
        return 0, np.zeros(n, dtype=np.int64)

    lib = lib or load()
    _check_fits(lib, "the number of adjacency entries", len(adjncy))
    _check_fits(lib, "nparts", int(nparts))
    if vw is not None:
        _check_fits(lib, "the largest total vertex weight", int(vw.sum(axis=0).max()))
    if aw is not None:
        _check_fits(lib, "the total edge weight", int(aw.sum()))
    idx, real = lib.idx_dtype, lib.real_dtype

    def scalar(v: int) -> np.ndarray:
        return np.array([v], dtype=idx)

    arrays = [np.ascontiguousarray(a, dtype=idx) for a in (xadj, adjncy)]
    vw_c = None if vw is None else np.ascontiguousarray(vw, dtype=idx).reshape(-1)
    aw_c = None if aw is None else np.ascontiguousarray(aw, dtype=idx)
    ub_c = np.ascontiguousarray(ub, dtype=real)
    nvtxs, ncon_c, nparts_c = scalar(n), scalar(ncon), scalar(int(nparts))
    options, edgecut, part = _options(lib, seed), scalar(0), np.zeros(n, dtype=idx)
    fn = getattr(lib.handle, METHODS[method])
    # tpwgts NULL: equal targets; vsize NULL: communication volume is not the objective.
    rc = fn(_ptr(nvtxs), _ptr(ncon_c), _ptr(arrays[0]), _ptr(arrays[1]), _ptr(vw_c), None, _ptr(aw_c),
            _ptr(nparts_c), None, _ptr(ub_c), _ptr(options), _ptr(edgecut), _ptr(part))
    if rc != METIS_OK:
        raise MetisError(f"{METHODS[method]} returned {rc}: {RETURN_CODES.get(rc, 'unknown error')} "
                         f"(n={n}, ncon={ncon}, nparts={nparts})")
    return int(edgecut[0]), part.astype(np.int64)

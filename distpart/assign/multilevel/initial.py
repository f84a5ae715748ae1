"""The coarsest graph's partition: gathered whole, partitioned by several tries, the best kept.

The coarsest level is small (about 2000 * k vertices), so every rank receives all of it
(one `Allgatherv` per array, in global-ID order, each row's neighbours sorted: the gathered
graph is then the same bytes whatever the number of ranks R). The tries are a fixed list —
METIS k-way (`..metis`, ncon = every balance constraint) with seeds derived from `seed` at
two ubvec tightnesses, plus KaMinPar (`kaminpar.CONTEXT` preset, one thread, in-process) when there is one
constraint and the `kaminpar` package is importable on every rank — dealt round-robin to
the ranks, so R ranks run them in parallel. Each try is scored on every constraint against
`graph.block_caps`: a partition within every cap beats any that is not; then the smaller
relative overload; then the smaller cut (edge weights counted); then the earlier try. The
scores are summed into one table (each row filled by the one rank that ran the try), every
rank picks the same winner, and its owner broadcasts it. Nothing depends on R but who runs
which try, and each try's result depends only on the gathered graph and its seed.

Why tighter ubvec than `imbalance`: METIS treats ubvec as a target it may slightly miss on
heavy coarse vertices, and refinement on the finer levels can only spend slack, not make it.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Tuple

import numpy as np

from ...errors import DistpartError
from ...mpi.exchange import allgather_int64, allreduce_sum
from .graph import LevelGraph, block_caps

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

METIS_TRIES = 8       # at most; fewer on large coarsest graphs (see metis_tries)
MIN_METIS_TRIES = 2
TRY_BUDGET_S = 4.0    # METIS seconds one rank may spend on all tries, by the estimate below
# METIS k-way seconds per try ~ A * entries * ncon * (1 + log2 k) + B * n * k * ncon: a rough fit
# (commit 5543acf), enough to keep the tries within TRY_BUDGET_S.
_A_S, _B_S = 5e-8, 5.5e-7
# ubvec - 1 as a share of imbalance - 1, by try parity: most room first, then tighter.
UB_SHARES = (0.8, 0.5)
# Relative overload in units of 1e-9 of a cap: an integer, so scores sum exactly.
_OVERLOAD_SCALE = 10**9


@dataclass(frozen=True)
class Try:
    """One partitioning attempt of the coarsest graph."""

    index: int
    tool: str      # "metis" or "kaminpar"
    seed: int
    ubvec: Tuple[float, ...]     # METIS's, per constraint


@dataclass
class WholeGraph:
    """The coarsest graph gathered on one rank: CSR in global-ID order, neighbours sorted."""

    xadj: np.ndarray
    adjncy: np.ndarray
    adjwgt: np.ndarray
    vwgt: np.ndarray    # (n, ncon)

    @property
    def n(self) -> int:
        return len(self.xadj) - 1

    def rows(self) -> np.ndarray:
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.xadj))


# ---------------------------------------------------------------- pure

def metis_tries(n: int, entries: int, k: int, ncon: int) -> int:
    """How many METIS seeds to try: as many as fit TRY_BUDGET_S by the time estimate above,
    between MIN_METIS_TRIES and METIS_TRIES. A function of the graph's size only, never of
    measured time or R, so every run of the same graph tries the same seeds."""
    estimate = _A_S * entries * ncon * (1 + np.log2(max(k, 1))) + _B_S * n * k * ncon
    return int(min(METIS_TRIES, max(MIN_METIS_TRIES, np.floor(TRY_BUDGET_S / max(estimate, 1e-9)))))


def plan_tries(ncon: int, imbalance: "float | np.ndarray", seed: int, kaminpar: bool,
               count: int = METIS_TRIES) -> List[Try]:
    """The fixed list of tries (independent of R): `count` METIS seeds from `seed`'s
    SeedSequence, then KaMinPar if it may run (one constraint)."""
    seeds = np.random.SeedSequence(int(seed) % 2**63).generate_state(count + 1) % 2**31
    factors = np.broadcast_to(np.asarray(imbalance, dtype=np.float64), (ncon,))
    eps = [max(float(f) - 1.0, 0.0) for f in factors]
    tries = [Try(i, "metis", int(seeds[i]), tuple(1.0 + e * UB_SHARES[i % len(UB_SHARES)] for e in eps))
             for i in range(count)]
    if kaminpar and ncon == 1:
        tries.append(Try(count, "kaminpar", int(seeds[count]), (float(factors[0]),)))
    return tries


def edge_cut(g: WholeGraph, parts: np.ndarray) -> int:
    """Weight of the undirected edges between blocks."""
    return int(g.adjwgt[parts[g.rows()] != parts[g.adjncy]].sum()) // 2


def score(g: WholeGraph, parts: np.ndarray, k: int, caps: np.ndarray) -> np.ndarray:
    """(infeasible, overload, cut) as int64, smaller is better in that order."""
    weights = np.zeros((k, g.vwgt.shape[1]), dtype=np.int64)
    np.add.at(weights, parts, g.vwgt)
    excess = np.maximum(weights - caps, 0)
    overload = int(np.floor((excess / np.maximum(caps, 1)).sum() * _OVERLOAD_SCALE))
    return np.array([int(excess.any()), overload, edge_cut(g, parts)], dtype=np.int64)


def best_try(table: np.ndarray) -> int:
    """Row of the winner in a (tries, 3) score table: lexicographic, earliest on ties."""
    return int(np.lexsort((np.arange(len(table)), table[:, 2], table[:, 1], table[:, 0]))[0])


def scaled_to_fit(w: np.ndarray, limit: int, floor_one: bool) -> np.ndarray:
    """`w` divided (rounding up where floor_one, so positive stays positive) until every
    column sums to at most `limit`: METIS adds weights in its idx_t. Unchanged if it fits."""
    w = np.asarray(w, dtype=np.int64)
    totals = w.sum(axis=0) if w.size else np.zeros(w.shape[1:], dtype=np.int64)
    factor = np.maximum(-(-totals // limit), 1)
    if np.all(factor == 1):
        return w
    return -(-w // factor) if floor_one else w // factor


# ---------------------------------------------------------------- MPI

def gather_whole(comm: "Intracomm", g: LevelGraph) -> WholeGraph:
    """Every rank's rows on every rank, in global-ID order; rows' neighbours sorted."""
    from mpi4py import MPI

    counts = allgather_int64(comm, np.array([g.nlocal, g.entries]))
    if int(counts[:, 1].sum()) * g.ncon >= 2**31:
        raise DistpartError(f"the coarsest graph has {int(counts[:, 1].sum())} adjacency entries: too many to "
                            f"gather for its initial partition (coarsening stopped too early)")

    def gathered(local: np.ndarray, per_rank: np.ndarray) -> np.ndarray:
        out = np.empty(int(per_rank.sum()), dtype=np.int64)
        displs = np.concatenate([[0], np.cumsum(per_rank)[:-1]])
        comm.Allgatherv(np.ascontiguousarray(local, dtype=np.int64),
                        [out, per_rank.astype(np.int32), displs.astype(np.int32), MPI.INT64_T])
        return out

    deg = gathered(np.diff(g.xadj), counts[:, 0])
    adjncy = gathered(g.adjncy, counts[:, 1])
    adjwgt = gathered(g.adjwgt, counts[:, 1])
    vwgt = gathered(g.vwgt.reshape(-1), counts[:, 0] * g.ncon).reshape(-1, g.ncon)
    xadj = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    # A row's entry order may depend on R, and METIS's result does on it: sort each row
    # (one int64 key, unless the rows already are sorted, as they usually are).
    n = len(deg)
    rows = np.repeat(np.arange(n, dtype=np.int64), deg)
    step = np.diff(adjncy)
    if np.any((step <= 0) & (rows[1:] == rows[:-1])):
        order = np.argsort(rows * n + adjncy, kind="stable")
        adjncy, adjwgt = adjncy[order], adjwgt[order]
    return WholeGraph(xadj, adjncy, adjwgt, vwgt)


def initial_partition(comm: "Intracomm", g: LevelGraph, k: int, imbalance: "float | np.ndarray",
                      seed: int) -> np.ndarray:
    """Block (0..k-1, int64) of each of this rank's vertices of the coarsest graph `g`.
    Collective; the same for any number of ranks (see the module docstring)."""
    from mpi4py import MPI
    from ...mpi.collective import agreed

    rank, size = comm.Get_rank(), comm.Get_size()
    whole = gather_whole(comm, g)
    lo = int(g.vtxdist[rank])
    if whole.n == 0 or k == 1:
        return np.zeros(g.nlocal, dtype=np.int64)
    caps = block_caps(whole.vwgt.sum(axis=0), k, imbalance)
    have_kaminpar = int(allreduce_sum(comm, np.array([int(_kaminpar_importable())]))[0]) == size
    count = metis_tries(whole.n, len(whole.adjncy), k, g.ncon)
    tries = plan_tries(g.ncon, imbalance, seed, have_kaminpar, count)

    table = np.zeros((len(tries), 3), dtype=np.int64)
    mine = {}
    with agreed(comm):
        for t in tries[rank::size]:
            parts = run_try(whole, k, t, caps)
            if parts is None:  # KaMinPar failed: this try drops out, on every rank alike
                table[t.index] = np.iinfo(np.int64).max // size
                continue
            mine[t.index] = parts
            table[t.index] = score(whole, parts, k, caps)
    table = allreduce_sum(comm, table)
    win = best_try(table)
    parts = mine[win] if win in mine else np.empty(whole.n, dtype=np.int64)
    comm.Bcast([parts, MPI.INT64_T], root=win % size)
    return parts[lo:lo + g.nlocal].copy()


# ---------------------------------------------------------------- one try (rank-local)

def run_try(g: WholeGraph, k: int, t: Try, caps: np.ndarray) -> Optional[np.ndarray]:
    """The partition of one try; None if KaMinPar failed (METIS failing raises MetisError)."""
    if t.tool == "metis":
        from .. import metis
        lib = metis.load()
        limit = lib.idx_max // 2
        _, parts = metis.part_graph(g.xadj, g.adjncy, k, vwgt=scaled_to_fit(g.vwgt, limit, False),
                                    adjwgt=scaled_to_fit(g.adjwgt.reshape(-1, 1), limit, True).reshape(-1),
                                    ubvec=list(t.ubvec), seed=t.seed, method="kway", lib=lib)
        return parts
    try:
        return kaminpar_partition(g, k, caps[0], t.seed)
    except Exception:  # noqa: BLE001 - an optional extra try; METIS's tries stand without it
        return None


def _kaminpar_importable() -> bool:
    import importlib.util
    return importlib.util.find_spec("kaminpar") is not None


def kaminpar_partition(g: WholeGraph, k: int, cap: int, seed: int) -> np.ndarray:
    """KaMinPar (one thread) with every block's weight at most `cap`. The binding reads graphs
    from files only, so the graph goes through a ParHIP file in a private temporary folder."""
    import kaminpar

    from ..kaminpar import solver

    with tempfile.TemporaryDirectory(prefix="distpart-initial-") as tmp:
        path = Path(tmp) / "coarsest.parhip"
        write_weighted_parhip(path, g)
        graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, compress=False)
    kaminpar.reseed(int(seed))
    parts = np.asarray(solver(1).compute_partition(graph, [int(cap)] * k), dtype=np.int64)
    if parts.shape != (g.n,) or (g.n and (parts.min() < 0 or parts.max() >= k)):
        raise ValueError("KaMinPar returned an invalid partition")
    return parts


def write_weighted_parhip(path: Path, g: WholeGraph) -> None:
    """ParHIP file (see ../parhip.py) with node and edge weights, every field 64-bit."""
    from ..parhip import HEADER_BYTES, version_word

    n, m = g.n, len(g.adjncy)
    adjacency_at = HEADER_BYTES + (n + 1) * 8
    with open(path, "wb") as f:
        for section in (np.array([version_word(True, True), n, m], dtype="<u8"),
                        (adjacency_at + g.xadj * 8).astype("<u8"), g.adjncy.astype("<u8"),
                        g.vwgt[:, 0].astype("<i8"), g.adjwgt.astype("<i8")):
            f.write(section.tobytes())

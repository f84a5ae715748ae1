"""Step 1's own distributed multilevel method (`--method multilevel`).

`graph` holds one level of the hierarchy and its halo; `coarsen` clusters by size-constrained
label propagation and contracts; `initial` partitions the gathered coarsest graph (METIS k-way
with several constraints, KaMinPar with one); `refine` has Jet and the multi-constraint
rebalancer run at every level on the way back. This module's `multilevel_assignment` drives
them. Design: ../shared/design/step1-multilevel.md.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Optional

import numpy as np

from ...mpi.exchange import DEFAULT_MAX_BYTES, allreduce_sum, lookup
from ...run.heap import reused_heap
from ...run.progress import Progress
from .graph import Halo, LevelGraph, block_caps, block_weights

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ...chunked.metadata import GraphMeta
    from ..assignment import Assignment
    from ..balance import BalanceOptions
    from ..objective import Objective

__all__ = ["multilevel_assignment", "multilevel_partition", "unmet_constraints"]

# Seconds per adjacency entry a rank holds, for the progress ETA of each phase (measured on
# 2-core nodes with 2 ranks; rough: the ETA only has to be the right order).
S_PER_ARC = {"coarsening": 1.0e-6, "refinement": 2.0e-6}
# V-cycles after the first pass on a mesh-like graph (coarsen.mesh_like) unless --vcycles
# says otherwise. Each costs about what the first pass does: torus 2M, 2 ranks, 26 s per
# pass (ParMETIS: 5.5 s). Torus 200k, k = 4, --imbalance 1.05, cut edges after 0-5
# V-cycles: seed 1 2282 2227 2204 2185 2169 2161; seed 3 (1-5) 2286 2271 2269 2259 2245;
# METIS k-way 2049. Graphs with hubs gain nothing from one (RMAT 2M: 5.77% either way, for
# 45 s more).
MESH_VCYCLES = 1


def multilevel_assignment(comm: "Intracomm", meta: "GraphMeta", num_parts: int, balance: "BalanceOptions",
                          seed: int = 0, max_bytes: int = DEFAULT_MAX_BYTES,
                          progress: Optional[Progress] = None, vcycles: Optional[int] = None,
                          objective: "Optional[Objective]" = None) -> "Assignment":
    """The multilevel method on the symmetrized homogeneous graph (the one ParMETIS gets, in
    input order: the numbering is global, so it does not depend on R), split back into
    per-type blocks. Collective. Every balance option becomes a vertex-weight column
    (`balance.vertex_weights`); a constraint that cannot be met is named with its imbalance.
    `vcycles`: see `multilevel_partition`. `objective`: the edge weights (`assign.objective`;
    default the edge cut, every edge 1)."""
    from ...mpi.collective import agreed
    from ..adjacency import build_csr, type_offsets
    from ..assignment import split_by_type
    from ..balance import check_options, usable_constraints, vertex_weights
    from ..objective import check_objective, fetch_edge_weights

    progress = progress or Progress.off()
    with agreed(comm):
        check_options(meta, balance)
        if objective is not None:
            check_objective(meta, objective)
    offsets = type_offsets(meta)
    csr = build_csr(comm, meta, max_bytes, progress, index_dtype=np.int64)
    lo, hi = int(csr.vtxdist[comm.Get_rank()]), int(csr.vtxdist[comm.Get_rank() + 1])
    with agreed(comm):
        vwgt, names = vertex_weights(meta, balance, offsets, lo, hi, csr.in_degree)
    keep, notes = usable_constraints(allreduce_sum(comm, vwgt.sum(axis=0)), names, num_parts,
                                     balance.imbalances(names))
    if comm.Get_rank() == 0:
        for note in notes:
            print(f"assign: constraint {note}", flush=True)
    vwgt, names = vwgt[:, keep], [n for n, k in zip(names, keep) if k]
    if vwgt.shape[1] == 0:  # every column dropped: balance node counts
        vwgt, names = np.ones((hi - lo, 1), dtype=np.int64), ["nodes"]
    if objective is not None and objective.name == "fetch":
        adjwgt = fetch_edge_weights(comm, meta, csr, objective, max_bytes)
    else:
        adjwgt = np.ones(len(csr.adjncy), dtype=np.int64)
    g = LevelGraph(csr.vtxdist, csr.xadj, csr.adjncy, adjwgt, vwgt)
    del adjwgt
    del csr, vwgt
    g.with_totals(comm)
    timings: dict = {}
    factors = balance.imbalances(names)
    parts = multilevel_partition(comm, g, num_parts, factors, seed, max_bytes, progress, timings, vcycles)
    if objective is not None and objective.name == "vol":
        parts = _volume(comm, g, parts, num_parts, factors, seed, max_bytes, progress)
    levels = timings["levels"]
    progress.say(f"multilevel: {levels} level{'' if levels == 1 else 's'}, coarsest {timings['coarse_n']} vertices; coarsening "
                 f"{timings['coarsen_s']:.1f} s, initial partition {timings['initial_s']:.1f} s, refinement "
                 f"{timings['refine_s']:.1f} s" + (f", {timings['cycles'] - 1} V-cycle(s) {timings['vcycle_s']:.1f} s"
                                                   if timings['cycles'] > 1 else ""))
    weights = block_weights(comm, g, parts, num_parts)
    for text in unmet_constraints(weights, g.total, names, num_parts, factors):
        if comm.Get_rank() == 0:
            print(f"assign: WARNING: {text}", flush=True)
        progress.note(text)
    del g
    return split_by_type(comm, meta, num_parts, "multilevel", parts, lo, hi)


def multilevel_partition(comm: "Intracomm", g: LevelGraph, k: int, imbalance: "float | np.ndarray", seed: int = 0,
                         max_bytes: int = DEFAULT_MAX_BYTES, progress: Optional[Progress] = None,
                         timings: Optional[dict] = None, vcycles: Optional[int] = None) -> np.ndarray:
    """Partition of this rank's vertices of `g` into k blocks: coarsen, partition the
    coarsest graph, then at every level on the way back rebalance, refine with Jet and
    project. Then `vcycles` times (default MESH_VCYCLES on a mesh-like graph, see
    `coarsen.mesh_like`, else 0): coarsen again with every cluster inside one block, and
    refine that hierarchy from the partition carried to its coarsest level (a V-cycle: Jet
    moves the new clusters along the boundaries; Jet keeps the best partition it sees, so a
    V-cycle never makes it worse).
    `imbalance`: the allowed max/average, one for every constraint or one per column.
    Collective; the result depends on (g, k, imbalance, seed), not on R."""
    from .coarsen import coarsen, coarsen_within, mesh_like
    from .initial import initial_partition

    progress = progress or Progress.off()
    timings = {} if timings is None else timings
    arcs = int(allreduce_sum(comm, np.array([len(g.adjncy)]))[0]) / comm.Get_size()
    t0 = time.perf_counter()
    with progress.opaque("coarsening", S_PER_ARC["coarsening"] * arcs):
        levels, maps = coarsen(comm, g, k, seed, progress=progress)
    t1 = time.perf_counter()
    coarse_n = levels[-1].n
    with progress.opaque("initial partition", 2.0):
        parts = initial_partition(comm, levels[-1], k, imbalance, seed)
    t2 = time.perf_counter()
    caps = block_caps(g.total, k, imbalance)
    nlevels = len(levels)
    with progress.opaque("refinement", S_PER_ARC["refinement"] * arcs):
        parts = uncoarsen(comm, levels, maps, parts, k, caps, seed, max_bytes)
    del levels, maps
    t3 = time.perf_counter()
    if vcycles is None:
        vcycles = MESH_VCYCLES if mesh_like(comm, g) else 0
    cycles = 1 + max(int(vcycles), 0)
    for cycle in range(1, cycles):
        with progress.opaque(f"V-cycle {cycle}", (S_PER_ARC["coarsening"] + S_PER_ARC["refinement"]) * arcs):
            levels, maps, coarse_parts = coarsen_within(comm, g, k, seed, parts, cycle, progress=progress)
            parts = uncoarsen(comm, levels, maps, coarse_parts, k, caps, seed, max_bytes)
            del levels, maps
    t4 = time.perf_counter()
    timings.update(levels=nlevels, coarse_n=coarse_n, coarsen_s=t1 - t0, initial_s=t2 - t1, refine_s=t3 - t2,
                   cycles=cycles, vcycle_s=t4 - t3)
    return parts


def uncoarsen(comm: "Intracomm", levels: List[Optional[LevelGraph]], maps: List[Optional[np.ndarray]],
              parts: np.ndarray, k: int, caps: np.ndarray, seed: int, max_bytes: int) -> np.ndarray:
    """From the blocks of the coarsest level's local vertices to those of the finest: at
    every level rebalance, refine with Jet, project. Frees each level (sets it to None in
    `levels` and `maps`) once projected. Collective."""
    from .refine.balancer import rebalance
    from .refine.jet import jet

    # Jet and the rebalancer allocate and free arrays of the level's size every iteration:
    # served from a reused heap they cost no page faults (run.heap; so does the clustering
    # inside `coarsen`, but not contraction: it holds the run's peak).
    with reused_heap():
        for i in range(len(levels) - 1, -1, -1):
            level = levels[i]
            halo = Halo.build(comm, level, max_bytes)
            parts = rebalance(comm, level, halo, parts, k, caps, seed)
            parts = jet(comm, level, halo, parts, k, caps, seed, finest=i == 0)
            del halo
            if i > 0:
                # Each finer vertex takes its coarse vertex's block.
                parts = lookup(comm, maps[i - 1], level.vtxdist, parts, max_bytes)
                levels[i] = maps[i - 1] = None  # a level is not needed once projected
    return parts


def _volume(comm: "Intracomm", g: LevelGraph, parts: np.ndarray, k: int, imbalance: "float | np.ndarray",
            seed: int, max_bytes: int, progress: Progress) -> np.ndarray:
    """`--objective vol`: the cut partition refined for total communication volume."""
    from .refine.volume import volume_refine

    arcs = int(allreduce_sum(comm, np.array([len(g.adjncy)]))[0]) / comm.Get_size()
    with progress.opaque("volume refinement", S_PER_ARC["refinement"] * arcs), reused_heap():
        halo = Halo.build(comm, g, max_bytes)
        return volume_refine(comm, g, halo, parts, k, block_caps(g.total, k, imbalance), seed)


def unmet_constraints(weights: np.ndarray, total: np.ndarray, names: List[str], k: int,
                      imbalance: "float | np.ndarray") -> List[str]:
    """One message per constraint whose heaviest block exceeds its cap: which one and by how
    much (imbalance = max / average block weight, as METIS and DGL define it)."""
    caps = block_caps(total, k, imbalance)
    factors = np.broadcast_to(np.asarray(imbalance, dtype=np.float64), (len(names),))
    out = []
    for j, name in enumerate(names):
        heaviest = int(weights[:, j].max())
        if heaviest > caps[j]:
            ratio = heaviest / (total[j] / k)
            out.append(f"constraint {name} could not be met: imbalance {ratio:.3f} > {factors[j]:g} allowed "
                       f"(heaviest partition {heaviest}, cap {int(caps[j])}, "
                       f"{heaviest - int(caps[j])} over)")
    return out

"""The multilevel method's driver: `partition` (the `step1` interface) weighs the edges by
the objective and runs `multilevel_partition`: coarsen, partition the coarsest graph, then
at every level on the way back rebalance, refine with Jet and project (`uncoarsen`);
V-cycles after that on mesh-like graphs.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Optional

import numpy as np

from ...mpi.exchange import DEFAULT_MAX_BYTES, lookup
from ...run.heap import reused_heap
from ...run.progress import Progress
from ..step1 import Setup
from .graph import Halo, LevelGraph, block_caps, block_weights, unit_weights

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ...chunked.metadata import GraphMeta
    from ..balance import BalanceOptions
    from ..objective import Objective
    from ..step1 import Step1Graph

ALGO_NAME = "multilevel"
# Seconds per adjacency entry a rank holds, for the progress ETA of each phase: rough, the ETA
# only has to be the right order. Balancing several columns (the default set) costs several
# times more, most of it the rebalancer on the finest level (results/scale_200m_default.json).
S_PER_ARC = {"coarsening": 1.0e-6, "refinement": 2.0e-6}
S_PER_ARC_COLUMNS = {"coarsening": 3.0e-6, "refinement": 1.0e-5}
# V-cycles after the first pass on a mesh-like graph (`coarsening.mesh_like`) unless --vcycles
# says otherwise: one pays on meshes, graphs with hubs gain nothing (chosen by
# benchmarks/bench_assign.py, see benchmarks/results/step1_history.md).
MESH_VCYCLES = 1


def setup(meta: "GraphMeta", balance: "BalanceOptions", rank: int, vcycles: Optional[int] = None,
          objective: "Optional[Objective]" = None) -> "Setup":
    """Every balance option a vertex-weight column; `objective` checked against the graph.
    Rows in blocks cut by load: the result does not depend on the blocks, and with equal
    blocks the ranks holding a graph's hubs would hold most of its edges."""
    from ..objective import check_objective
    if objective is not None:
        check_objective(meta, objective)
    return Setup(vertex_blocks="load", context=(vcycles, objective))


def partition(comm: "Intracomm", graph: "Step1Graph", vwgt: np.ndarray, k: int, imbalance: np.ndarray,
              seed: int, setup: "Setup", max_bytes: int = DEFAULT_MAX_BYTES,
              progress: Optional[Progress] = None) -> np.ndarray:
    """The multilevel method on the graph `step1` built (in input order: the numbering is
    global, so the result does not depend on R). A constraint that cannot be met is named
    with its imbalance. `vcycles`: see `multilevel_partition`. `objective`: the edge weights
    (`assign.objective`; default the edge cut, every edge 1). Collective."""
    from ..objective import fetch_edge_weights

    progress = progress or Progress.off()
    vcycles, objective = setup.context
    csr, graph.csr = graph.csr, None
    if objective is not None and objective.name == "fetch":
        adjwgt = fetch_edge_weights(comm, graph.meta, csr, objective, max_bytes)
    else:
        adjwgt = unit_weights(len(csr.adjncy))
    g = LevelGraph(csr.vtxdist, csr.xadj, csr.adjncy, adjwgt, vwgt)
    del adjwgt, csr, vwgt
    g.with_totals(comm)
    timings: dict = {}
    parts = multilevel_partition(comm, g, k, imbalance, seed, max_bytes, progress, timings, vcycles)
    if objective is not None and objective.name == "vol":
        parts = _volume(comm, g, parts, k, imbalance, seed, max_bytes, progress)
    levels = timings["levels"]
    progress.say(f"multilevel: {levels} level{'' if levels == 1 else 's'}, coarsest {timings['coarse_n']} vertices; coarsening "
                 f"{timings['coarsen_s']:.1f} s, initial partition {timings['initial_s']:.1f} s, refinement "
                 f"{timings['refine_s']:.1f} s" + (f", {timings['cycles'] - 1} V-cycle(s) {timings['vcycle_s']:.1f} s"
                                                   if timings['cycles'] > 1 else ""))
    weights = block_weights(comm, g, parts, k)
    for text in unmet_constraints(weights, g.total, graph.names, k, imbalance):
        if comm.Get_rank() == 0:
            print(f"assign: WARNING: {text}", flush=True)
        progress.note(text)
    return parts


def multilevel_partition(comm: "Intracomm", g: LevelGraph, k: int, imbalance: "float | np.ndarray", seed: int = 0,
                         max_bytes: int = DEFAULT_MAX_BYTES, progress: Optional[Progress] = None,
                         timings: Optional[dict] = None, vcycles: Optional[int] = None) -> np.ndarray:
    """Partition of this rank's vertices of `g` into k blocks: coarsen, partition the
    coarsest graph, then at every level on the way back rebalance, refine with Jet and
    project. Then `vcycles` times (default MESH_VCYCLES on a mesh-like graph, see
    `coarsening.mesh_like`, else 0): coarsen again with every cluster inside one block, and
    refine that hierarchy from the partition carried to its coarsest level (a V-cycle: Jet
    moves the new clusters along the boundaries; Jet keeps the best partition it sees, so a
    V-cycle never makes it worse).
    `imbalance`: the allowed max/average, one for every constraint or one per column.
    Collective; the result depends on (g, k, imbalance, seed), not on R."""
    from .coarsening import coarsen, coarsen_within, mesh_like
    from .initial import initial_partition

    progress = progress or Progress.off()
    timings = {} if timings is None else timings
    arcs = g.global_entries(comm) / comm.Get_size()
    rate = S_PER_ARC_COLUMNS if g.ncon > 1 else S_PER_ARC
    t0 = time.perf_counter()
    with progress.opaque("coarsening", rate["coarsening"] * arcs):
        levels, maps = coarsen(comm, g, k, seed, progress=progress)
    t1 = time.perf_counter()
    coarse_n = levels[-1].n
    with progress.opaque("initial partition", 2.0):
        parts = initial_partition(comm, levels[-1], k, imbalance, seed)
    t2 = time.perf_counter()
    caps = block_caps(g.total, k, imbalance)
    nlevels = len(levels)
    with progress.opaque("refinement", rate["refinement"] * arcs):
        parts = uncoarsen(comm, levels, maps, parts, k, caps, seed, max_bytes)
    del levels, maps
    t3 = time.perf_counter()
    if vcycles is None:
        vcycles = MESH_VCYCLES if mesh_like(comm, g) else 0
    cycles = 1 + max(int(vcycles), 0)
    for cycle in range(1, cycles):
        with progress.opaque(f"V-cycle {cycle}", (rate["coarsening"] + rate["refinement"]) * arcs):
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
    from .refinement.balancer import rebalance
    from .refinement.jet import jet

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
    from .refinement.volume import volume_refine

    with progress.opaque("volume refinement", S_PER_ARC["refinement"] * g.global_entries(comm) / comm.Get_size()), \
            reused_heap():
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

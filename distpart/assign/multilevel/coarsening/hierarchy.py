"""The hierarchy: cluster and contract level after level until the graph is small (`coarsen`),
or with every cluster inside one block of a partition, for a V-cycle (`coarsen_within`).

Mesh-like levels (no hubs: `graph.HUB_SKEW`; meshes, road networks) are clustered in pairs:
no cluster weighs more than PAIR_FACTOR times the level's heaviest vertex, so a level about
halves the graph, as METIS's matching does (label propagation's large clusters on a mesh are
ragged blobs whose boundaries the cut must then follow). On graphs with hubs pairs barely
shrink the edges (a hub takes one leaf per level) and the cut gains nothing, so there the
size cap alone bounds clusters, as in KaHIP's presets for social networks.

The hierarchy is the same on any number of ranks (mpi_tests/test_mpi_ml_coarsen.py checks it
on 1, 2 and 4). Design: ../shared/design/step1-multilevel.md, section "Coarsening".
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Optional, Tuple

import numpy as np

from ....mpi.exchange import allreduce_max, exchange
from ....run.heap import reused_heap
from ..graph import HUB_SKEW, LevelGraph
from .clustering import cluster, cluster_cap
from .contraction import contract

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ....run.progress import Progress

TARGET_PER_BLOCK = 2000     # stop at about 2000 * k coarse vertices (design note)
MIN_SHRINK_PERCENT = 5      # ... or when a level removes fewer than 5% of the vertices
MAX_LEVELS = 64
PAIR_FACTOR = 2             # mesh-like levels: clusters of at most twice the heaviest vertex


def coarsen(comm: "Intracomm", g: LevelGraph, k: int, seed: int,
            progress: "Optional[Progress]" = None, target: Optional[int] = None
            ) -> Tuple[List[LevelGraph], List[np.ndarray]]:
    """Cluster and contract until about `target` (default 2000 * k) vertices remain or a
    level shrinks by less than 5%. Returns (levels, maps): levels[0] is `g`; maps[i] gives
    the global ID in levels[i + 1] of each local vertex of levels[i]. Collective.

    The cluster cap depends on k only (CLUSTER_EPS / k of the total, a tenth of a block),
    not on --imbalance: the partition's slack does not limit how coarse a cluster may be, the
    initial partitioner and the rebalancer handle it. Mesh-like levels are clustered in pairs
    (module docstring)."""
    levels, maps, _ = _hierarchy(comm, g, k, seed, progress, target, None, 0)
    return levels, maps


def coarsen_within(comm: "Intracomm", g: LevelGraph, k: int, seed: int, parts: np.ndarray, cycle: int,
                   progress: "Optional[Progress]" = None, target: Optional[int] = None
                   ) -> Tuple[List[LevelGraph], List[np.ndarray], np.ndarray]:
    """`coarsen` with every cluster inside one block of `parts` (this rank's vertices' blocks):
    the partition carries over to every level unchanged, cut included. Returns (levels, maps,
    the blocks of the coarsest level's local vertices). `cycle` > 0 numbers the V-cycle, so
    its label propagation draws other batches than the first hierarchy's. Collective."""
    return _hierarchy(comm, g, k, seed, progress, target, np.asarray(parts, dtype=np.int64), cycle)


def mesh_like(comm: "Intracomm", g: LevelGraph) -> bool:
    """Whether `g` has no hubs: its top degree (neighbours, not edge weight) is at most
    HUB_SKEW times its average degree. Collective."""
    arcs = g.global_entries(comm)
    top = int(allreduce_max(comm, np.array([np.diff(g.xadj).max(initial=0)]))[0])
    return top * g.n <= HUB_SKEW * arcs


def heaviest(comm: "Intracomm", g: LevelGraph) -> np.ndarray:
    """(ncon,) the largest vertex weight of `g` in each constraint. Collective."""
    return allreduce_max(comm, g.vwgt.max(axis=0) if g.nlocal else np.zeros(g.ncon, dtype=np.int64))


def carry_blocks(comm: "Intracomm", coarse: LevelGraph, fine_to_coarse: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Blocks of the coarse level's local vertices, from the fine vertices' blocks (every
    cluster lies in one block). Collective."""
    (ids, got), _ = exchange(comm, coarse.owner(fine_to_coarse), [fine_to_coarse, blocks])
    out = np.zeros(coarse.nlocal, dtype=np.int64)
    out[ids - coarse.first(comm)] = got
    return out


def _hierarchy(comm: "Intracomm", g: LevelGraph, k: int, seed: int, progress: "Optional[Progress]",
               target: Optional[int], blocks: Optional[np.ndarray], cycle: int
               ) -> Tuple[List[LevelGraph], List[np.ndarray], Optional[np.ndarray]]:
    if g.total is None:
        g.with_totals(comm)
    target = TARGET_PER_BLOCK * k if target is None else int(target)
    cap = cluster_cap(g.total, k, heaviest(comm, g))
    levels, maps = [g], []
    pairs = True   # until a level is dense; the levels above it are clustered by the cap alone
    while levels[-1].n > target and len(levels) < MAX_LEVELS:
        fine = levels[-1]
        t0 = time.perf_counter()
        pairs = pairs and mesh_like(comm, fine)
        level_cap = cap
        if pairs:
            level_cap = np.minimum(cap, PAIR_FACTOR * heaviest(comm, fine))
        halo = fine.keep_halo(comm)   # kept for refinement; the level drops its adjncy
        with reused_heap():   # label propagation's rounds; not contraction (see run.heap)
            labels = cluster(comm, fine, halo, level_cap, seed, cycle * MAX_LEVELS + len(levels) - 1,
                             stop_at=target, blocks=blocks)
        coarse, fine_to_coarse = contract(comm, fine, halo, labels)
        del halo, labels
        if coarse.n >= fine.n:
            break
        if blocks is not None:
            blocks = carry_blocks(comm, coarse, fine_to_coarse, blocks)
        levels.append(coarse)
        maps.append(fine_to_coarse)
        if progress is not None:
            m = coarse.global_entries(comm)
            progress.say(f"coarsening level {len(levels) - 1}{'' if cycle == 0 else f' (V-cycle {cycle})'}: "
                         f"{fine.n:,} -> {coarse.n:,} vertices, {m // 2:,} edges"
                         f"{' in pairs' if pairs else ''} ({time.perf_counter() - t0:.1f} s)")
        if coarse.n * 100 > (100 - MIN_SHRINK_PERCENT) * fine.n:
            break
    return levels, maps, blocks

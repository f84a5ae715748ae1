"""What Step 1 minimises besides balance: the edge weights of the graph it partitions.

`--objective cut` (the default) weighs every edge 1: the partitioner minimises the edges
whose endpoints land on different machines. `--objective fetch` weighs each edge by what it
costs a DistDGL trainer per epoch if its endpoints are split: the expected number of times
DGL's neighbour sampler takes it, from the training masks (`--train-mask`), the fanouts
(`--fanouts`, DGL's order: the last one is sampled from the seeds) and the in-degrees, with a
node's rows saturating at one per mini-batch (DGL deduplicates a batch's input nodes, so a
hub costs a trainer at most one row per batch). ../shared/design/training-objective.md has
the measured facts this models. `--objective vol` keeps the cut's unit weights and then
refines the total communication volume on the finest level (multilevel/refinement/volume.py).

The model, per epoch, with B mini-batches in all:
* layer seeds: the training nodes, each once; a seed v takes each in-neighbour over edge
  type e with probability min(1, f / indeg_e(v)), so edge u->v is sampled seeds(v) times
  that probability;
* the next layer's seeds are the previous seeds and what they sampled, counted in batches:
  a node expected in x samples appears in about B (1 - exp(-x / B)) batches;
* an edge's weight is its expected samples over all layers, scaled per source node u so
  that u's edges together cost what u costs: the batches u appears in, B (1 - exp(-l / B))
  for l expected samples of u.
The partitioner gets `1 + FETCH_SCALE * weight` per direction (the 1 keeps the cut as the
tie-break among edges the sampler never takes), summed over the two directions.

Every sum is an integer sum over fixed-point values (units of 2^-FIXED_BITS samples) and
every non-linear step is a function of one node's exact sum, so the weights, like the rest
of Step 1, do not depend on the number of ranks. The in-edges are held by their
destination's rank while the weights are computed (one pass over the input's edges).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Sequence, Tuple

import numpy as np

from ..chunked.blocks import edge_pieces
from ..arrays import owner_of
from ..errors import InputError
from ..mpi.collective import agreed
from ..mpi.exchange import DEFAULT_MAX_BYTES, allreduce_sum, exchange, lookup
from .balance import mask_column

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

    from ..chunked.metadata import GraphMeta
    from .adjacency import DistributedCSR

OBJECTIVES = ("cut", "fetch", "vol")
# DGL's distributed GraphSAGE example samples 25 then 10 neighbours (--fan_out 10,25) in
# batches of 1000 seeds: what a user trains with when they name nothing else.
DEFAULT_FANOUTS = (10, 25)
DEFAULT_BATCH_SIZE = 1000
FIXED_BITS = 20
# Weight of an edge sampled once per epoch over an edge never sampled (which weighs 1).
FETCH_SCALE = 16


@dataclass(frozen=True)
class Objective:
    """`--objective` and what `fetch` models: training masks ("NTYPE/FEAT"), fanouts in
    DGL's order, seeds per mini-batch."""

    name: str = "cut"
    train_masks: Tuple[str, ...] = ()
    fanouts: Tuple[int, ...] = DEFAULT_FANOUTS
    batch_size: int = DEFAULT_BATCH_SIZE


def check_objective(meta: "GraphMeta", objective: Objective) -> None:
    """Refuse, before any work, an objective the input cannot feed."""
    if objective.name not in OBJECTIVES:
        raise InputError(None, f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective.name!r}")
    if objective.name == "fetch" and not objective.train_masks:
        raise InputError(None, "--objective fetch needs the training nodes: name their mask with "
                               "--train-mask NTYPE/FEAT (repeatable)")
    if objective.batch_size < 1:
        raise InputError(None, f"--batch-size must be at least 1, got {objective.batch_size}")
    for spec in objective.train_masks:
        ntype, _, feat = spec.partition("/")
        if ntype not in meta.node_types or feat not in meta.node_features(ntype):
            raise InputError(None, f"--train-mask {spec}: no node feature '{feat}' of node type '{ntype}'")


def _train_seeds(meta: "GraphMeta", masks: Sequence[str], offsets: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """1 for each of vertices [lo, hi) that a training mask marks, else 0 (int64)."""
    seeds = np.zeros(hi - lo, dtype=np.int64)
    for spec in masks:
        seeds |= mask_column(meta, spec, offsets, lo, hi, "--train-mask")
    return seeds


# Edges per step of the weight computation: each step's exchange holds a few arrays of this
# length, so memory stays that of the held in-edges plus a bounded piece.
STEP_EDGES = 1 << 20


@dataclass
class _InEdges:
    """The input edges of one edge type whose destination this rank owns: source as a global
    ID, destination as a local index (int32 where it fits), and the in-degree of this type."""

    src: np.ndarray
    dst: np.ndarray
    indeg: np.ndarray

    def steps(self) -> "List[slice]":
        return [slice(a, a + STEP_EDGES) for a in range(0, len(self.src), STEP_EDGES)] or [slice(0, 0)]


def _in_edges(comm: "Intracomm", meta: "GraphMeta", offsets: np.ndarray, vtxdist: np.ndarray,
              max_bytes: int) -> List[_InEdges]:
    """Every input edge u->v at v's rank, one `_InEdges` per edge type."""
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    local = np.int32 if hi - lo < 2**31 else np.int64
    out = []
    for etype in meta.edge_types:
        srcs: List[np.ndarray] = []
        dsts: List[np.ndarray] = []
        for piece in edge_pieces(comm, meta, etype, max(1 << 10, max_bytes // 64)):
            u = piece.src + offsets[meta.ntype_id(etype.src)]
            v = piece.dst + offsets[meta.ntype_id(etype.dst)]
            (u, v), _ = exchange(comm, owner_of(vtxdist, v), [u, v], max_bytes)
            srcs.append(u)
            dsts.append((v - lo).astype(local))
        dst = np.concatenate(dsts)
        out.append(_InEdges(np.concatenate(srcs), dst, np.bincount(dst, minlength=hi - lo)))
    return out


def _int_bincount(index: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """An exact int64 bincount (numpy's weighted one sums in float64, which depends on the order)."""
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, index, weights)
    return out


def _batches(total: np.ndarray, batches_fp: float) -> np.ndarray:
    """Batches a node expected in `total` samples (fixed point) appears in: B (1 - exp(-x/B))."""
    return np.floor(batches_fp * -np.expm1(-total / batches_fp)).astype(np.int64)


def fetch_edge_weights(comm: "Intracomm", meta: "GraphMeta", csr: "DistributedCSR", objective: Objective,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """Weights of `csr`'s adjacency entries (aligned with `csr.adjncy`, int64, at least 1)
    under `--objective fetch` (see the module docstring). `csr` is in input order
    (`build_csr` without a numbering). Collective."""
    from .adjacency import type_offsets

    offsets = type_offsets(meta)
    vtxdist = csr.vtxdist
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    with agreed(comm):
        seeds = _train_seeds(meta, objective.train_masks, offsets, lo, hi) << FIXED_BITS
    trainers_nodes = int(allreduce_sum(comm, np.array([int(seeds.sum() >> FIXED_BITS)]))[0])
    batches_fp = float(max(1, -(-trainers_nodes // objective.batch_size)) << FIXED_BITS)
    edges = _in_edges(comm, meta, offsets, vtxdist, max_bytes)
    # Per layer, from the seeds: (layer seeds, fanout); an edge's samples are recomputed from
    # these whenever needed, so no per-edge value is kept.
    layers = []
    for fanout in reversed(objective.fanouts):
        layers.append((seeds, fanout))
        incoming = _sum_at_sources(comm, edges, lambda e, at: _sampled(e, at, [(seeds, fanout)]), vtxdist,
                                   max_bytes)
        seeds = _batches(seeds + incoming, batches_fp)
    expected = _sum_at_sources(comm, edges, lambda e, at: _sampled(e, at, layers), vtxdist, max_bytes)
    # Per source node: what its rows cost (batches it appears in) over what its edges add up to.
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(expected > 0, _batches(expected, batches_fp) / expected, 0.0)
    return _symmetric_weights(comm, csr, edges, layers, share, max_bytes)


def _sampled(e: _InEdges, at: slice, layers: "List[Tuple[np.ndarray, int]]") -> np.ndarray:
    """Expected samples per epoch (fixed point) of edges `at` of `e` over `layers`."""
    dst = e.dst[at]
    total = np.zeros(len(dst), dtype=np.int64)
    for seeds, fanout in layers:
        total += np.floor(seeds[dst] * np.minimum(1.0, fanout / e.indeg[dst])).astype(np.int64)
    return total


def _sum_at_sources(comm: "Intracomm", edges: List[_InEdges], values, vtxdist: np.ndarray,
                    max_bytes: int) -> np.ndarray:
    """For each of this rank's vertices, the int64 sum of `values(e, at)` over the edges it is
    the source of. Collective: every rank takes the same number of steps."""
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    out = np.zeros(hi - lo, dtype=np.int64)
    for e, at in _all_steps(comm, edges):
        src = e.src[at]
        (u, w), _ = exchange(comm, owner_of(vtxdist, src), [src, values(e, at)], max_bytes)
        np.add.at(out, u - lo, w)
    return out


def _all_steps(comm: "Intracomm", edges: List[_InEdges]):
    """(edge type's edges, slice) for every step, the same count on every rank (empty slices
    where a rank has fewer), so each step may hold a collective."""
    from ..mpi.exchange import allreduce_max
    steps = [(e, at) for e in edges for at in e.steps()]
    count = int(allreduce_max(comm, np.array([len(steps)]))[0])
    empty = (edges[0], slice(0, 0))
    return steps + [empty] * (count - len(steps))


def _symmetric_weights(comm: "Intracomm", csr: "DistributedCSR", edges: List[_InEdges],
                       layers: "List[Tuple[np.ndarray, int]]", share: np.ndarray, max_bytes: int) -> np.ndarray:
    """Each directed edge's weight, 1 + FETCH_SCALE x its samples x its source's share, added
    to both of its adjacency entries (row u column v, row v column u). Collective."""
    vtxdist = csr.vtxdist
    lo, hi = int(vtxdist[comm.Get_rank()]), int(vtxdist[comm.Get_rank() + 1])
    n = int(vtxdist[-1])
    xadj = np.asarray(csr.xadj, dtype=np.int64)
    keys = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(xadj)) * n + np.asarray(csr.adjncy, dtype=np.int64)
    weights = np.zeros(len(keys), dtype=np.int64)
    for e, at in _all_steps(comm, edges):
        u, v = e.src[at], e.dst[at].astype(np.int64) + lo
        w = 1 + np.floor(FETCH_SCALE * _sampled(e, at, layers) * lookup(comm, u, vtxdist, share, max_bytes)
                         / float(1 << FIXED_BITS)).astype(np.int64)
        loop = u == v
        rows = np.concatenate([u[~loop], v[~loop]])
        (r, c, w), _ = exchange(comm, owner_of(vtxdist, rows),
                                [rows, np.concatenate([v[~loop], u[~loop]]), np.concatenate([w[~loop], w[~loop]])],
                                max_bytes)
        wanted = r * n + c
        order = np.argsort(wanted)   # sorted queries walk `keys` in order: far fewer cache misses
        np.add.at(weights, np.searchsorted(keys, wanted[order]), w[order])
    return weights

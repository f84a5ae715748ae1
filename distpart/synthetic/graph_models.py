"""Edge models of synthetic graphs: which (src, dst) pairs a chunk of an edge type holds.

A model is a pure function of (seed, edge type, the chunk's first edge index, its size), so
`synthetic.write_chunked_graph` generates chunks one at a time, in bounded memory, and any
chunk can be regenerated alone. Models for partitioning benchmarks:

* `uniform`: endpoints uniform at random; with `community=k` about 90% of edges stay inside
  the source's community (an easy graph with a clear best partition);
* `rmat`: Graph500's recursive-matrix power-law model (a=0.57, b=0.19, c=0.19): a few hubs
  with huge degree, many degree-0 and degree-1 nodes, and no locality in the IDs, like web
  and social graphs;
* `torus`: every node joined to its next node and to the node one row down on a grid
  wrapped into a torus, 2 edges per node (a mesh: small separators exist);
* `chung_lu`: Chung-Lu power-law degrees with planted communities: both endpoints drawn in
  proportion to a power-law weight, the destination inside the source's community except
  for a `mixing` fraction of edges (a power-law graph whose best partitions follow the
  communities, unlike RMAT's).

RMAT and torus node IDs are relabelled by a keyed permutation of each node type, so IDs
carry no locality (as in real data, and as a partitioner must expect), and a hub of a node
type is the same node in every edge type that touches that type.
"""
from __future__ import annotations

import hashlib
import math
from typing import Callable, Optional, Tuple

import numpy as np

from ..arrays import keyed_permutation

# (rng, canonical "src:rel:dst", n_src, n_dst, first edge index, count, seed) -> (src, dst)
EdgeModel = Callable[[np.random.Generator, str, int, int, int, int, int], Tuple[np.ndarray, np.ndarray]]

# Probability that an edge stays inside its source's community in the `uniform` model.
INTRA_COMMUNITY_PROB = 0.9
GRAPH500 = (0.57, 0.19, 0.19)


def stable_key(*parts: object) -> int:
    """A 64-bit key from text (Python's hash() of a str changes between processes)."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def relabel(ids: np.ndarray, n: int, node_type: str, seed: int) -> np.ndarray:
    """The node type's fixed random relabelling of [0, n)."""
    return keyed_permutation(ids, n, stable_key("relabel", seed, node_type))


def uniform(community: Optional[int] = None) -> EdgeModel:
    def model(rng: np.random.Generator, canonical: str, n_src: int, n_dst: int, first: int,
              count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
        src = rng.integers(0, n_src, size=count, dtype=np.int64)
        dst = rng.integers(0, n_dst, size=count, dtype=np.int64)
        if community is None or count == 0:
            return src, dst
        k = community
        # Node i of a type with n nodes is in community i*k//n, so community c of the
        # destination type is the ID range [ceil(c*n/k), ceil((c+1)*n/k)).
        c = src * k // n_src
        lo = (c * n_dst + k - 1) // k
        hi = ((c + 1) * n_dst + k - 1) // k
        # Empty ranges (fewer dst nodes than communities) keep their uniform dst.
        local = (rng.random(count) < INTRA_COMMUNITY_PROB) & (hi > lo)
        offset = (rng.random(count) * (hi - lo)).astype(np.int64)
        dst[local] = lo[local] + offset[local]
        return src, dst
    return model


def rmat_pairs(rng: np.random.Generator, n_src: int, n_dst: int, count: int,
               probabilities: Tuple[float, float, float] = GRAPH500) -> Tuple[np.ndarray, np.ndarray]:
    """`count` RMAT pairs in [0, n_src) x [0, n_dst), before relabelling (hubs have low IDs).

    One level per bit of the larger side: each edge picks a quadrant of the remaining matrix
    with probabilities (a, b, c, 1-a-b-c). The 2**scale square is then scaled to the
    rectangle, which keeps the skew of each side.
    """
    a, b, c = probabilities
    scale = max(1, (max(n_src, n_dst) - 1).bit_length())
    row = np.zeros(count, dtype=np.int64)
    col = np.zeros(count, dtype=np.int64)
    for _ in range(scale):
        r = rng.random(count)
        lower = r >= a + b                       # quadrants c and d
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)   # quadrants b and d
        row = (row << 1) | lower
        col = (col << 1) | right
    unit = 1.0 / float(1 << scale)
    src = np.minimum((row * unit * n_src).astype(np.int64), n_src - 1)
    dst = np.minimum((col * unit * n_dst).astype(np.int64), n_dst - 1)
    return src, dst


def rmat(probabilities: Tuple[float, float, float] = GRAPH500) -> EdgeModel:
    def model(rng: np.random.Generator, canonical: str, n_src: int, n_dst: int, first: int,
              count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
        src_type, _, dst_type = canonical.split(":")
        src, dst = rmat_pairs(rng, n_src, n_dst, count, probabilities)
        return relabel(src, n_src, src_type, seed), relabel(dst, n_dst, dst_type, seed)
    return model


def torus(rng: np.random.Generator, canonical: str, n_src: int, n_dst: int, first: int,
          count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Edge e joins node (e // 2) mod n to its next node (e even) or to the node one row of
    ceil(sqrt(n)) nodes further (e odd), wrapping around; needs src type == dst type."""
    src_type, _, dst_type = canonical.split(":")
    if src_type != dst_type:
        raise ValueError(f"torus edges need one node type, got {canonical}")
    n = n_src
    width = max(1, math.isqrt(n - 1) + 1)
    e = np.arange(first, first + count, dtype=np.int64)
    u = (e // 2) % n
    v = (u + np.where(e % 2 == 0, 1, width)) % n
    return relabel(u, n, src_type, seed), relabel(v, n, src_type, seed)


def chung_lu_weights(n: int, communities: int, exponent: float = 2.5) -> "Tuple[np.ndarray, np.ndarray]":
    """(expected-degree weight, community) of nodes [0, n) before relabelling.

    Weight (i + 1) ** (-1 / (exponent - 1)) gives a degree distribution with tail exponent
    `exponent`; node i is in community i mod `communities`, so every community gets hubs
    and leaves alike."""
    i = np.arange(n, dtype=np.int64)
    return (i + 1.0) ** (-1.0 / (exponent - 1.0)), i % max(1, communities)


def chung_lu_communities(n: int, communities: int, node_type: str, seed: int) -> np.ndarray:
    """The planted community of every node ID of a `chung_lu` graph (after relabelling)."""
    out = np.empty(n, dtype=np.int64)
    out[relabel(np.arange(n, dtype=np.int64), n, node_type, seed)] = chung_lu_weights(n, communities)[1]
    return out


def chung_lu(communities: int, mixing: float = 0.15, exponent: float = 2.5) -> EdgeModel:
    """Chung-Lu edges with planted communities (one node type): the source in proportion to
    its weight, the destination in proportion to its weight among the source's community, or
    among all nodes for a `mixing` fraction of the edges. IDs are relabelled as RMAT's."""
    if not 0.0 <= mixing <= 1.0:
        raise ValueError(f"mixing must be between 0 and 1, got {mixing}")

    def model(rng: np.random.Generator, canonical: str, n_src: int, n_dst: int, first: int,
              count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
        src_type, _, dst_type = canonical.split(":")
        if src_type != dst_type:
            raise ValueError(f"chung_lu edges need one node type, got {canonical}")
        n = n_src
        weight, community = chung_lu_weights(n, communities, exponent)
        everyone = np.cumsum(weight)
        src = np.minimum(np.searchsorted(everyone, rng.random(count) * everyone[-1], side="right"), n - 1)
        # Nodes grouped by community (stable: ascending IDs inside each): community c is the
        # contiguous slice [start[c], start[c + 1]) of `grouped`.
        grouped = np.argsort(community, kind="stable")
        inside = np.concatenate([[0.0], np.cumsum(weight[grouped])])
        start = np.searchsorted(community[grouped], np.arange(max(1, communities) + 1))
        c = community[src]
        lo, hi = inside[start[c]], inside[start[c + 1]]
        slot = np.searchsorted(inside, lo + rng.random(count) * (hi - lo), side="right") - 1
        dst = grouped[np.clip(slot, start[c], start[c + 1] - 1)]
        mixed = rng.random(count) < mixing
        dst[mixed] = np.minimum(np.searchsorted(everyone, rng.random(int(mixed.sum())) * everyone[-1],
                                                side="right"), n - 1)
        return relabel(src, n, src_type, seed), relabel(dst, n, dst_type, seed)
    return model

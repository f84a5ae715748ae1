"""What ParMETIS balances: one vertex-weight column per balance constraint.

Mirrors DGL's `partition_graph` options. Without options every vertex weighs 1 (balance
node counts). `ntypes` gives one 0/1 column per node type, so each type is spread evenly.
`edges` adds each vertex's input in-degree, the number of edges its partition keeps; with
`ntypes` on a graph of several types it adds one in-degree column per node type instead, as
DGL's in-memory `partition_graph` does (`balance_ntypes` with `balance_edges`). Each
`ntype/feat` adds a 0/1 node feature (such as a train mask) as its own column, so e.g.
training nodes are spread evenly too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..arrays import owner_of
from ..errors import InputError
from .options import imbalance_problem
from ..chunked.metadata import GraphMeta
from ..chunked.readers import FeatureSource


@dataclass(frozen=True)
class BalanceOptions:
    ntypes: bool = False
    edges: bool = False
    features: Tuple[str, ...] = ()
    imbalance: float = 1.05
    edge_imbalance: Optional[float] = None   # --balance-edges FACTOR: the in-degree columns' own cap

    def names(self, meta: GraphMeta) -> List[str]:
        """The constraint columns `vertex_weights` builds, in order (before unusable ones are
        dropped): node counts or one per node type, in-degree (per type with types), masks."""
        split = self.ntypes and len(meta.node_types) > 1
        names = [f"ntype:{t}" for t in meta.node_types] if self.ntypes else ["nodes"]
        if self.edges:
            names += [f"edges:{t}" for t in meta.node_types] if split else ["edges"]
        return names + [f"feature:{spec}" for spec in self.features]

    def imbalances(self, names: Sequence[str]) -> np.ndarray:
        """The allowed max/average of each constraint column named `names`, in order."""
        edge = self.imbalance if self.edge_imbalance is None else self.edge_imbalance
        return np.array([edge if name.startswith("edges") else self.imbalance for name in names], dtype=np.float64)


def check_options(meta: GraphMeta, opts: BalanceOptions) -> None:
    """Reject unknown or unusable balance features before any work."""
    problem = imbalance_problem(opts.imbalance)
    if problem is not None:
        raise InputError(None, f"--imbalance {problem}")
    if opts.edge_imbalance is not None:
        problem = imbalance_problem(opts.edge_imbalance)
        if problem is not None:
            raise InputError(None, f"--balance-edges {problem}")
    for spec in opts.features:
        ntype, _, feat = spec.partition("/")
        if feat not in meta.node_features(ntype):
            raise InputError(None, f"--balance-feature {spec}: no node feature '{feat}' of node type '{ntype}'")
        source = FeatureSource(meta.node_features(ntype)[feat])
        if int(np.prod(source.tail_shape, dtype=np.int64)) != 1:
            raise InputError(source.files.where, f"--balance-feature {spec}: must be one value per node "
                                                 f"(a 0/1 mask), found rows of shape {source.tail_shape}")


def usable_constraints(totals: np.ndarray, names: List[str], num_parts: int,
                       imbalance: "float | np.ndarray") -> Tuple[np.ndarray, List[str]]:
    """(mask of columns to keep, a note for each dropped one).

    A column nobody carries (an empty type, an all-zero mask) divides by zero inside
    ParMETIS. A 0/1 column of total W cannot be balanced better than ceil(W/P) / (W/P); if
    that exceeds the allowed imbalance, ParMETIS gives up on the whole partitioning (seen:
    an empty partition), so the column is dropped instead.
    """
    keep = np.ones(len(names), dtype=bool)
    notes = []
    factors = np.broadcast_to(np.asarray(imbalance, dtype=np.float64), (len(names),))
    for i, (name, total) in enumerate(zip(names, totals)):
        if total == 0:
            keep[i] = False
            notes.append(f"{name}: no weight at all, not balanced")
        elif not name.startswith("edges") and name != "nodes":
            best = -(-int(total) // num_parts) / (total / num_parts)
            if best > factors[i]:
                keep[i] = False
                notes.append(f"{name}: {int(total)} nodes cannot be spread over {num_parts} partitions "
                             f"within imbalance {factors[i]:g} (best {best:.2f}), not balanced")
    return keep, notes


def vertex_weights(meta: GraphMeta, opts: BalanceOptions, offsets: np.ndarray, lo: int, hi: int,
                   in_degree: np.ndarray) -> Tuple[np.ndarray, List[str]]:
    """(weights of homogeneous vertices [lo, hi), shape (hi - lo, ncon), int64; column names)."""
    ids = np.arange(lo, hi, dtype=np.int64)
    types = owner_of(offsets, ids)
    type_id = {ntype: t for t, ntype in enumerate(meta.node_types)}
    degree = np.asarray(in_degree, dtype=np.int64)
    names = opts.names(meta)
    columns: List[np.ndarray] = []
    for name in names:
        kind, _, what = name.partition(":")
        if kind == "nodes":
            columns.append(np.ones(hi - lo, dtype=np.int64))
        elif kind == "ntype":
            columns.append((types == type_id[what]).astype(np.int64))
        elif kind == "edges":
            columns.append(np.where(types == type_id[what], degree, 0) if what else degree)
        else:
            columns.append(mask_column(meta, what, offsets, lo, hi, "--balance-feature"))
    return np.stack(columns, axis=1), names


def mask_column(meta: GraphMeta, spec: str, offsets: np.ndarray, lo: int, hi: int, option: str) -> np.ndarray:
    """The 0/1 node feature `spec` ("NTYPE/FEAT") for homogeneous vertices [lo, hi) (int64,
    0 for vertices of other types); InputError naming `option` if a value is not 0 or 1."""
    ntype, _, feat = spec.partition("/")
    t = meta.ntype_id(ntype)
    a, b = max(lo, int(offsets[t])), min(hi, int(offsets[t + 1]))
    col = np.zeros(hi - lo, dtype=np.int64)
    if a < b:
        files = meta.node_features(ntype)[feat]
        values = FeatureSource(files).read(a - int(offsets[t]), b - int(offsets[t])).reshape(-1)
        if not np.isin(values, (0, 1)).all():
            raise InputError(files.where, f"{option} {spec}: values must be 0 or 1")
        col[a - lo:b - lo] = values.astype(np.int64)
    return col

"""`partition_graph`: DGL's in-memory partitioning API, run by distpart in one process.

This module owns the Python entry point for graphs that fit in memory. It has
`dgl.distributed.partition_graph`'s signature and meaning and writes what `distpart
pipeline` writes (the same files, byte for byte for the same chunked input, assignment and
options), so `distpart verify`, `distpart report`, distpart's loader and DGL's
`load_partition`/`DistGraph` all read it. It runs in the calling process: mpi4py's
COMM_WORLD of a process started without `mpiexec` is a world of one rank, and the same
stage functions the command line calls (validate, assign, dispatch, verify, report) run
on it. The graph goes through a chunked copy in a hidden folder inside `out_path`
(`.distpart-partition-graph-input`), removed at the end, also on error.

`graph_description` (a DGLGraph as the plain description the chunk writer takes) lives with
that writer, in `chunked.write.memory`, and is re-exported here for DGL users.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import steps
from .assign.assignment import Assignment, NodeBlock, write_assignment
from .assign.options import check_num_parts
from .chunked.write import GraphDescription, describe_graph, write_graph
from .chunked.write.memory import graph_description
from .errors import InputError
from .mpi.exchange import DEFAULT_MAX_BYTES
from .partitions.dglformat import graph_formats as checked_formats
from .partitions.graphbolt import GraphboltOptions, load_graphbolt
from .partitions.loader import load_orig_ids
from .run.lock import folder_locks
from .run.stages import StageLog

if TYPE_CHECKING:
    from mpi4py.MPI import Intracomm

__all__ = ["partition_graph", "graph_description"]

INPUT_FOLDER = ".distpart-partition-graph-input"
_BALANCE_FEATURE = "_distpart_balance_{}"

IdMap = Any   # np.ndarray, or torch.Tensor when torch is importable
IdMaps = Union[IdMap, Dict[Any, IdMap]]


def partition_graph(
    g: Any,
    graph_name: str,
    num_parts: int,
    out_path: Union[str, "os.PathLike[str]"],
    num_hops: int = 1,
    part_method: str = "metis",
    balance_ntypes: Any = None,
    balance_edges: bool = False,
    return_mapping: bool = False,
    num_trainers_per_machine: int = 1,
    objtype: str = "cut",
    graph_formats: Union[None, str, Sequence[str]] = None,
    use_graphbolt: bool = False,
    **kwargs: bool,
) -> Optional[Tuple[IdMaps, IdMaps]]:
    """Partition an in-memory graph for distributed training and write the partitions.

    As `dgl.distributed.partition_graph` (DGL 2.1), in one process, without a launcher.

    `g` is a DGLGraph, or without DGL a plain description (`distpart.chunked.write.describe_graph`):
    ``{"num_nodes": {ntype: n}, "edges": {(src, rel, dst): (src_ids, dst_ids)},
    "node_data": {ntype: {name: array}}, "edge_data": {(src, rel, dst): {name: array}}}``.
    Features become `ntype/name` and `src:rel:dst/name` in each partition, owned rows only.

    `part_method` "metis" runs ParMETIS (distpart's `--method parmetis`, hubs first),
    "random" distpart's balanced random assignment. As in DGL, a heterogeneous graph is
    balanced per node type by default; `balance_ntypes` (one integer per node: an array for
    a one-type graph, a dict {ntype: array} otherwise) adds one 0/1 constraint per value,
    `balance_edges` one for in-degree. `num_trainers_per_machine` T > 1 partitions into
    num_parts * T parts first and stores each node's part as the node feature `trainer_id`
    (each edge gets its destination's), then partition p holds trainers p*T .. p*T + T - 1;
    as in DGL this happens with "metis", or with any method when num_parts is 1.

    `graph_formats` ("coo", "csr", "csc" or a list of them; default COO) are the sparse
    matrices each partition's graph.dgl stores, as DGL's. `use_graphbolt=True` also writes
    each partition's GraphBolt graph (`fused_csc_sampling_graph.pt`, as DGL's
    `dgl_partition_to_graphbolt`, whose keyword arguments `store_eids`, `store_inner_node`
    and `store_inner_edge` are passed as `kwargs`, as in DGL); it needs DGL and torch.

    `return_mapping=True` returns (orig_nids, orig_eids): for a graph with one node type and
    one edge type, arrays with orig_nids[new per-type ID] = original ID; otherwise dicts
    keyed by node type and by canonical edge type tuple. They are torch tensors (int64)
    when torch can be imported, else numpy int64 arrays.

    Differences from DGL, all deliberate: the partition config is `out_path/metadata.json`
    (DGL: `out_path/<graph_name>.json`), with the assignment in `out_path/assignment` and
    each partition's orig_nids.dgl/orig_eids.dgl beside it, as `distpart pipeline` writes;
    only `num_hops=1`; `objtype="vol"` (least total communication volume, METIS's
    objective) runs distpart's multilevel method with `--objective vol`, as ParMETIS has no
    such objective; GraphBolt keyword arguments without `use_graphbolt=True` are refused (DGL
    ignores them); the input graph is not modified (DGL adds `trainer_id` to `g`'s
    ndata/edata; a `trainer_id` feature it has is replaced in the output, as DGL replaces
    it); a flat `balance_ntypes` array on a graph with several node types is refused
    (DGL ignores it); a previous distpart output in `out_path` is replaced, other files there
    make it refuse; the output is verified against the input before returning.
    """
    _check_arguments(graph_name, num_parts, num_hops, part_method, num_trainers_per_machine, objtype)
    graphbolt = _graphbolt_options(use_graphbolt, kwargs)
    formats = checked_formats([graph_formats] if isinstance(graph_formats, str) else graph_formats or ["coo"])
    desc = describe_graph(g)
    homogeneous = bool(g.is_homogeneous) if hasattr(g, "is_homogeneous") else desc.homogeneous
    trainers = num_trainers_per_machine if num_trainers_per_machine > 1 and (
        part_method == "metis" or num_parts == 1) else 1
    balance = _balance_columns(desc, balance_ntypes, homogeneous)
    comm = _one_process_world()
    out = Path(out_path)

    with folder_locks(comm, [out], "partition_graph"):
        # The chunked copy goes to a hidden folder no partition output writes, so it is no
        # input a removal could touch; the input root is given as that folder.
        steps.claim_folders(comm, steps.pipeline_folders(out, None, list(desc.num_nodes)), out / INPUT_FOLDER,
                            overwrite=True)
        tmp = out / INPUT_FOLDER
        try:
            first = _with_node_features(desc, balance)
            write_graph(first, tmp, num_chunks=1, edge_format="numpy", graph_name=graph_name, overwrite=True)
            assignment = _assign(comm, tmp, num_parts * trainers, part_method, trainers > 1,
                                 balance, balance_edges, homogeneous, objtype)
            if trainers > 1 or balance:
                trainer_ids = _trainer_ids(desc, assignment) if trainers > 1 else {}
                final = _with_node_features(desc, {t: {"trainer_id": v} for t, v in trainer_ids.items()},
                                            replace=True)
                for etype, (_, dst) in desc.edges.items():
                    if trainers > 1:
                        # As DGL: an edge belongs to its destination's partition, so to its trainer.
                        final.edge_data.setdefault(etype, {})["trainer_id"] = trainer_ids[etype.split(":")[2]][dst]
                write_graph(final, tmp, num_chunks=1, edge_format="numpy", graph_name=graph_name, overwrite=True)
            if trainers > 1:
                assignment = _coalesce(assignment, num_parts, trainers)
            assignment.algo_name = "metis" if part_method == "metis" else "random"
            _build(comm, tmp, out, assignment, {"api": "partition_graph", "part_method": part_method,
                                                 "num_parts": num_parts, "num_trainers_per_machine": trainers,
                                                 "balance_edges": bool(balance_edges),
                                                 **({"objtype": objtype} if objtype != "cut" else {})},
                   formats, graphbolt)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if return_mapping:
        return _orig_maps(out, num_parts, desc, homogeneous)
    return None


# ---------------------------------------------------------------- steps


def _check_arguments(graph_name: str, num_parts: int, num_hops: int, part_method: str, trainers: int,
                     objtype: str) -> None:
    if not isinstance(graph_name, str) or not graph_name:
        raise ValueError(f"graph_name must be a non-empty string, got {graph_name!r}")
    for name, value in (("num_parts", num_parts), ("num_trainers_per_machine", trainers)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if num_hops != 1:
        raise ValueError(f"num_hops={num_hops}: distpart builds 1-hop halos only (num_hops=1)")
    if part_method not in ("metis", "random"):
        raise ValueError(f"unknown partitioning method {part_method!r}: 'metis' or 'random'")
    if objtype not in ("cut", "vol"):
        raise ValueError(f"objtype must be 'cut' or 'vol', got {objtype!r}")


def _graphbolt_options(use_graphbolt: bool, kwargs: Mapping[str, Any]) -> Optional[GraphboltOptions]:
    """DGL's use_graphbolt and dgl_partition_to_graphbolt's keyword arguments as
    GraphboltOptions (None without GraphBolt); DGL and torch are imported here, before any work."""
    allowed = GraphboltOptions().as_json()
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"partition_graph got unexpected keyword arguments {unknown}; the GraphBolt "
                        f"ones are {sorted(allowed)}")
    if not use_graphbolt:
        if kwargs:
            raise ValueError(f"{sorted(kwargs)} only apply with use_graphbolt=True")
        return None
    load_graphbolt("use_graphbolt=True")
    return GraphboltOptions(**{k: bool(v) for k, v in kwargs.items()})


def _one_process_world() -> "Intracomm":
    """COMM_WORLD, which must be one rank: this API partitions in the calling process."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.Get_size() != 1:
        raise InputError(None, f"partition_graph runs in one process, but this one is one of "
                               f"{comm.Get_size()} MPI ranks: start it without mpiexec, or use "
                               f"`distpart pipeline` for a chunked graph under mpiexec")
    return comm


def _balance_columns(desc: "GraphDescription", balance_ntypes: Any,
                     homogeneous: bool) -> Dict[str, Dict[str, np.ndarray]]:
    """DGL's balance_ntypes as 0/1 node features, one per constraint (ntype -> name -> mask).

    DGL gives METIS one column per distinct value of the array (per node type, values
    numbered after the previous types'), and one all-ones column for each node type the
    dict leaves out. distpart's `--balance-feature` balances each such 0/1 feature.
    """
    if balance_ntypes is None:
        return {}
    if not isinstance(balance_ntypes, Mapping):
        if not homogeneous and len(desc.num_nodes) > 1:
            raise ValueError("balance_ntypes for a graph with several node types must be a dict "
                             "{ntype: one integer per node}")
        balance_ntypes = {next(iter(desc.num_nodes)): balance_ntypes}
    unknown = set(balance_ntypes) - set(desc.num_nodes)
    if unknown:
        raise ValueError(f"balance_ntypes names unknown node types {sorted(unknown)}")
    columns: Dict[str, Dict[str, np.ndarray]] = {}
    k = 0
    for ntype, n in desc.num_nodes.items():
        values = balance_ntypes.get(ntype)
        if values is None:
            columns.setdefault(ntype, {})[_BALANCE_FEATURE.format(k)] = np.ones(n, dtype=np.uint8)
            k += 1
            continue
        values = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
        if values.shape != (n,) or values.dtype.kind not in "biu":
            raise ValueError(f"balance_ntypes[{ntype!r}] must hold one integer per node ({n}), "
                             f"got shape {values.shape} of {values.dtype}")
        for v in np.unique(values):
            columns.setdefault(ntype, {})[_BALANCE_FEATURE.format(k)] = (values == v).astype(np.uint8)
            k += 1
    return columns


def _with_node_features(desc: "GraphDescription", extra: Mapping[str, Mapping[str, np.ndarray]],
                        replace: bool = False) -> "GraphDescription":
    """`desc` with more node features (a copy: the caller's graph is not changed). A
    `trainer_id` the graph has is replaced, as DGL replaces it; balance masks never clash."""
    node_data = {t: dict(f) for t, f in desc.node_data.items()}
    for ntype, feats in extra.items():
        for name, values in feats.items():
            if name in node_data.get(ntype, {}) and not replace:
                raise ValueError(f"node type {ntype!r} already has a feature {name!r}, which "
                                 f"partition_graph writes itself")
            node_data.setdefault(ntype, {})[name] = values
    edge_data = {t: dict(f) for t, f in desc.edge_data.items()}
    return GraphDescription(desc.num_nodes, desc.edges, node_data, edge_data)


def _assign(comm: "Intracomm", in_dir: Path, num_parts: int, part_method: str, trainers: bool,
            balance: Mapping[str, Mapping[str, np.ndarray]], balance_edges: bool, homogeneous: bool,
            objtype: str = "cut") -> Assignment:
    """Step 1 on the chunked copy: ParMETIS, random, or for objtype "vol" the multilevel
    method with `--objective vol` (ParMETIS has no volume objective), as `assign` does."""
    meta = steps.validate_input(comm, in_dir, StageLog())
    check_num_parts(None, num_parts, sum(meta.node_counts))
    features = tuple(f"{t}/{name}" for t, feats in balance.items() for name in feats)
    method = "random" if num_parts == 1 or not (part_method == "metis" or trainers) else "parmetis"
    objective = "vol" if method == "parmetis" and objtype == "vol" else "cut"
    method = "multilevel" if objective == "vol" else method
    # As DGL: a graph with several node types balances each type unless told otherwise.
    options = steps.Step1Options(num_parts, method, balance_ntypes=not homogeneous and not features,
                                 balance_edges=bool(balance_edges), balance_feature=features, objective=objective)
    return steps.compute_step1(comm, meta, options)


def _trainer_ids(desc: "GraphDescription", assignment) -> Dict[str, np.ndarray]:
    """Each node's part among num_parts * T (one rank holds every block: the whole type)."""
    return {t: np.asarray(assignment.blocks[t].parts, dtype=np.int64) for t in desc.num_nodes}


def _coalesce(assignment, num_parts: int, trainers: int):
    """Trainer parts p*T .. p*T + T - 1 form machine partition p, as DGL's floor division."""
    blocks = {t: NodeBlock(b.start, np.asarray(b.parts, dtype=np.int64) // trainers, b.bounds)
              for t, b in assignment.blocks.items()}
    return Assignment(num_parts, assignment.algo_name, blocks)


def _build(comm: "Intracomm", in_dir: Path, out: Path, assignment: Assignment, options: Dict[str, Any],
           graph_formats: Sequence[str], graphbolt: Optional[GraphboltOptions] = None) -> None:
    """Write the assignment, dispatch, verify and report: the rest of `distpart pipeline`."""
    log = StageLog()
    meta = steps.validate_input(comm, in_dir, log)
    write_assignment(comm, assignment, meta, out / "assignment")
    steps.build(comm, meta, assignment, out, steps.fingerprint_input(comm, meta), options, DEFAULT_MAX_BYTES, log,
                graphbolt=graphbolt, graph_formats=graph_formats)
    steps.check_and_report(comm, meta, assignment, out, DEFAULT_MAX_BYTES, log)


def _orig_maps(out: Path, num_parts: int, desc: "GraphDescription",
               homogeneous: bool) -> Tuple[IdMaps, IdMaps]:
    """New per-type ID -> original ID, per type: new IDs of a type run over the partitions in
    order, so the partitions' orig_nids (orig_eids) concatenated are the map."""
    config = out / "metadata.json"
    per_part = [load_orig_ids(config, p) for p in range(num_parts)]
    empty = np.empty(0, dtype=np.int64)
    nids = {t: np.concatenate([p[0].get(t, empty) for p in per_part]).astype(np.int64, copy=False)
            for t in desc.num_nodes}
    eids = {tuple(e.split(":")): np.concatenate([p[1].get(e, empty) for p in per_part]).astype(np.int64, copy=False)
            for e in desc.edges}
    try:
        import torch
        convert: Any = torch.from_numpy
    except ImportError:
        convert = lambda a: a  # noqa: E731 - numpy stays numpy
    if homogeneous:
        return convert(next(iter(nids.values()))), convert(next(iter(eids.values())))
    return {t: convert(a) for t, a in nids.items()}, {e: convert(a) for e, a in eids.items()}

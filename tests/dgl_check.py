"""What real DGL 2.x sees in a partition output; run it under a Python that has DGL.

    python tests/dgl_check.py CONFIG_JSON
        Loads every partition with dgl.distributed.load_partition, load_partition_feats,
        load_partition_book and dgl.data.load_tensors (orig_nids/orig_eids), and prints
        one JSON object describing them (see `describe_partition`).

    python tests/dgl_check.py --books CONFIG_JSON...
        Prints, per config, `book_view` of DGL's RangePartitionBook of every partition
        (load_partition_book reads only the JSON: no partition files needed).

    python tests/dgl_check.py --save-fixtures DIR
        Has DGL write graph files (several sparse formats and ID types) and a tensor
        dict into DIR, plus expected.json: the values DGL reads back from them.

tests/test_dgl_interop.py compares both against distpart's own reader. The helpers
`describe_array`, `book_view` and `array_values` are numpy-only and are imported by the
tests under any interpreter, so the two sides describe data with the same code; only
the two entry points import DGL.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

# Weights for an order-sensitive checksum: sum(a[i] * w[i]).
_CHECKSUM_PERIOD = 7919


def describe_array(arr: Any) -> dict[str, Any]:
    """dtype, shape, sum and order-sensitive checksum of an array or CPU tensor.

    Integer arrays get exact int64 sums; others float64 sums.
    """
    a = np.asarray(arr)
    exact = a.dtype.kind in "iub"
    flat = a.reshape(-1).astype(np.int64 if exact else np.float64)
    weights = np.arange(flat.size, dtype=np.int64) % _CHECKSUM_PERIOD + 1
    sums = (flat.sum(), (flat * weights).sum())
    total, checksum = (int(x) for x in sums) if exact else (float(x) for x in sums)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "sum": total, "checksum": checksum}


def array_values(arr: Any) -> dict[str, Any]:
    """dtype, shape and every value of a (small) array or CPU tensor."""
    a = np.asarray(arr)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.reshape(-1).tolist()}


def _type_counts(id_map: Mapping[str, Sequence[Sequence[int]]]) -> dict[str, int]:
    return {name: sum(end - start for start, end in ranges) for name, ranges in id_map.items()}


def book_view(
    gpb: Any, part_id: int, cfg: Mapping[str, Any], arange: Callable[[int], Any]
) -> dict[str, Any]:
    """Answers of a partition book (DGL's or distpart's) to a fixed set of queries.

    `arange(n)` builds the ID arrays the book accepts (torch.arange for DGL's).
    """

    def lst(x: Any) -> list[int]:
        return np.asarray(x).tolist()

    def as_tuple(etype: str) -> tuple[str, ...]:
        return tuple(etype.split(":"))

    node_counts, edge_counts = _type_counts(cfg["node_map"]), _type_counts(cfg["edge_map"])
    own_nids, own_eids = gpb.partid2nids(part_id), gpb.partid2eids(part_id)
    ntype_ids, per_ntype = gpb.map_to_per_ntype(own_nids)
    etype_ids, per_etype = gpb.map_to_per_etype(own_eids)
    return {
        "num_partitions": gpb.num_partitions(),
        "partid": gpb.partid,
        "metadata": gpb.metadata(),
        "nid2partid": lst(gpb.nid2partid(arange(cfg["num_nodes"]))),
        "eid2partid": lst(gpb.eid2partid(arange(cfg["num_edges"]))),
        "typed_nid2partid": {t: lst(gpb.nid2partid(arange(n), t)) for t, n in node_counts.items()},
        "typed_eid2partid": {
            t: lst(gpb.eid2partid(arange(n), as_tuple(t))) for t, n in edge_counts.items()
        },
        "partid2nids": lst(own_nids),
        "partid2eids": lst(own_eids),
        "typed_partid2nids": {t: lst(gpb.partid2nids(part_id, t)) for t in node_counts},
        "typed_partid2eids": {t: lst(gpb.partid2eids(part_id, as_tuple(t))) for t in edge_counts},
        "map_to_per_ntype": [lst(ntype_ids), lst(per_ntype)],
        "map_to_per_etype": [lst(etype_ids), lst(per_etype)],
        "map_to_homo_nid": {
            t: lst(gpb.map_to_homo_nid(arange(n), t)) for t, n in node_counts.items()
        },
        "map_to_homo_eid": {
            t: lst(gpb.map_to_homo_eid(arange(n), as_tuple(t))) for t, n in edge_counts.items()
        },
        "nid2localnid": lst(gpb.nid2localnid(own_nids, part_id)),
        "eid2localeid": lst(gpb.eid2localeid(own_eids, part_id)),
    }


def describe_partition(
    graph: Mapping[str, Any],
    node_feats: Mapping[str, Any],
    edge_feats: Mapping[str, Any],
    orig_nids: Mapping[str, Any],
    orig_eids: Mapping[str, Any],
) -> dict[str, Any]:
    """The JSON description of one partition; `graph` has num_nodes, src, dst, ndata, edata."""

    def described(arrays: Mapping[str, Any]) -> dict[str, Any]:
        return {key: describe_array(arrays[key]) for key in sorted(arrays)}

    return {
        "num_nodes": int(graph["num_nodes"]),
        "num_edges": len(graph["src"]),
        "src": describe_array(graph["src"]),
        "dst": describe_array(graph["dst"]),
        "ndata": described(graph["ndata"]),
        "edata": described(graph["edata"]),
        "node_feats": described(node_feats),
        "edge_feats": described(edge_feats),
        "orig_nids": described(orig_nids),
        "orig_eids": described(orig_eids),
    }


def check_config(config_path: str) -> dict[str, Any]:
    """DGL's view of every partition of the output described by `config_path`."""
    import dgl
    import torch
    from dgl.distributed import load_partition, load_partition_book, load_partition_feats

    with open(config_path, encoding="utf-8") as f:
        cfg = json.load(f)
    parts = []
    for p in range(cfg["num_parts"]):
        g, node_feats, edge_feats, gpb, graph_name, ntypes, etypes = load_partition(config_path, p)
        feats_only = load_partition_feats(config_path, p)
        book, book_name, book_ntypes, book_etypes = load_partition_book(config_path, p)
        graph_file = os.path.join(os.path.dirname(config_path), cfg[f"part-{p}"]["part_graph"])
        folder = os.path.dirname(graph_file)
        src, dst = g.edges(order="eid")
        graph = {
            "num_nodes": g.num_nodes(),
            "src": src,
            "dst": dst,
            "ndata": dict(g.ndata),
            "edata": dict(g.edata),
        }
        part = describe_partition(
            graph,
            node_feats,
            edge_feats,
            dgl.data.load_tensors(os.path.join(folder, "orig_nids.dgl")),
            dgl.data.load_tensors(os.path.join(folder, "orig_eids.dgl")),
        )
        part.update(
            graph_name=graph_name,
            ntypes=list(ntypes),
            etypes=[":".join(e) for e in etypes],
            feats_only=[{k: describe_array(v[k]) for k in sorted(v)} for v in feats_only],
            book=book_view(gpb, p, cfg, torch.arange),
            book_loaded_alone=book_view(book, p, cfg, torch.arange),
            book_types=[
                book_name,
                dict(book_ntypes),
                {":".join(k): v for k, v in book_etypes.items()},
            ],
        )
        parts.append(part)
    return {"dgl_version": dgl.__version__, "partitions": parts}


def check_books(config_paths: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """DGL's partition-book answers for each partition of each config."""
    import torch
    from dgl.distributed import load_partition_book

    views = {}
    for path in config_paths:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
        views[path] = [
            book_view(load_partition_book(path, p)[0], p, cfg, torch.arange)
            for p in range(cfg["num_parts"])
        ]
    return views


def _save_graph(path: str, graph: Any, formats: list[str]) -> None:
    """dgl.save_graphs, then zero the header block past its 32 used bytes.

    DGL leaves that area uninitialised and never reads it; zeroed, the fixture files
    hold no process memory and regenerate byte for byte.
    """
    import dgl

    dgl.save_graphs(path, [graph], formats=formats)
    with open(path, "r+b") as f:
        f.seek(32)
        f.write(bytes(4096 - 32))


def save_fixtures(folder: str) -> None:
    """Have DGL write graph files and a tensor dict into `folder`, with expected.json."""
    import dgl
    import torch

    rng = np.random.default_rng(7)
    num_nodes, num_edges = 7, 12  # node 6 stays isolated
    src = torch.from_numpy(rng.integers(0, num_nodes - 1, num_edges))
    dst = torch.from_numpy(rng.integers(0, num_nodes - 1, num_edges))
    g = dgl.graph((src, dst), num_nodes=num_nodes)
    g.ndata["feat"] = torch.from_numpy(rng.standard_normal((num_nodes, 3)).astype(np.float32))
    g.ndata["label"] = torch.from_numpy(rng.integers(0, 5, num_nodes))
    g.ndata["mask"] = torch.from_numpy(rng.random(num_nodes) < 0.5)
    g.ndata["half"] = torch.from_numpy(rng.standard_normal(num_nodes).astype(np.float16))
    g.edata["weight"] = torch.from_numpy(rng.standard_normal((num_edges, 2, 2)))
    g.edata["kind"] = torch.from_numpy(rng.integers(0, 3, num_edges).astype(np.int32))

    graphs = {
        "graph_coo_csc.dgl": (g, ["coo", "csc"]),
        "graph_all_formats.dgl": (g, ["coo", "csr", "csc"]),
        "graph_csc.dgl": (g, ["csc"]),
        "graph_csr_int32.dgl": (g.int(), ["csr"]),
    }
    expected: dict[str, Any] = {"dgl_version": dgl.__version__, "graphs": {}}
    for name, (graph, formats) in graphs.items():
        path = os.path.join(folder, name)
        _save_graph(path, graph, formats)
        loaded = dgl.load_graphs(path)[0][0]
        u, v = loaded.edges(order="eid")
        expected["graphs"][name] = {
            "formats": formats,
            "num_nodes": loaded.num_nodes(),
            "src": array_values(u),
            "dst": array_values(v),
            "ndata": {k: array_values(t) for k, t in loaded.ndata.items()},
            "edata": {k: array_values(t) for k, t in loaded.edata.items()},
        }

    # One COO graph with a single array per data kind, for a byte-for-byte comparison
    # with distpart's writer (with several, DGL orders them by hash).
    single = dgl.graph((src, dst), num_nodes=num_nodes)
    single.ndata["feat"] = g.ndata["feat"]
    single.edata["kind"] = g.edata["kind"]
    _save_graph(os.path.join(folder, "graph_coo_single.dgl"), single, ["coo"])
    # The same graph in the other sparse formats (distpart's --graph-formats).
    for formats in (["csr"], ["csc"], ["coo", "csr", "csc"]):
        _save_graph(os.path.join(folder, f"graph_{'_'.join(formats)}_single.dgl"), single, formats)
    expected["graph_coo_single.dgl"] = {
        "num_nodes": num_nodes,
        "src": array_values(src),
        "dst": array_values(dst),
        "ndata": {"feat": array_values(single.ndata["feat"])},
        "edata": {"kind": array_values(single.edata["kind"])},
    }

    tensors = {
        "int8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "int16_3d": torch.arange(24, dtype=torch.int16).reshape(2, 3, 4),
        "int64": torch.tensor([-(2**62), 2**62]),
        "float16": torch.tensor([0.5, -1.25, 65504.0], dtype=torch.float16),
        "float32_2d": torch.from_numpy(rng.standard_normal((4, 2)).astype(np.float32)),
        "float64": torch.from_numpy(rng.standard_normal(3)),
        "bool": torch.tensor([True, False, True]),
        "bfloat16": torch.tensor([1.5, -2.0, 3.140625], dtype=torch.bfloat16),
        "empty_2d": torch.zeros((0, 4), dtype=torch.float32),
    }
    dgl.data.save_tensors(os.path.join(folder, "tensors.dgl"), tensors)
    loaded_tensors = dgl.data.load_tensors(os.path.join(folder, "tensors.dgl"))
    # numpy has no bfloat16: distpart widens it to float32, exactly.
    expected["tensors.dgl"] = {
        k: array_values(t.float() if t.dtype == torch.bfloat16 else t)
        for k, t in loaded_tensors.items()
    }
    with open(os.path.join(folder, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


def main(argv: Sequence[str]) -> int:
    if len(argv) == 2 and not argv[1].startswith("-"):
        json.dump(check_config(argv[1]), sys.stdout)
        sys.stdout.write("\n")
        return 0
    if len(argv) >= 3 and argv[1] == "--books":
        json.dump(check_books(argv[2:]), sys.stdout)
        sys.stdout.write("\n")
        return 0
    if len(argv) == 3 and argv[1] == "--save-fixtures":
        save_fixtures(argv[2])
        return 0
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

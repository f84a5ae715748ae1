"""distpart.partition_graph: DGL's in-memory API, run in one process without a launcher.

Each call runs in its own process (as a user's script does: mpi4py's singleton world), with
the conftest helpers' timeout. The output must pass `distpart verify` against the same graph
chunked by `distpart.chunked.write`, load in real DGL, and the returned maps must restore the
original features; trainer IDs must follow DGL's rules.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

from harness import distpart, mpi_command, mpi_env, run_bounded
from distpart import load_partition
from distpart.chunked.write import describe_graph, write_graph
from graphs import homogeneous_graph, shop_graph
from reference import assert_restores, dgl_dump, restore_graph, storable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# A user's script: build the graph, partition it, keep the returned maps.
SCRIPT = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from graphs import GRAPHS
import distpart
out, name, kwargs = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
graph = GRAPHS[name]()
if "balance_by" in kwargs:   # a node feature as balance_ntypes, as DGL's guide passes train_mask
    feature = kwargs.pop("balance_by")
    if isinstance(graph["num_nodes"], int):   # one node type: an array, one value per node
        kwargs["balance_ntypes"] = graph["node_data"][feature].astype(np.int64)
    else:
        kwargs["balance_ntypes"] = {t: f[feature].astype(np.int64) for t, f in graph["node_data"].items()
                                    if feature in f}
maps = distpart.partition_graph(graph, name, out_path=out, **kwargs)
if maps is not None:
    nids, eids = maps
    if isinstance(nids, dict):
        arrays = {**{f"n/{k}": v for k, v in nids.items()}, **{"e/" + ":".join(k): v for k, v in eids.items()}}
    else:
        arrays = {"n": nids, "e": eids}
    np.savez(out + "/../maps.npz", **arrays)
    print("maps", type(nids).__name__, {k: str(v.dtype) for k, v in arrays.items()})
"""


def partition(tmp_path: Path, graph: str = "shop", ok: bool = True, **kwargs: Any):
    """Run partition_graph in a fresh process; returns (run, maps or None)."""
    out = tmp_path / "out"
    run = run_bounded([sys.executable, "-c", SCRIPT, HERE, out, graph, json.dumps(kwargs)], mpi_env(),
                      timeout=240, cwd=REPO)
    if not ok:
        assert run.returncode != 0, run.output
        return run, None
    assert run.returncode == 0, run.output
    maps = tmp_path / "maps.npz"
    return run, (dict(np.load(maps)) if kwargs.get("return_mapping") else None)


def chunked_input(tmp_path: Path, graph: Dict[str, Any]) -> Path:
    """The same graph as a chunked folder, for `distpart verify`."""
    return write_graph(graph, tmp_path / "in", num_chunks=2, edge_format="numpy").parent


@pytest.mark.parametrize("part_method, objtype", [("metis", "cut"), ("random", "cut"), ("metis", "vol")])
def test_heterogeneous_graph_maps_restore_features_and_verify(tmp_path: Path, part_method: str, objtype: str) -> None:
    graph = shop_graph()
    run, maps = partition(tmp_path, num_parts=4, part_method=part_method, return_mapping=True, objtype=objtype)
    assert "edge cut:" in run.stdout                 # the report, as the pipeline prints it
    out = tmp_path / "out"
    assert not (out / ".distpart-partition-graph-input").exists()   # the chunked copy is gone
    assert not (out / ".distpart.lock").exists()
    config = json.loads((out / "metadata.json").read_text())
    assert config["graph_name"] == "shop" and config["part_method"] == part_method
    assert config["num_parts"] == 4
    # Recorded where it is asked for (ParMETIS has no volume objective: multilevel refines it).
    options = json.loads((out / "distpart-manifest.json").read_text())["options"]
    assert options.get("objtype", "cut") == objtype

    # The output is what `distpart pipeline` writes: the verifier, on 2 ranks, agrees.
    in_dir = chunked_input(tmp_path, graph)
    check = distpart(2, "verify", in_dir, out / "assignment", out)
    assert "verify: OK (4 partitions, 656 nodes, 3250 edges, 6 features match the input)" in check.stdout
    distpart(1, "verify", "--quick", out)

    # The maps: numpy int64 here (no torch), keyed like DGL's (node types; edge type tuples).
    desc = describe_graph(graph)
    assert sorted(k for k in maps if k.startswith("n/")) == sorted(f"n/{t}" for t in desc.num_nodes)
    assert sorted(k for k in maps if k.startswith("e/")) == sorted(f"e/{e}" for e in desc.edges)
    for t, n in desc.num_nodes.items():
        assert maps[f"n/{t}"].dtype == np.int64
        np.testing.assert_array_equal(np.sort(maps[f"n/{t}"]), np.arange(n))
    # As DGL's guide: orig_feat[node_map] = feature in the new order restores the original.
    parts = [load_partition(str(out / "metadata.json"), p) for p in range(4)]
    for data, index, kind in ((desc.node_data, 1, "n"), (desc.edge_data, 2, "e")):
        for owner, feats in data.items():
            for name, values in feats.items():
                shuffled = np.concatenate([p[index][f"{owner}/{name}"] for p in parts])
                restored = np.empty_like(shuffled)
                restored[maps[f"{kind}/{owner}"]] = shuffled
                np.testing.assert_array_equal(restored, storable(values))
    assert_restores(out, graph)


def test_heterogeneous_output_loads_in_dgl(dgl_python: str, tmp_path: Path) -> None:
    graph = shop_graph()   # what the script partitions
    _, maps = partition(tmp_path, num_parts=2, return_mapping=True)
    desc = describe_graph(graph)
    dumps = dgl_dump(dgl_python, tmp_path / "out", tmp_path / "dump")
    # DGL's own load_partition: features of each partition's nodes, in the new order.
    for t, feats in desc.node_data.items():
        for name, values in feats.items():
            shuffled = np.concatenate([dumps[p][f"nfeat:{t}/{name}"] for p in range(2)])
            np.testing.assert_array_equal(shuffled, storable(values)[maps[f"n/{t}"]])
    for e, feats in desc.edge_data.items():
        for name, values in feats.items():
            shuffled = np.concatenate([dumps[p][f"efeat:{e}/{name}"] for p in range(2)])
            np.testing.assert_array_equal(shuffled, storable(values)[maps[f"e/{e}"]])
    # Where torch can be imported (DGL's environment) the maps are int64 tensors, the same IDs
    # (checked here even where that environment cannot run partition_graph itself).
    check = r"""
import sys, types
sys.path.insert(0, sys.argv[1])
import numpy as np, torch
from distpart.api import _orig_maps
desc = types.SimpleNamespace(num_nodes=dict.fromkeys(sys.argv[3].split(",")), edges=dict.fromkeys(sys.argv[4].split(",")))
nids, eids = _orig_maps(__import__("pathlib").Path(sys.argv[2]), 2, desc, False)
assert all(isinstance(v, torch.Tensor) and v.dtype == torch.int64 for v in [*nids.values(), *eids.values()])
np.savez(sys.argv[2] + "/../torch_maps.npz", **{"n/" + k: v.numpy() for k, v in nids.items()},
         **{"e/" + ":".join(k): v.numpy() for k, v in eids.items()})
"""
    run = run_bounded([dgl_python, "-c", check, REPO, tmp_path / "out", ",".join(desc.num_nodes),
                       ",".join(desc.edges)], mpi_env(), timeout=300)
    assert run.returncode == 0, run.output
    torch_maps = np.load(tmp_path / "torch_maps.npz")
    assert set(torch_maps.files) == set(maps)
    for k in maps:
        np.testing.assert_array_equal(torch_maps[k], maps[k])
    for p in range(2):
        assert list(dumps[p]["meta:ntypes"]) == list(desc.num_nodes)
        # DGL loads the structure distpart's loader reads: the same nodes and edges.
        g = load_partition(str(tmp_path / "out" / "metadata.json"), p)[0]
        np.testing.assert_array_equal(dumps[p]["ndata:_ID"], g.ndata["_ID"])
        np.testing.assert_array_equal(dumps[p]["src"], g.src)
        np.testing.assert_array_equal(dumps[p]["dst"], g.dst)


def test_homogeneous_graph_returns_arrays_and_balances_train_mask(tmp_path: Path) -> None:
    graph = homogeneous_graph()
    mask = graph["node_data"]["train_mask"]
    _, maps = partition(tmp_path, "homo", num_parts=4, return_mapping=True, balance_edges=True)
    assert set(maps) == {"n", "e"} and maps["n"].dtype == np.int64      # plain arrays, as DGL
    np.testing.assert_array_equal(np.sort(maps["n"]), np.arange(600))
    np.testing.assert_array_equal(np.sort(maps["e"]), np.arange(4000))
    assert_restores(tmp_path / "out", graph)
    in_dir = chunked_input(tmp_path, graph)
    distpart(2, "verify", in_dir, tmp_path / "out" / "assignment", tmp_path / "out")
    # balance_ntypes as DGL's guide uses it: the train mask, one constraint per value.
    partition(tmp_path / "balanced", "homo", num_parts=4, balance_by="train_mask")
    trains = []
    for p in range(4):
        g, nfeat, *_ = load_partition(str(tmp_path / "balanced" / "out" / "metadata.json"), p)
        trains.append(int(nfeat["_N/train_mask"].sum()))
    assert sum(trains) == int(mask.sum())
    assert max(trains) / (sum(trains) / 4) <= 1.1, trains


def test_trainer_ids_follow_dgl(tmp_path: Path) -> None:
    graph = shop_graph()
    partition(tmp_path, num_parts=2, num_trainers_per_machine=2)
    out = tmp_path / "out"
    config = json.loads((out / "metadata.json").read_text())
    assert config["num_parts"] == 2 and config["part_method"] == "metis"
    distpart(1, "verify", "--quick", out)
    restored = restore_graph(out)
    node_trainer = {t: restored["node_feats"][(t, "trainer_id")] for t in graph["num_nodes"]}
    seen = set()
    for p in range(2):
        g, nfeat, efeat, *_ = load_partition(str(out / "metadata.json"), p)
        for t in graph["num_nodes"]:
            tid = nfeat[f"{t}/trainer_id"]
            assert tid.dtype == np.int64
            # Partition p holds trainers 2p and 2p + 1 (DGL: trainer // num_trainers_per_machine).
            assert ((tid // 2) == p).all(), (t, p, np.unique(tid))
            seen |= set(np.unique(tid).tolist())
    assert seen == {0, 1, 2, 3}
    desc = describe_graph(graph)
    for e, (_, dst) in desc.edges.items():
        # As DGL: an edge's trainer is its destination node's.
        np.testing.assert_array_equal(restored["edge_feats"][(e, "trainer_id")], node_trainer[e.split(":")[2]][dst])
    # The input graph's own features are all there, unchanged.
    for t, feats in desc.node_data.items():
        for name, values in feats.items():
            np.testing.assert_array_equal(restored["node_feats"][(t, name)], storable(values))


@pytest.mark.parametrize("num_parts, part_method, expect", [(1, "random", {0, 1}), (2, "random", None)])
def test_trainer_ids_only_where_dgl_writes_them(tmp_path: Path, num_parts: int, part_method: str, expect) -> None:
    partition(tmp_path, "homo", num_parts=num_parts, part_method=part_method, num_trainers_per_machine=2)
    nfeat = load_partition(str(tmp_path / "out" / "metadata.json"), 0)[1]
    if expect is None:   # DGL's random method ignores num_trainers_per_machine
        assert "_N/trainer_id" not in nfeat
    else:                # with one partition DGL runs METIS into the trainers whatever the method
        assert set(np.unique(nfeat["_N/trainer_id"]).tolist()) == expect


def test_rerun_replaces_output_and_refuses_foreign_folder(tmp_path: Path) -> None:
    partition(tmp_path, "homo", num_parts=4, part_method="random")
    partition(tmp_path, "homo", num_parts=2, part_method="random")
    assert json.loads((tmp_path / "out" / "metadata.json").read_text())["num_parts"] == 2
    assert not (tmp_path / "out" / "part3").exists()
    foreign = tmp_path / "foreign"
    (foreign / "out").mkdir(parents=True)
    (foreign / "out" / "metadata.json").write_text("{}")
    run, _ = partition(foreign, "homo", ok=False, num_parts=2)
    assert "was not written by distpart" in run.stderr
    assert (foreign / "out" / "metadata.json").read_text() == "{}"
    assert not (foreign / "out" / ".distpart-partition-graph-input").exists()


def test_graph_formats_as_dgl(tmp_path: Path) -> None:
    """graph_formats="csc" (DGL's argument): graph.dgl holds the CSC matrix only, same graph."""
    from distpart.partitions.dglformat import read_graph
    partition(tmp_path / "coo", "homo", num_parts=2, part_method="random")
    partition(tmp_path / "csc", "homo", num_parts=2, part_method="random", graph_formats="csc")
    for p in range(2):
        raw = (tmp_path / "csc" / "out" / f"part{p}" / "graph.dgl").read_bytes()
        unit = raw.index((0xDD2E60F0F6B4A127).to_bytes(8, "little"))
        assert int.from_bytes(raw[unit + 8:unit + 16], "little") == 4 | 1 << 32
        ours, coo = (read_graph(tmp_path / d / "out" / f"part{p}" / "graph.dgl") for d in ("csc", "coo"))
        np.testing.assert_array_equal(ours.src, coo.src)
        np.testing.assert_array_equal(ours.dst, coo.dst)
    distpart(1, "verify", "--quick", tmp_path / "csc" / "out")
    # Recorded as the command line records it: another choice is another output.
    options = json.loads((tmp_path / "csc" / "out" / "distpart-manifest.json").read_text())["options"]
    assert options["graph_formats"] == ["csc"]
    assert "graph_formats" not in json.loads((tmp_path / "coo" / "out" / "distpart-manifest.json").read_text())["options"]


def test_bad_arguments_and_mpiexec_are_refused(tmp_path: Path) -> None:
    run, _ = partition(tmp_path, "homo", ok=False, num_parts=2, num_hops=2)
    assert "num_hops=2: distpart builds 1-hop halos only" in run.stderr
    run, _ = partition(tmp_path, "homo", ok=False, num_parts=2, part_method="kway")
    assert "unknown partitioning method 'kway'" in run.stderr
    run, _ = partition(tmp_path, "homo", ok=False, num_parts=2, graph_formats=["csc", "dense"])
    assert "graph formats must be some of coo, csr, csc; got csc, dense" in run.stderr
    run, _ = partition(tmp_path, "homo", ok=False, num_parts=2, objtype="volume")
    assert "objtype must be 'cut' or 'vol', got 'volume'" in run.stderr
    run, _ = partition(tmp_path, "homo", ok=False, num_parts=2, store_eids=True)
    assert "['store_eids'] only apply with use_graphbolt=True" in run.stderr
    run, _ = partition(tmp_path, "homo", ok=False, num_parts=2, use_graphbolt=True, store_edges=True)
    assert "TypeError: partition_graph got unexpected keyword arguments ['store_edges']" in run.stderr
    if importlib.util.find_spec("dgl") is None:   # distpart's own environment: no DGL
        run, _ = partition(tmp_path, "homo", ok=False, num_parts=2, use_graphbolt=True)
        assert "use_graphbolt=True needs DGL and torch" in run.stderr
        assert "pip install 'distpart[graphbolt]'" in run.stderr
    assert not (tmp_path / "out").exists()   # all refused before anything is written
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    run = run_bounded(mpi_command(2, [HERE, tmp_path / "o", "homo", json.dumps({"num_parts": 2})], script=script),
                      mpi_env(), timeout=120, cwd=REPO)
    assert run.returncode != 0
    assert "partition_graph runs in one process, but this one is one of 2 MPI ranks" in run.output


def test_dgl_graph_is_described_as_dgl_sees_it(dgl_python: str, tmp_path: Path) -> None:
    """graph_description under real DGL: a DGLGraph built from the shop graph describes back to it."""
    graph = shop_graph()
    desc = describe_graph(graph)
    arrays = {}
    for e, (src, dst) in desc.edges.items():
        arrays[f"src/{e}"], arrays[f"dst/{e}"] = src, dst
    for t, feats in desc.node_data.items():
        for name, values in feats.items():
            arrays[f"ndata/{t}/{name}"] = values
    for e, feats in desc.edge_data.items():
        for name, values in feats.items():
            arrays[f"edata/{e}/{name}"] = values
    np.savez(tmp_path / "graph.npz", **arrays)
    (tmp_path / "counts.json").write_text(json.dumps(desc.num_nodes))
    script = r"""
import json, sys
import numpy as np, torch, dgl
sys.path.insert(0, sys.argv[1])
from distpart.api import graph_description
d = sys.argv[2]
arrays, counts = np.load(d + "/graph.npz"), json.load(open(d + "/counts.json"))
etypes = [k[4:] for k in arrays.files if k.startswith("src/")]
g = dgl.heterograph({tuple(e.split(":")): (torch.from_numpy(arrays["src/" + e]), torch.from_numpy(arrays["dst/" + e]))
                     for e in etypes}, num_nodes_dict=counts)
for k in arrays.files:
    kind, _, rest = k.partition("/")
    owner, _, name = rest.partition("/")
    if kind == "ndata":
        g.nodes[owner].data[name] = torch.from_numpy(arrays[k])
    elif kind == "edata":
        g.edges[tuple(owner.split(":"))].data[name] = torch.from_numpy(arrays[k])
desc = graph_description(g)
out = {"num_nodes": desc["num_nodes"], "etypes": list(desc["edges"]), "homogeneous": g.is_homogeneous}
flat = {}
for e, (s, t) in desc["edges"].items():
    flat["src/" + e], flat["dst/" + e] = s, t
for t, feats in desc["node_data"].items():
    for n, v in feats.items():
        flat["ndata/" + t + "/" + n] = v
for e, feats in desc["edge_data"].items():
    for n, v in feats.items():
        flat["edata/" + e + "/" + n] = v
np.savez(d + "/described.npz", **flat)
print(json.dumps(out))
"""
    run = run_bounded([dgl_python, "-c", script, REPO, tmp_path], dict(mpi_env(), DGLBACKEND="pytorch"),
                      timeout=300)
    assert run.returncode == 0, run.output
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    # DGL orders node and edge types by name; the description keeps DGL's order.
    assert seen["num_nodes"] == dict(sorted(desc.num_nodes.items()))
    assert seen["etypes"] == sorted(desc.edges, key=lambda e: tuple(e.split(":")))
    assert seen["homogeneous"] is False
    described = np.load(tmp_path / "described.npz")
    assert set(described.files) == set(arrays)
    for k in arrays:
        np.testing.assert_array_equal(described[k], arrays[k])
        assert described[k].dtype == arrays[k].dtype, k


DGL_SCRIPT = r"""
import sys
import numpy as np, torch, dgl
import distpart
out = sys.argv[1]
torch.manual_seed(0)
g = dgl.heterograph({("user", "buys", "item"): (torch.randint(0, 300, (2000,)), torch.randint(0, 120, (2000,))),
                     ("user", "follows", "user"): (torch.randint(0, 300, (1500,)), torch.randint(0, 300, (1500,))),
                     ("item", "in", "shop"): (torch.arange(120), torch.arange(120) % 4)},
                    num_nodes_dict={"user": 300, "item": 120, "shop": 4})
g.nodes["user"].data["feat"] = torch.randn(300, 8)
g.nodes["user"].data["train_mask"] = torch.rand(300) < 0.3
g.edges["buys"].data["w"] = torch.rand(2000)
nmap, emap = distpart.partition_graph(g, "shop", 2, out, return_mapping=True, num_trainers_per_machine=2,
                                      balance_ntypes={"user": g.nodes["user"].data["train_mask"].long()})
assert all(isinstance(v, torch.Tensor) and v.dtype == torch.int64 for v in [*nmap.values(), *emap.values()])
assert set(emap) == set(g.canonical_etypes) and "trainer_id" not in g.nodes["user"].data
parts = [dgl.distributed.load_partition(out + "/metadata.json", p) for p in range(2)]
for key, want, order in (("user/feat", g.nodes["user"].data["feat"], nmap["user"]),
                         ("user:buys:item/w", g.edges["buys"].data["w"], emap[("user", "buys", "item")])):
    feats = [p[1 if key.startswith("user/") else 2][key] for p in parts]
    got = torch.empty_like(want)
    got[order] = torch.cat(feats)
    assert torch.equal(got, want), key
for p, part in enumerate(parts):
    for key in ("user/trainer_id", "item/trainer_id", "shop/trainer_id", "user:buys:item/trainer_id"):
        tid = part[1 if key.count(":") == 0 else 2][key]
        assert tid.dtype == torch.int64 and bool(((tid // 2) == p).all()), (key, p)
print("dgl graph: ok")
"""


def dgl_run_env(dgl_python: str) -> Dict[str, str]:
    """The environment for running distpart in DGL's own Python; skips unless that Python
    holds distpart's run dependencies (scripts/setup-dgl.sh adds mpi4py, pyarrow and h5py)."""
    env = dict(mpi_env(), DGLBACKEND="pytorch",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    probe = run_bounded([dgl_python, "-c", "import mpi4py, pyarrow.parquet, h5py"], env, timeout=120)
    if probe.returncode != 0:
        pytest.skip(f"{dgl_python} lacks distpart's run dependencies (mpi4py, pyarrow, h5py): "
                    f"run scripts/setup-dgl.sh")
    return env


def test_partition_graph_of_a_real_dgl_graph(dgl_python: str, tmp_path: Path) -> None:
    """A DGLGraph, in DGL's own environment."""
    env = dgl_run_env(dgl_python)
    run = run_bounded([dgl_python, "-c", DGL_SCRIPT, tmp_path / "out"], env, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.output
    assert "dgl graph: ok" in run.stdout
    distpart(1, "verify", "--quick", tmp_path / "out")


GRAPHBOLT_SCRIPT = r"""
import sys
import torch, dgl
import distpart
torch.manual_seed(1)
g = dgl.heterograph({("user", "buys", "item"): (torch.randint(0, 300, (2000,)), torch.randint(0, 120, (2000,))),
                     ("user", "follows", "user"): (torch.randint(0, 300, (1500,)), torch.randint(0, 300, (1500,)))},
                    num_nodes_dict={"user": 300, "item": 120})
g.nodes["user"].data["feat"] = torch.randn(300, 4)
distpart.partition_graph(g, "gb", 2, sys.argv[1], use_graphbolt=True, store_eids=True, store_inner_node=True)
"""


def test_use_graphbolt_writes_what_dgls_converter_writes(dgl_python: str, tmp_path: Path) -> None:
    """use_graphbolt=True with DGL's converter keywords: each partition's GraphBolt graph is
    the one DGL's dgl_partition_to_graphbolt makes of the same partitions, and DGL loads it."""
    from test_graphbolt import assert_as_dgls_converter
    run = run_bounded([dgl_python, "-c", GRAPHBOLT_SCRIPT, tmp_path / "out"], dgl_run_env(dgl_python),
                      timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.output
    options = json.loads((tmp_path / "out" / "distpart-manifest.json").read_text())["options"]
    assert options["graphbolt"] == {"store_eids": True, "store_inner_node": True, "store_inner_edge": False}
    report = assert_as_dgls_converter(dgl_python, tmp_path / "out", tmp_path / "theirs", 2,
                                      ["--store-eids", "--store-inner-node"])
    assert report["homogeneous"] is False
    distpart(1, "verify", "--quick", tmp_path / "out")

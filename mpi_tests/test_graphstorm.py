"""GraphStorm 0.5.0.post1, unmodified, partitions through distpart's tools folder across two
hosts (issue 20, item 3).

GraphStorm's `python -m graphstorm.gpartition.dist_partition_graph ... --dgl-tool-path TOOLS
--partition-algorithm random` writes `OUT/partition_assignment/{<ntype>.txt,
partition_meta.json}` itself, then runs `python3 TOOLS/dispatch_data.py ... --out-dir
OUT/dist_graph --python-path <its interpreter> --save-orig-nids --save-orig-eids` with the
first `python3` on PATH and checks only its exit status. Afterwards it copies
`IN/raw_id_mappings` to `OUT/dist_graph/raw_id_mappings` and, when the input has GSProcessing's
`launch_arguments.json`, copies the GSProcessing config to `OUT/dist_graph/data_transform_new.json`
and rewrites the hard-negative edge features of every `part{i}/edge_feat.dgl` from original to
shuffled node IDs, through the concatenation of `part0..part{P-1}/orig_nids.dgl` (it finds P by
counting the entries of `dist_graph` whose names start with `part`).

Here: GraphStorm runs from the DGL environment (scripts/setup-dgl.sh installs it there) on
host 0 of the session's two network-namespace hosts (conftest.py `netns_pair`), with
`--dgl-tool-path "$(distpart tools-path)"`, an ip_config of the two hosts' addresses and
`--ssh-port 22`. Its `python3` is a system Python without site-packages (no numpy, no mpi4py),
as a job's PATH may give it; distpart reaches its ranks through `--python-path` (the DGL
environment, with this clone on PYTHONPATH as an install of distpart there would be). The
input is `write_gsprocessing_graph`'s (Parquet, list<float> columns, row_counts, feature files
cut apart from the structure files, `-rev` edge types), plus a hard-negative edge feature
(list<int64>, -1 padded) declared in a GSProcessing config with `launch_arguments.json`.

Checked: DGL itself loads every partition of `OUT/dist_graph` (mpi_tests/drivers/dgl_dump.py in
the DGL environment), and what it loads is the input: node and edge counts per type, every
edge's endpoints and every feature row through the original IDs, each node in the partition
GraphStorm's assignment gave it; GraphStorm's post-processing: the copied raw_id_mappings and
config, the hard negatives rewritten to shuffled IDs. Then GraphStorm's
`--partition-assignment-only` followed by our `dispatch_data.py` by hand (no `--python-path`:
the tools find the clone's virtualenv), checked by `distpart verify` against the input; and a
truncated feature file, which passes GraphStorm's assignment step and must fail its command
at dispatch, leaving no partition config.

Needs root (namespaces) and the DGL environment with GraphStorm; skipped otherwise, with the
message .ci/run turns into a failure.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from harness import REPO, distpart
from distpart.synthetic.gsprocessing import GSPROCESSING_METADATA, write_gsprocessing_graph
from netns import NetnsCluster

GRAPHSTORM = "graphstorm.gpartition.dist_partition_graph"
GRAPHSTORM_VERSION = "0.5.0.post1"
DUMP = Path(__file__).parent / "drivers" / "dgl_dump.py"
NUM_PARTS = 4
HARD_NEG = ("user:buys:item", "hard_neg", "item")      # edge type, feature, the type its IDs name
GSP_CONFIG = "gsprocessing_config.json"                # launch_arguments.json names it

# Parallel runs (scripts/test.sh, pytest-xdist): the tests on the session's two hosts share one worker.
pytestmark = pytest.mark.xdist_group("netns_pair")


@pytest.fixture(scope="module")
def graphstorm(dgl_python) -> str:
    """The DGL environment's Python, with GraphStorm installed there."""
    probe = subprocess.run([dgl_python, "-c", "import importlib.metadata as m; print(m.version('graphstorm'))"],
                           capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() != GRAPHSTORM_VERSION:
        # .ci/run looks for "DGL not installed" to fail instead of skipping.
        pytest.skip(f"DGL not installed with GraphStorm {GRAPHSTORM_VERSION} in {dgl_python}: "
                    "run scripts/setup-dgl.sh")
    return dgl_python


@pytest.fixture(scope="module")
def tools() -> Path:
    done = subprocess.run([sys.executable, "-m", "distpart", "tools-path"], capture_output=True, text=True,
                          timeout=60, check=True)
    folder = Path(done.stdout.strip())
    assert (folder / "dispatch_data.py").is_file(), done.stdout
    return folder


def add_hard_negatives(graph: Dict[str, Any]) -> np.ndarray:
    """A GSProcessing hard-negative feature on user:buys:item (3 item IDs per edge, -1 padded,
    one list<int64> column in 2 files), its GSProcessing config and launch_arguments.json."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    root = graph["metadata"].parent
    etype, name, ntype = HARD_NEG
    rng = np.random.default_rng(5)
    num_edges = len(graph["edges"][etype][0])
    values = rng.integers(0, graph["num_nodes"][ntype], (num_edges, 3), dtype=np.int64)
    values[rng.random(values.shape) < 0.2] = -1
    files, rows = [], []
    for k, rows_k in enumerate((slice(0, num_edges // 3), slice(num_edges // 3, None))):
        rel = f"edge_data/{etype}-{name}/parquet/part-{k:05d}-hn-c000.snappy.parquet"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(root / rel, "wb") as f:       # a path with ':' would be taken for a URI
            pq.write_table(pa.table({name: pa.array(list(values[rows_k]), pa.list_(pa.int64()))}), f)
        files.append(rel)
        rows.append(len(values[rows_k]))
    meta = json.loads(graph["metadata"].read_text())
    meta["edge_data"][etype][name] = {"format": {"name": "parquet", "delimiter": ""}, "data": files,
                                      "row_counts": rows}
    graph["metadata"].write_text(json.dumps(meta, indent=4) + "\n")
    src, rel, dst = etype.split(":")
    config = {"version": "gsprocessing-v1.0", "graph": {"nodes": [], "edges": [{
        "data": {"format": "parquet", "files": ["./edges/buys.parquet"]},
        "source": {"column": "src", "type": src}, "relation": {"type": rel}, "dest": {"column": "dst", "type": dst},
        "features": [{"column": name, "name": name,
                      "transformation": {"name": "edge_dst_hard_negative", "kwargs": {"separator": ";"}}}]}]}}
    (root / GSP_CONFIG.replace(".json", "_with_transformations.json")).write_text(json.dumps(config, indent=4))
    (root / "launch_arguments.json").write_text(json.dumps({"config_filename": GSP_CONFIG}))
    return values


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Dict[str, Any]:
    """'gsp': with hard negatives and launch_arguments.json; 'plain': the generator's alone
    (GraphStorm 0.5.0.post1 runs its hard-negative step even with --partition-assignment-only,
    which then fails on the missing partitions, so that flow gets an input without it)."""
    base = tmp_path_factory.mktemp("graphstorm")
    gsp = write_gsprocessing_graph(base / "gsp", seed=1)
    gsp["hard_neg"] = add_hard_negatives(gsp)
    plain = write_gsprocessing_graph(base / "plain", seed=2)
    return {"gsp": gsp, "plain": plain}


def job_env(c: NetnsCluster, tmp: Path) -> Dict[str, str]:
    """What GraphStorm's job sees: a `python3` without numpy and mpi4py first on PATH, this
    clone importable from the DGL environment, Open MPI kept off the dead second network."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    system_python = shutil.which("python3", path="/usr/bin:/bin") or sys._base_executable
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {system_python} -S "$@"\n')   # -S: no site-packages
    (bin_dir / "python3").chmod(0o755)
    env = dict(c.env)
    env.pop("VIRTUAL_ENV", None)
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", PYTHONPATH=str(REPO), OMP_NUM_THREADS="1",
               DISTPART_LAUNCH_ARGS=f"--interface {c.subnet}")
    return env


def ip_config(c: NetnsCluster, tmp: Path) -> Path:
    path = tmp / "ip_list.txt"
    path.write_text("".join(f"{h.address}\n" for h in c.hosts))
    return path


def graphstorm_command(python: str, graph: Dict[str, Any], out: Path, ips: Path, tools: Path,
                       num_parts: int = NUM_PARTS, *extra: str) -> List[str]:
    return [python, "-m", GRAPHSTORM, "--input-path", str(graph["metadata"].parent),
            "--metadata-filename", GSPROCESSING_METADATA, "--output-path", str(out), "--num-parts", str(num_parts),
            "--dgl-tool-path", str(tools), "--partition-algorithm", "random", "--ip-config", str(ips),
            "--ssh-port", "22", *extra]


def files_of(folder: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def dgl_view(python: str, config: Path, dump_dir: Path) -> List[Dict[str, np.ndarray]]:
    """What DGL's load_partition returns for every partition (drivers/dgl_dump.py, in the DGL env)."""
    run = subprocess.run([python, str(DUMP), str(config), str(dump_dir)], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert run.returncode == 0, run.stdout + run.stderr
    num_parts = json.loads(config.read_text())["num_parts"]
    return [dict(np.load(dump_dir / f"part{p}.npz")) for p in range(num_parts)]


def check_dgl_view(parts: List[Dict[str, np.ndarray]], graph: Dict[str, Any], assignment: Path) -> None:
    """DGL's view of the partitions is the input: counts, edges, features by original ID, and
    each node in the partition the assignment gave it. Hard negatives are checked apart."""
    ntypes, etypes = list(parts[0]["meta:ntypes"]), list(parts[0]["meta:etypes"])
    assert ntypes == sorted(graph["num_nodes"]) and etypes == list(graph["edges"])
    orig_nid = {t: np.concatenate([d[f"orig_nids:{t}"] for d in parts]) for t in ntypes}  # by per-type new ID
    orig_eid = {e: np.concatenate([d[f"orig_eids:{e}"] for d in parts]) for e in etypes}
    for t in ntypes:
        assert np.array_equal(np.sort(orig_nid[t]), np.arange(graph["num_nodes"][t])), t
        owned = [(d["ndata:_TYPE"] == ntypes.index(t)) & (d["ndata:inner_node"] == 1) for d in parts]
        assert sum(int(o.sum()) for o in owned) == graph["num_nodes"][t]
    for e in etypes:
        assert np.array_equal(np.sort(orig_eid[e]), np.arange(len(graph["edges"][e][0]))), e
        assert sum(int((d["edata:_TYPE"] == etypes.index(e)).sum()) for d in parts) == len(graph["edges"][e][0])
    assigned = {t: np.loadtxt(assignment / f"{t}.txt", dtype=np.int64, ndmin=1) for t in ntypes}
    hard_neg = f"{HARD_NEG[0]}/{HARD_NEG[1]}"
    for p, d in enumerate(parts):
        for t in ntypes:
            assert (assigned[t][d[f"orig_nids:{t}"]] == p).all(), (p, t)
        for (t, name), want in graph["node_feats"].items():
            got = d[f"nfeat:{t}/{name}"]
            assert got.shape[1:] == want.shape[1:], (t, name, got.shape)
            np.testing.assert_array_equal(got, want[d[f"orig_nids:{t}"]])
        want_efeats = {f"{e}/{name}": v for (e, name), v in graph["edge_feats"].items()}
        extra = {hard_neg} if "hard_neg" in graph else set()
        assert {k[6:] for k in d if k.startswith("efeat:")} == set(want_efeats) | extra
        for key, want in want_efeats.items():
            e = key.split("/")[0]
            got = d[f"efeat:{key}"]
            assert got.shape[1:] == want.shape[1:], (key, got.shape)
            np.testing.assert_array_equal(got, want[d[f"orig_eids:{e}"]])
        # Every edge: its type, and its endpoints' original IDs are the input's for its original ID.
        src_t, src_new = d["book:per_ntype_type"][d["src"]], d["book:per_ntype_id"][d["src"]]
        dst_t, dst_new = d["book:per_ntype_type"][d["dst"]], d["book:per_ntype_id"][d["dst"]]
        for k, e in enumerate(etypes):
            sel = d["book:per_etype_type"] == k
            s, _, t = e.split(":")
            assert (src_t[sel] == ntypes.index(s)).all() and (dst_t[sel] == ntypes.index(t)).all(), e
            orig = orig_eid[e][d["book:per_etype_id"][sel]]
            np.testing.assert_array_equal(orig_nid[s][src_new[sel]], graph["edges"][e][0][orig])
            np.testing.assert_array_equal(orig_nid[t][dst_new[sel]], graph["edges"][e][1][orig])


def test_graphstorm_partitions_on_two_hosts_with_distpart_tools(graphstorm, tools, inputs, netns_pair, tmp_path):
    c = netns_pair
    h0, h1 = c.hosts
    graph = inputs["gsp"]
    inp, out = graph["metadata"].parent, tmp_path / "out"
    before = len(h1.accepted_logins())
    run = h0.run(graphstorm_command(graphstorm, graph, out, ip_config(c, tmp_path), tools),
                 env=job_env(c, tmp_path), timeout=240)
    assert run.returncode == 0, run.output
    # GraphStorm's own steps and ours, in its log.
    assert "Partition assignment with algorithm 'random'" in run.stderr
    assert f"dispatch_data.py: distpart launch --ip-config {tmp_path / 'ip_list.txt'} --ranks-per-host 2" in run.stderr
    assert f"dispatch: {NUM_PARTS} ranks on 2 hosts ({h0.name} x2, {h1.name} x2)" in run.stderr
    assert f"-m distpart dispatch {graph['metadata']} {out / 'partition_assignment'} {out / 'dist_graph'}" in run.stderr
    assert len(h1.accepted_logins()) > before             # ranks really ran on host 1
    assert "Copying raw_id_mappings to dist_graph" in run.stderr

    # The output tree: GraphStorm's assignment, DGL's partitions, GraphStorm's copies.
    assert sorted(os.listdir(out)) == ["dist_graph", "partition_assignment"]
    assignment, dist = out / "partition_assignment", out / "dist_graph"
    assert sorted(os.listdir(assignment)) == ["item.txt", "partition_meta.json", "user.txt"]
    assert json.loads((assignment / "partition_meta.json").read_text())["num_parts"] == NUM_PARTS
    assert sorted(n for n in os.listdir(dist) if n.startswith("part")) == [f"part{p}" for p in range(NUM_PARTS)]
    for p in range(NUM_PARTS):
        assert {"graph.dgl", "node_feat.dgl", "edge_feat.dgl", "orig_nids.dgl", "orig_eids.dgl"} <= \
            set(os.listdir(dist / f"part{p}"))
    assert files_of(dist / "raw_id_mappings") == files_of(inp / "raw_id_mappings")
    assert (dist / "data_transform_new.json").read_bytes() == \
        (inp / GSP_CONFIG.replace(".json", "_with_transformations.json")).read_bytes()
    config = json.loads((dist / "metadata.json").read_text())
    assert config["num_parts"] == NUM_PARTS and config["graph_name"] == graph["graph_name"]
    assert config["num_nodes"] == sum(graph["num_nodes"].values())
    assert config["num_edges"] == sum(len(s) for s, _ in graph["edges"].values())

    # DGL loads it, and what it loads is the input.
    parts = dgl_view(graphstorm, dist / "metadata.json", tmp_path / "dump")
    check_dgl_view(parts, graph, assignment)

    # GraphStorm's hard-negative step rewrote original item IDs to shuffled per-type IDs:
    # through the concatenated orig_nids, each shuffled ID names the input's original ID.
    etype, name, ntype = HARD_NEG
    item_orig = np.concatenate([d[f"orig_nids:{ntype}"] for d in parts])
    got = np.concatenate([d[f"efeat:{etype}/{name}"] for d in parts])
    want = graph["hard_neg"][np.concatenate([d[f"orig_eids:{etype}"] for d in parts])]
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got == -1, want == -1)
    np.testing.assert_array_equal(item_orig[got[got >= 0]], want[want >= 0])
    assert not np.array_equal(got, want)                  # rewritten, not left as read


def test_graphstorm_assignment_only_then_dispatch_data_by_hand(graphstorm, tools, inputs, netns_pair, tmp_path):
    c = netns_pair
    h0, h1 = c.hosts
    graph = inputs["plain"]
    inp, out = graph["metadata"].parent, tmp_path / "out"
    env, ips = job_env(c, tmp_path), ip_config(c, tmp_path)
    run = h0.run(graphstorm_command(graphstorm, graph, out, ips, tools, NUM_PARTS, "--partition-assignment-only"),
                 env=env, timeout=180)
    assert run.returncode == 0, run.output
    assert "dispatch_data.py" not in run.output
    assignment, dist = out / "partition_assignment", out / "dist_graph"
    assert sorted(os.listdir(assignment)) == ["item.txt", "partition_meta.json", "user.txt"]
    assert sorted(os.listdir(dist)) == ["raw_id_mappings"]   # GraphStorm copies it in any case

    # DGL's guide command, by hand, with the python3 on PATH (no numpy) and no --python-path.
    by_hand = h0.run(["python3", tools / "dispatch_data.py", "--in-dir", inp, "--metadata-filename",
                      GSPROCESSING_METADATA, "--partitions-dir", assignment, "--out-dir", dist, "--ip-config", ips,
                      "--ssh-port", "22", "--save-orig-nids", "--save-orig-eids"], env=env, timeout=180)
    assert by_hand.returncode == 0, by_hand.output
    assert f"dispatch: {NUM_PARTS} ranks on 2 hosts ({h0.name} x2, {h1.name} x2)" in by_hand.stderr
    assert f"{REPO / '.venv' / 'bin' / 'python3'} -m distpart dispatch" in by_hand.stderr
    assert sorted(n for n in os.listdir(dist) if n.startswith("part")) == [f"part{p}" for p in range(NUM_PARTS)]
    assert files_of(dist / "raw_id_mappings") == files_of(inp / "raw_id_mappings")   # left as GraphStorm put it
    done = distpart(2, "verify", graph["metadata"], assignment, dist)
    assert f"verify: OK ({NUM_PARTS} partitions" in done.stdout


def test_graphstorm_fails_at_dispatch_on_a_corrupt_input(graphstorm, tools, inputs, netns_pair, tmp_path):
    c = netns_pair
    inp = tmp_path / "in"
    shutil.copytree(inputs["plain"]["metadata"].parent, inp)
    graph = dict(inputs["plain"], metadata=inp / GSPROCESSING_METADATA)
    meta = json.loads(graph["metadata"].read_text())
    broken = inp / meta["node_data"]["user"]["feat"]["data"][1]
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])   # footer gone
    out = tmp_path / "out"
    run = c.hosts[0].run(graphstorm_command(graphstorm, graph, out, ip_config(c, tmp_path), tools, 2),
                         env=job_env(c, tmp_path), timeout=180)
    assert run.returncode != 0, run.output
    assert "Building DistDGL graph failed" in run.stderr          # GraphStorm saw dispatch_data.py fail
    assert "dispatch_data.py" in run.stderr and "returned non-zero exit status 2" in run.stderr   # distpart's refusal
    assert broken.name in run.stderr                              # distpart named the file
    assert sorted(os.listdir(out / "partition_assignment")) == ["item.txt", "partition_meta.json", "user.txt"]
    dist = out / "dist_graph"
    assert not (dist / "metadata.json").exists()
    assert not dist.exists() or not any(n.startswith("part") for n in os.listdir(dist))

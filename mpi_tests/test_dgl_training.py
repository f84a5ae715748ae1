"""Real distributed training on distpart's output: DGL servers and trainers started as DGL's
launcher starts them, one machine per partition, for the DGL-format and the GraphBolt output.

The input is a small homogeneous graph in DGL's chunked format (400 nodes, 2,400 edges; a
16-wide float feature, a label that is a function of it, a train mask). distpart partitions it
into 2 partitions with `--graphbolt` (under the DGL environment's Python, which has torch).

Each partition gets a machine, as in a real job (DGL's ip_config has one line per machine,
which the launcher ssh-es to): a network namespace with its own address, so that DGL's clients
find their machine (DGL matches ip_config addresses against the machine's interfaces: with
every line 127.0.0.1 every trainer would take itself for machine 0) and a private /dev/shm,
which DGL's servers share with their local trainers under names that do not say which
partition. On each, mpi_tests/drivers/dgl_machine.py starts the server and the trainer with
the launcher's environment variables and `torch.distributed.run`; the trainers
(drivers/dgl_train.py) check the DistGraph against the input (counts, every feature row,
every sampled in-neighbour and edge ID) and train a 2-layer GraphSAGE with
DistributedDataParallel; the loss must go down. The losses are printed (pytest -s, or -rP).

Needs root (namespaces) and the DGL environment; skipped, saying why, otherwise. Every
process runs inside the test's namespaces and is killed with them, on failure too; each
machine has a timeout, and so has the whole job.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from distpart import load_orig_ids
from harness import dgl_env, distpart_dgl
from dgl_job import DRIVERS, run_machines, write_ip_config, write_job

NUM_NODES, NUM_EDGES, FEAT_DIM, CLASSES, TRAIN = 400, 2400, 16, 4, 240
JOB_TIMEOUT = 240
SERVER_PORT, MASTER_PORT = 30050, 29500   # free: the machines are network namespaces of their own

# Parallel runs (scripts/test.sh, pytest-xdist): the tests on the session's two hosts share one worker.
pytestmark = pytest.mark.xdist_group("netns_pair")


def write_input(folder: Path) -> Dict[str, np.ndarray]:
    """The chunked input graph (two chunks of everything); returns its arrays."""
    rng = np.random.default_rng(11)
    feat = rng.standard_normal((NUM_NODES, FEAT_DIM)).astype(np.float32)
    label = feat[:, :CLASSES].argmax(axis=1).astype(np.int64)   # learnable from the features
    train_mask = np.zeros(NUM_NODES, dtype=bool)
    train_mask[rng.choice(NUM_NODES, TRAIN, replace=False)] = True
    src = rng.integers(0, NUM_NODES, NUM_EDGES)
    dst = rng.integers(0, NUM_NODES, NUM_EDGES)
    (folder / "nodes").mkdir(parents=True)
    half, ehalf = NUM_NODES // 2, NUM_EDGES // 2
    node_data = {}
    for name, values in (("feat", feat), ("label", label), ("train_mask", train_mask)):
        files = []
        for c, rows in enumerate((slice(0, half), slice(half, None))):
            np.save(folder / "nodes" / f"{name}-{c}.npy", values[rows])
            files.append(f"nodes/{name}-{c}.npy")
        node_data[name] = {"format": {"name": "numpy"}, "data": files}
    edge_files = []
    for c, rows in enumerate((slice(0, ehalf), slice(ehalf, None))):
        np.save(folder / "nodes" / f"edges-{c}.npy", np.stack([src[rows], dst[rows]], axis=1))
        edge_files.append(f"nodes/edges-{c}.npy")
    meta = {"graph_name": "trainee", "node_type": ["_N"], "num_nodes_per_chunk": [[half, NUM_NODES - half]],
            "edge_type": ["_N:_E:_N"], "num_edges_per_chunk": [[ehalf, NUM_EDGES - ehalf]],
            "edges": {"_N:_E:_N": {"format": {"name": "numpy"}, "data": edge_files}},
            "node_data": {"_N": node_data}, "edge_data": {}}
    (folder / "metadata.json").write_text(json.dumps(meta, indent=1))
    return {"feat": feat, "label": label, "train_mask": train_mask.astype(np.uint8), "src": src, "dst": dst}


@pytest.fixture(scope="module")
def partitioned(dgl_python, tmp_path_factory):  # noqa: F811
    """The input, partitioned in 2 with graph.dgl and the GraphBolt graph, and the checks file."""
    base = tmp_path_factory.mktemp("train")
    graph = write_input(base / "input")
    out = base / "parts"
    distpart_dgl(dgl_python, 2, "pipeline", base / "input", out, "--num-parts", 2, "--graphbolt")
    config = out / "metadata.json"
    new2orig = np.concatenate([load_orig_ids(str(config), p)[0]["_N"] for p in range(2)])
    e_new2orig = np.concatenate([load_orig_ids(str(config), p)[1]["_N:_E:_N"] for p in range(2)])
    np.savez(base / "checks.npz", new2orig=new2orig, e_new2orig=e_new2orig,
             **{f"input_{k}": v for k, v in graph.items()})
    return config, base / "checks.npz"


@pytest.fixture
def machines(netns_pair):
    """The session's two hosts (conftest.py); training uses eth0 only (GLOO_SOCKET_IFNAME), the
    dead second network of test_netns does not disturb it."""
    return netns_pair


def _run_job(cluster, dgl_python: str, config: Path, checks: Path, work: Path, graphbolt: bool) -> List[dict]:
    """Start every machine's server and trainer (dgl_job.py); wait for all; return the trainers' reports."""
    work.mkdir()
    ip_config = write_ip_config(cluster, work, SERVER_PORT)
    report = work / "report.json"
    job = write_job(cluster, work, python=dgl_python, script=str(DRIVERS / "dgl_train.py"),
                    script_args=["--ip-config", ip_config, "--graph-name", "trainee", "--checks", checks,
                                 "--report", report, *(["--graphbolt"] if graphbolt else [])],
                    ip_config=ip_config, part_config=config, master_port=MASTER_PORT, timeout=JOB_TIMEOUT - 20,
                    extra_env={"PYTHONPATH": dgl_env()["PYTHONPATH"]})
    outcome = run_machines(cluster, dgl_python, job, work, JOB_TIMEOUT, dgl_env())
    reports = [json.loads(path.read_text()) for path in sorted(work.glob("report.json.*"))]
    # A trainer's own error first (the launcher's traceback around it says little).
    output = "\n".join([r["error"] for r in reports if not r["ok"]] + [
        f"--- machine {i}\n" + outcome.log_tail(i) for i in range(len(outcome.logs))])
    assert all(code == 0 for code in outcome.returncodes), f"exit codes {outcome.returncodes}\n{output}"
    assert len(reports) == len(cluster.hosts) and all(r["ok"] for r in reports), output
    return reports


@pytest.mark.parametrize("graphbolt", [False, True], ids=["dgl-format", "graphbolt"])
def test_distributed_training_on_distpart_partitions(machines, dgl_python, partitioned, tmp_path,  # noqa: F811
                                                     graphbolt):
    config, checks = partitioned
    reports = _run_job(machines, dgl_python, config, checks, tmp_path / "job", graphbolt)
    # Each trainer found its own machine's partition, as on a real cluster.
    assert sorted(r["machine_partition"] for r in reports) == [0, 1]
    # The servers loaded what was asked: graph.dgl, or fused_csc_sampling_graph.pt.
    assert {r["local_partition"] for r in reports} == {"FusedCSCSamplingGraph" if graphbolt else "DGLGraph"}
    for r in reports:
        c = r["checks"]
        assert (c["nodes"], c["edges"]) == (NUM_NODES, NUM_EDGES)
        assert c["sampled_edges"] > 0 and c["fanout3_edges"] > 0
        # GraphBolt serves edge IDs only with --store-eids, which this output was made without.
        assert (c["sampled_eids_checked"] == 0) if graphbolt else (c["sampled_eids_checked"] == c["sampled_edges"])
        losses = r["losses"]
        print(f"{'graphbolt' if graphbolt else 'dgl-format'} trainer {r['rank']} "
              f"({len(losses)} steps, {r['train_seconds']} s): losses {[round(x, 4) for x in losses]}")
        assert len(losses) >= 10
        first, last = np.mean(losses[:3]), np.mean(losses[-3:])
        assert last < 0.7 * first, f"loss did not go down: {losses}"

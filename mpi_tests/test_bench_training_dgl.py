"""The training benchmark (benchmarks/bench_training.py) end to end on a tiny graph: what
test_dgl_training.py does not reach. A heterogeneous DistGraph (RMAT with 2 node types and 3
edge types) on hosts built without sshd, partitioned by distpart's pipeline from the project's
venv, trained with the benchmark's own trainer (R-GCN-style model, counting per batch, the
interface counters) and summed into a row; the moved seeds the trainers count must be the
ones `distpart report` predicts from DGL's even split, every count must add up, and nothing
the benchmark made may be left behind.

Needs root (namespaces) and the DGL environment; skipped, saying why, otherwise.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from netns import namespaces, skip_reason

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

pytestmark = pytest.mark.xdist_group("serial")


def test_training_benchmark_on_a_tiny_graph(dgl_python, tmp_path):
    reason = skip_reason(sshd=False)
    if reason:
        pytest.skip(reason)
    sys.path.insert(0, str(BENCHMARKS))
    import bench_training
    out = tmp_path / "training.json"
    before = set(namespaces())
    # Types balanced, the train mask not: the BFS-ordered mask stays together, so seeds move.
    code = bench_training.main(["--graphs", "rmat-3k", "--parts", "2", "--row", "ml=multilevel --seed 2",
                                "--balance=--balance-ntypes --no-balance-edges", "--epochs", "2", "--batch-size", "50",
                                "--feat-dim", "8", "--dgl-python", dgl_python, "--work-dir", str(tmp_path / "work"),
                                "--train-timeout", "150", "--timeout", "120", "--json", str(out)])
    result = json.loads(out.read_text())
    assert code == 0, [(r["label"], r["status"], r.get("error")) for r in result["rows"]]
    row = result["rows"][0]
    assert row["flags"] == ["--seed", "2"] and "--method multilevel --seed 2 " in row["command"]
    t, p = row["training"], row["partition"]
    assert t["trainers"] == 2 and t["epochs"] == 2
    # The trainers' moved seeds are the report's: DGL's even split, as distpart predicts it.
    assert t["moved_seeds"] == p["moved_seeds"] > 0
    assert t["train_nodes"] == p["train_nodes"] > 0
    for epoch in t["per_epoch"]:
        assert epoch["input_rows"] == epoch["remote_rows"] + epoch["local_rows"]
        assert sum(epoch["remote_rows_by_type"].values()) == epoch["remote_rows"] > 0
        assert epoch["seeds"] == p["train_nodes"]            # every training node once per epoch
        assert epoch["tx_bytes"] > 0 and epoch["rx_bytes"] > 0
        assert 0 < epoch["remote_sampling_requests"] <= 2 * epoch["batches"]   # 2 layers, 1 other machine
    assert row["step1"]["wall_s"] > 0 and row["checked"] == {"ntype:user": 1.05, "ntype:item": 1.05} and row["over"] == {}
    # Partitions removed (--keep-outputs not given); the machines and their links are gone.
    assert not list((tmp_path / "work" / "training").rglob("metadata.json"))
    assert set(namespaces()) <= before

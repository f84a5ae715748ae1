"""The training benchmark's pure parts (benchmarks/bench_training.py, benchmarks/training/,
benchmarks/training_tables.py), without DGL or root: what a trainer counts per batch and how
epochs and trainers add up, the interface counters, row specs and balance flags, the
constraints checked, the tables, --update's merge, and the graph copy with features."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from training import counts as C  # noqa: E402
from training import rows as R  # noqa: E402
import training_tables as T  # noqa: E402

NET_DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0
  eth0: 5000000    4000    0    0    0     0          0         0  7000000    3000    0    0    0     0       0          0
"""


# ----------------------------------------------------------------------------- counts


def test_batch_counts_remote_rows_and_requests():
    # Trainer of partition 1; input nodes of two types, two layers of seeds, the batch's seeds.
    inputs = {"a": np.array([1, 1, 0, 2, 2]), "b": np.array([1, 3]), "c": np.array([], dtype=np.int64)}
    layers = [[np.array([1, 0]), np.array([1])], [np.array([1, 1]), np.array([], dtype=np.int64)]]
    c = C.batch_counts(inputs, layers, np.array([1, 1]), own=1)
    assert (c["input_rows"], c["remote_rows"], c["local_rows"]) == (7, 4, 3)
    assert c["remote_rows_by_type"] == {"a": 3, "b": 1, "c": 0}
    assert c["remote_sampling_requests"] == 1          # layer 0 asks partition 0; layer 1 nobody
    assert c["remote_feature_requests"] == 2 + 1       # a: partitions 0 and 2; b: 3; c: no pull; labels: local
    assert (c["batches"], c["seeds"]) == (1, 2)


def test_add_counts_sums_fields_and_types():
    total: dict = {}
    C.add_counts(total, {"batches": 1, "remote_rows": 3, "remote_rows_by_type": {"a": 3}})
    C.add_counts(total, {"batches": 1, "remote_rows": 2, "remote_rows_by_type": {"a": 1, "b": 1}})
    assert total["batches"] == 2 and total["remote_rows"] == 5 and total["local_rows"] == 0
    assert total["remote_rows_by_type"] == {"a": 4, "b": 1}


def test_net_dev_counters():
    got = C.parse_net_dev(NET_DEV, "eth0")
    assert got == {"rx_bytes": 5000000, "rx_packets": 4000, "tx_bytes": 7000000, "tx_packets": 3000}
    later = dict(got, tx_bytes=got["tx_bytes"] + 10, rx_packets=got["rx_packets"] + 1)
    assert C.net_delta(got, later) == {"rx_bytes": 0, "rx_packets": 1, "tx_bytes": 10, "tx_packets": 0}
    with pytest.raises(ValueError, match="eth1"):
        C.parse_net_dev(NET_DEV, "eth1")


def _epoch(remote, local, tx, seconds=1.0, loss=1.0):
    return {"batches": 2, "seeds": 10, "input_rows": remote + local, "remote_rows": remote, "local_rows": local,
            "remote_rows_by_type": {"a": remote}, "remote_sampling_requests": 4, "remote_feature_requests": 6,
            "rx_bytes": tx, "rx_packets": 1, "tx_bytes": tx, "tx_packets": 2, "seconds": seconds, "mean_loss": loss}


def test_training_summary_over_trainers_and_epochs():
    reports = [{"rank": 0, "train_nodes": 10, "moved_seeds": 1, "epochs": [_epoch(100, 50, 1000), _epoch(80, 70, 900)]},
               {"rank": 1, "train_nodes": 10, "moved_seeds": 2, "epochs": [_epoch(20, 5, 500, 3.0), _epoch(40, 5, 700)]}]
    s = C.training_summary(reports)
    assert (s["trainers"], s["epochs"], s["train_nodes"], s["moved_seeds"]) == (2, 2, 20, 3)
    assert [e["remote_rows"] for e in s["per_epoch"]] == [120, 120]
    assert [e["max_trainer_remote_rows"] for e in s["per_epoch"]] == [100, 80]
    assert s["per_epoch"][0]["seconds"] == 3.0 and s["per_epoch"][0]["remote_rows_by_type"] == {"a": 120}
    assert s["remote_rows_per_epoch"] == 120 and s["local_rows_per_epoch"] == (55 + 75) / 2
    assert s["tx_bytes_per_epoch"] == (1500 + 1600) / 2 and s["batches_per_epoch"] == 4
    assert C.training_summary([])["epochs"] == 0


# ----------------------------------------------------------------------------- rows


def test_row_specs():
    assert R.parse_row("parmetis") == R.RowSpec("parmetis", "parmetis", ())
    spec = R.parse_row("multilevel --objective fetch --fanouts 5,10")
    assert spec.label == "multilevel --objective fetch --fanouts 5,10" and spec.method == "multilevel"
    info = {"train_mask": "user/train_mask"}
    assert spec.argv(info) == ["--method", "multilevel", "--objective", "fetch", "--fanouts", "5,10"]
    # The graph's masks fill {train_mask} in, as in --balance; the label keeps the spec as given.
    fetch = R.parse_row(R.DEFAULT_ROWS[-1])
    assert fetch.label == "fetch" and fetch.argv({**info, "fanouts": "5,10", "batch_size": 1000}) == [
        "--method", "multilevel", "--objective", "fetch", "--train-mask", "user/train_mask", "--fanouts", "5,10",
        "--batch-size", "1000"]
    named = R.parse_row("fetch=multilevel --objective fetch")
    assert (named.label, named.method, named.flags) == ("fetch", "multilevel", ("--objective", "fetch"))
    assert R.parse_row("'ml 2'=multilevel --vcycles 2").label == "ml 2"
    assert "/" not in R.parse_row("a/b=random").slug
    # `default` names no method: the row is what a user gets who gives no --method.
    assert R.parse_row("default").argv(info) == [] and R.parse_row("default --seed 2").argv(info) == ["--seed", "2"]
    for bad in ("", "--method parmetis", "x="):
        with pytest.raises(ValueError):
            R.parse_row(bad)
    with pytest.raises(ValueError, match="labelled 'random'"):
        R.parse_rows(["random", "random"])


def test_balance_flags_and_checked_constraints():
    info = {"train_mask": "user/train_mask", "sparse_train_mask": "user/sparse_train_mask"}
    flags = R.balance_flags(R.DEFAULT_BALANCE, info)
    assert flags == ["--balance-ntypes", "--no-balance-edges", "--balance-feature", "user/train_mask"]
    assert R.balance_label(flags) == "types + user/train_mask"
    assert R.checked_constraints(flags, ["user", "item"], 1.05) == {
        "ntype:user": 1.05, "ntype:item": 1.05, "feature:user/train_mask": 1.05}
    # What the flags leave to the method's defaults is said, and not checked.
    assert R.balance_label([]) == "default types + default edges"
    assert R.checked_constraints([], ["user", "item"], 1.05) == {}
    assert R.checked_constraints(["--no-balance-ntypes"], ["a"], 1.03) == {"nodes": 1.03}
    # Edges at their own cap; per type (with node types) they are not in the report.
    assert R.checked_constraints(["--no-balance-ntypes", "--balance-edges", "1.5"], ["a"], 1.05) == {
        "nodes": 1.05, "edges": 1.5}
    assert R.checked_constraints(["--no-balance-ntypes", "--balance-edges"], ["a"], 1.05)["edges"] == 1.05
    assert R.balance_label(["--balance-ntypes", "--balance-edges=1.5"]) == "types + edges 1.5"
    assert R.checked_constraints(["--balance-ntypes", "--balance-edges"], ["a", "b"], 1.05) == {
        "ntype:a": 1.05, "ntype:b": 1.05}
    assert R.report_flags(flags + ["--balance-feature=user/sparse_train_mask"], "user/train_mask") == [
        "--train-mask", "user/train_mask", "--balance-feature", "user/sparse_train_mask"]


def test_over_limit():
    imb = {"ntype:a": 1.05, "ntype:b": 1.0512, "feature:a/m": 1.2, "nodes": 9.0, "edges": 1.4}
    checked = {"ntype:a": 1.05, "ntype:b": 1.05, "feature:a/m": 1.05, "feature:a/x": 1.05, "edges": 1.5}
    assert list(R.over_limit(imb, checked).items()) == [("feature:a/m", 1.2), ("ntype:b", 1.0512),
                                                        ("feature:a/x", None)]
    assert R.over_limit(imb, {"ntype:a": 1.05}) == {}


# ----------------------------------------------------------------------------- tables and merge


def _row(graph, label, remote, status="ok"):
    row = {"graph": graph, "label": label, "balance_label": "types + a/m", "status": status,
           "step1": {"wall_s": 2.345, "peak_rss_mb": 300},
           "partition": {"cut_pct": 12.5, "halo_total": 1000, "halo_max": 400,
                         "imbalance": {"nodes": 1.01, "ntype:a": 1.02, "ntype:b": 1.03, "edges": 2.0,
                                       "feature:a/m": 1.04}},
           "over": {}}
    if remote is not None:
        row["training"] = {"remote_rows_per_epoch": remote, "local_rows_per_epoch": 10.0, "tx_bytes_per_epoch": 2.5e6,
                           "moved_seeds": 7, "remote_sampling_requests_per_epoch": 12.0}
    else:
        row["error"] = "machine 1: Failed to map shared memory"
    return row


def test_table_cells_ratio_and_failures():
    rows = [_row("g", "parmetis", 2000.0), _row("g", "multilevel", 1400.0), _row("g", "random", None, "training failed"),
            _row("h", "multilevel", 5.0)]
    table = T.cells(rows, "parmetis")
    assert list(table[0])[:5] == ["graph", "method", "balance", "remote rows/epoch", "vs parmetis"]
    assert table[0]["vs parmetis"] == "1.00x" and table[1]["vs parmetis"] == "0.70x"
    assert table[1]["remote rows/epoch"] == "1,400" and table[1]["MB/epoch"] == "2.5"
    assert table[1]["imb types"] == "1.020/1.030" and table[1]["imb train"] == "1.040"
    assert table[1]["Step 1 s"] == "2.3" and table[1]["over ub"] == "-"
    assert table[2]["remote rows/epoch"] == "" and "Failed to map shared memory" in table[2]["status"]
    assert table[3]["vs parmetis"] == ""                   # no baseline on that graph
    md = T.markdown(rows, "parmetis").splitlines()
    assert len(md) == 2 + len(rows) and md[0].startswith("| graph | method |")


def test_document_and_merge():
    import bench_training as B
    settings = {"parts": 4, "ranks": 2, "seed": 1, "imbalance": 1.05, "balance": R.DEFAULT_BALANCE,
                "baseline": "parmetis", "fanouts": "5,10", "batch_size": 1000, "epochs": 2, "feat_dim": 64,
                "hidden": 16, "dgl_version": "2.1.0", "verify": False}
    old = {"command": "python benchmarks/bench_training.py", "settings": settings, "wall_s": 60.0,
           "graphs": {"g": {"source": "s", "nodes": 10, "edges": 20, "train_mask": "a/m", "train_nodes": 2}},
           "rows": [_row("g", "parmetis", 2000.0), _row("g", "multilevel", 1500.0)]}
    new = {"command": "python benchmarks/bench_training.py --row x", "settings": settings, "wall_s": 30.0,
           "graphs": {"g": old["graphs"]["g"]}, "rows": [_row("g", "multilevel", 1000.0), _row("g", "x", 900.0)]}
    both = B.merged(old, new)
    assert [(r["label"], r["training"]["remote_rows_per_epoch"]) for r in both["rows"]] == [
        ("parmetis", 2000.0), ("multilevel", 1000.0), ("x", 900.0)]
    assert both["wall_s"] == 90.0 and len(both["commands"]) == 2
    with pytest.raises(SystemExit, match="fanouts"):
        B.merged(old, {**new, "settings": {**settings, "fanouts": "10,25"}})
    text = T.document([both])
    assert "| g | multilevel |" in text and "0.50x" in text and "```bash" in text


# ----------------------------------------------------------------------------- the graph copy


def test_with_features_adds_feat_and_label(tmp_path):
    from distpart import write_graph
    from distpart.synthetic import read_whole_graph
    from training.features import CLASSES, with_features
    base = tmp_path / "graphs" / "tiny"
    write_graph({"num_nodes": {"a": 30, "b": 20},
                 "edges": {"a:ab:b": (np.arange(30) % 20, np.arange(30) % 20)},
                 "node_data": {"a": {"train_mask": np.arange(30) % 3 == 0}}}, base, num_chunks=2,
                edge_format="numpy")
    (base / "graph_info.json").write_text(json.dumps({"train_mask": "a/train_mask"}))
    folder = with_features(base, dim=8, seed=3)
    ref = read_whole_graph(folder / "metadata.json")
    feat_a, feat_b = ref["node_feats"][("a", "feat")], ref["node_feats"][("b", "feat")]
    assert feat_a.shape == (30, 8) and feat_b.shape == (20, 8) and feat_a.dtype == np.float32
    label = ref["node_feats"][("a", "label")]
    assert np.array_equal(label, feat_a[:, :CLASSES].argmax(axis=1)) and ("b", "label") not in ref["node_feats"]
    assert np.array_equal(ref["node_feats"][("a", "train_mask")], np.arange(30) % 3 == 0)
    # The structure is the graph's own files (hard links), and the copy is reused as it is.
    edge_file = next(p for p in folder.rglob("*") if p.is_file() and "edges" in p.parts)
    assert edge_file.stat().st_nlink == 2
    stamp = (folder / "metadata.json").stat().st_mtime_ns
    assert with_features(base, dim=8, seed=3) == folder and (folder / "metadata.json").stat().st_mtime_ns == stamp
    assert not np.array_equal(read_whole_graph(with_features(base, dim=8, seed=4) / "metadata.json")
                              ["node_feats"][("a", "feat")], feat_a)

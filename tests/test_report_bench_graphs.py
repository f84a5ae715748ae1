"""The Step 1 benchmark's graph helpers (benchmarks/bench_graphs.py, pure parts): the Debian
dependency graph from a Packages index, breadth-first masks, and the split of a one-type
graph into two node types; and the benchmark's quality row on a small assignment."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_graphs as bg  # noqa: E402

PACKAGES = """\
Package: a
Section: python
Depends: libc6 (>= 2.34), python3:any | python3-minimal, mail-transport-agent
Recommends: b [amd64] <!nocheck>
Description: first
 continued line: Depends: not-a-dependency

Package: b
Section: non-free/ocaml
Pre-Depends: libc6
Provides: mail-transport-agent, unused-name (= 1.0)

Package: libc6
Section: libs
"""


def test_dependency_names():
    assert bg.dependency_names("libc6 (>= 2.34), python3:any (>= 3.11~) | foo [amd64] <!nocheck>, baz:native") \
        == ["libc6", "python3", "foo", "baz"]
    assert bg.dependency_names("") == []


def test_debian_graph_from_a_packages_index():
    stanzas = bg.parse_packages(PACKAGES)
    assert [s["Package"] for s in stanzas] == ["a", "b", "libc6"]
    assert "Depends" not in stanzas[1] and stanzas[1]["Pre-Depends"] == "libc6"
    num_nodes, edges, masks = bg.debian_graph(stanzas)
    # Packages a, b, libc6; virtual: names depended on that no package is called.
    assert num_nodes == {"package": 3, "virtual": 3}     # mail-transport-agent, python3, python3-minimal
    pairs = {e: sorted(zip(s.tolist(), d.tolist())) for e, (s, d) in edges.items()}
    assert pairs["package:depends:package"] == [(0, 2), (1, 2)]
    assert pairs["package:depends_v:virtual"] == [(0, 0), (0, 1), (0, 2)]
    assert pairs["package:recommends:package"] == [(0, 1)]
    assert pairs["package:provides_v:virtual"] == [(1, 0)]   # unused-name is no node
    assert masks[0].tolist() == [True, False, False] and masks[1].tolist() == [False, True, False]


def test_bfs_order_levels_then_degree():
    # A path 0-1-2-3 with a hub 4 joined to 2, 5, 6, 7: from 1, level 1 is {0, 2}, level 2 {3, 4}
    # with the hub first, then its leaves.
    src = np.array([0, 1, 2, 2, 4, 4, 4])
    dst = np.array([1, 2, 3, 4, 5, 6, 7])
    indptr, nb = bg.undirected_csr(src, dst, 8)
    everyone = np.ones(8, dtype=bool)
    assert bg.bfs_order(indptr, nb, 1, everyone, 8).tolist() == [1, 2, 0, 4, 3, 5, 6, 7]
    odd = np.arange(8) % 2 == 1
    assert bg.bfs_order(indptr, nb, 1, odd, 3).tolist() == [1, 3, 5]
    # Unreached nodes come last (here: node 9 is isolated).
    indptr, nb = bg.undirected_csr(src, dst, 10)
    assert bg.bfs_order(indptr, nb, 0, np.ones(10, dtype=bool), 10).tolist()[-2:] == [8, 9]


def test_split_types_keeps_every_edge():
    src, dst = np.array([0, 1, 2, 3, 3]), np.array([1, 2, 3, 0, 3])
    is_b = np.array([False, True, False, True])
    num_nodes, edges, local = bg.split_types(src, dst, is_b)
    assert num_nodes == {"a": 2, "b": 2} and local.tolist() == [0, 0, 1, 1]
    assert {e: (s.tolist(), d.tolist()) for e, (s, d) in edges.items()} == {
        "a:aa:a": ([], []), "a:ab:b": ([0, 1], [0, 1]), "b:ba:a": ([0, 1], [1, 0]), "b:bb:b": ([1], [1])}


def test_graph_names():
    assert bg.graph_names("small") == list(bg.SMALL)
    assert bg.graph_names("mesh-20k,debian,mesh-20k") == ["mesh-20k", "debian"]
    with pytest.raises(ValueError, match="unknown graph"):
        bg.graph_names("torus-5")


def test_benchmark_quality_row():
    import bench_assign as ba
    # Types a = {0, 1, 2}, b = {3, 4, 5}; edges 0->1, 1->2, 2->3, 3->4, 4->5, 5->0, 0->1 again.
    src, dst = np.array([0, 1, 2, 3, 4, 5, 0]), np.array([1, 2, 3, 4, 5, 0, 1])
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    key = np.unique(lo * 6 + hi)
    g = ba.Graph("t", Path("."), ["a", "b"], np.array([0, 3, 6]), src, dst, key // 6, key % 6,
                 {"train": np.array([0, 1, 2]), "sparse": np.array([0])}, {"train": "a/m", "sparse": "a/s"})
    part = np.array([0, 0, 0, 1, 1, 1])          # the types split exactly along the parts
    row = ba.quality(g, part, 2, 1.05, ["ntype:a", "ntype:b", "feature:a/m"])
    assert row["cut"] == 2 and row["cut_pct"] == round(100 * 2 / 6, 2)
    assert row["halo_total"] == 2 and row["halo_max"] == 1 and row["max_part_cut"] == 1
    assert row["edge_share"] == round(4 / 7, 4)
    assert row["train"]["moved"] == 1 and row["sparse_train"]["moved"] == 0   # 3 seeds: slices 2 and 1
    # Each of the three: 3 in one part against a cap of 1.05 * 1.5 = 1.575: 2 over.
    assert row["over"] == {k: {"imbalance": 2.0, "excess": 2} for k in ("ntype:b", "ntype:a", "feature:a/m")}
    assert ba._over(row["over"]) == "ntype:b 2.0000 (+2) +2 more"
    assert ba.quality(g, np.array([0, 1, 0, 1, 0, 1]), 2, 1.05, ["nodes"])["over"] == {}


def test_over_limit_counts_units_above_the_cap():
    import bench_assign as ba
    # Average 1000, cap 1050: 1051 is one node over, 1050 is not.
    assert ba.over_limit({"nodes": np.array([1051, 949, 1000, 1000])}, 1.05) == \
        {"nodes": {"imbalance": 1.051, "excess": 1}}
    assert ba.over_limit({"nodes": np.array([1050, 950, 1000, 1000])}, 1.05) == {}


def test_update_replaces_rows_of_the_same_key_and_keeps_the_rest():
    import bench_assign as ba

    def row(graph, method, cut, cons="C0"):
        return {"graph": graph, "ranks": 2, "imbalance_allowed": 1.05, "constraints": cons, "method": method,
                "cut_pct": cut}
    old = {"parts": 4, "seed": 1, "ranks": [2], "imbalances": [1.05], "graphs": {"g": {}}, "wall_s": 10.0,
           "rows": [row("g", "multilevel", 9.0), row("g", "parmetis", 40.0), row("g", "multilevel", 30.0, "C2")]}
    new = {"parts": 4, "seed": 1, "ranks": [1], "imbalances": [1.03], "graphs": {"h": {}}, "wall_s": 5.0,
           "rows": [row("g", "multilevel", 8.0), row("h", "multilevel", 1.0)]}
    out = ba.merged(old, new)
    assert [r["cut_pct"] for r in out["rows"]] == [8.0, 40.0, 30.0, 1.0]   # in place, then the new key
    assert out["ranks"] == [1, 2] and out["imbalances"] == [1.03, 1.05] and set(out["graphs"]) == {"g", "h"}
    with pytest.raises(SystemExit, match="parts"):
        ba.merged(old, {**new, "parts": 8})


def test_assign_tables_filters_rows(tmp_path, capsys):
    import assign_tables as at
    rows = [{"graph": "g", "ranks": 2, "imbalance_allowed": ub, "constraints": cs, "method": m, "checked": ["nodes"],
             "cut_pct": 10.0, "halo_total": 5, "halo_max": 3, "edge_share": 0.5, "imbalance": {"nodes": 1.01},
             "time_s": 1.0, "peak_rss_mb": "9/9"}
            for ub in (1.03, 1.05) for cs in ("C0", "C1") for m in ("multilevel", "random")]
    rows.append({"graph": "g", "ranks": 2, "imbalance_allowed": 1.05, "constraints": "C0", "method": "kaminpar",
                 "status": "n/a (refused)"})
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"rows": rows}))
    at.main(["--imbalance", "1.05", "--sets", "C0", "--skip-methods", "random", "--skip-refused", str(f)])
    body = capsys.readouterr().out.splitlines()[2:]
    assert body == ["| g | 1.05 | C0 | 2 | multilevel | 10.00 | 5 | 3 | 0.50 | 1.010 |  |  |  |  |  | 1.0 | 9/9 | - |"]
    at.main([str(f)])
    assert len(capsys.readouterr().out.splitlines()) == 2 + 9


def test_assign_tables_show_every_constraints_imbalance():
    import assign_tables as at
    imb = {"nodes": 1.01, "ntype:user": 1.02, "edges:user": 3.5, "ntype:item": 1.04, "edges:item": 3.4,
           "edges": 3.45, "feature:user/train_mask": 1.05, "feature:user/sparse_train_mask": 2.0}
    assert at.imbalance_cells(imb) == {"imb nodes": "1.010", "imb types": "1.020/1.040", "imb train": "1.050",
                                       "imb sparse": "2.000", "imb edges": "3.450"}
    assert at.imbalance_cells({"nodes": 1.0}) == {"imb nodes": "1.000", "imb types": "", "imb train": "",
                                                  "imb sparse": "", "imb edges": ""}


def test_mask_floor_numbers_by_hand():
    """A star (hub 0, leaves 1-5) plus edge 4-5; training nodes 0, 1, 2, 3 in 2 blocks at
    imbalance 1.0 (cap 2): two must leave the hub's block, the least degree sum of two
    training nodes is 2 (leaves 1 and 2), of 6 edges."""
    import mask_floor
    lo = np.array([0, 0, 0, 0, 0, 4])
    hi = np.array([1, 2, 3, 4, 5, 5])
    part = np.array([0, 1, 1, 0, 0, 0])      # leaves 1, 2 out: their two edges are cut
    got = mask_floor.floor_numbers(lo, hi, 6, np.array([0, 1, 2, 3]), part, 2, 1.0)
    assert got["train_per_block"] == [2, 2] and got["cap"] == 2 and got["must_leave_core_block"] == 2
    assert got["least_degree_sum_pct"] == round(100 * 2 / 6, 2)
    assert got["outside_degree_sum_pct"] == round(100 * 2 / 6, 2)
    assert got["cut_pct"] == round(100 * 2 / 6, 2) and got["cut_touching_train_pct"] == round(100 * 2 / 6, 2)
    assert got["cut_other_pct"] == 0.0
    part = np.array([0, 1, 1, 0, 0, 1])      # cut: 0-1, 0-2, 0-5 touch training nodes, 4-5 does not
    got = mask_floor.floor_numbers(lo, hi, 6, np.array([0, 1, 2, 3]), part, 2, 1.0)
    assert got["outside_degree_sum_pct"] == round(100 * 2 / 6, 2)
    assert got["cut_touching_train_pct"] == round(100 * 3 / 6, 2) and got["cut_other_pct"] == round(100 * 1 / 6, 2)
    # Where the cut is: 0-1, 0-2 outside training nodes to the core block (block 0); 0-5 a
    # core-block training node to a node outside it; 4-5 no training endpoint.
    assert got["split_outside_train_to_core_pct"] == round(100 * 2 / 6, 2)
    assert got["split_core_train_to_outside_pct"] == got["split_no_train_pct"] == round(100 * 1 / 6, 2)
    assert got["split_outside_train_among_pct"] == got["split_outside_train_to_other_outside_pct"] == 0.0
    assert got["outside_train_edges_pct"] == 0.0
    # Outside training nodes 1 and 2 joined by an edge, in different blocks: cut among them.
    lo2, hi2 = np.append(lo, 1), np.append(hi, 2)
    part = np.array([0, 1, 2, 0, 0, 0])
    got = mask_floor.floor_numbers(lo2, hi2, 6, np.array([0, 1, 2, 3]), part, 3, 1.0)
    assert got["outside_train_edges_pct"] == got["split_outside_train_among_pct"] == round(100 / 7, 2)

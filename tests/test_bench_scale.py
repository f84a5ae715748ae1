"""benchmarks/bench_scale.py's pure parts: the input generator at a tiny size (a valid chunked
graph with the counts, types and features asked for, cached), size names, the per-stage rows
with the guard's estimate, and the refit of the guard's constants from a results file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_scale as B  # noqa: E402

from distpart.chunked.estimate import BASE_BYTES, STAGE_MODELS  # noqa: E402
from distpart.chunked.metadata import load_metadata  # noqa: E402


def test_counts_parse_and_name_sizes():
    assert [B.parse_count(t) for t in ("200m", "12.5M", "5k", "1000", "1g")] == \
        [200_000_000, 12_500_000, 5_000, 1000, 10**9]
    assert [B.size_name(n) for n in (200_000_000, 12_500_000, 5_000_000, 20_000, 1234)] == \
        ["200m", "12.5m", "5m", "20k", "1234"]
    assert B.default_nodes(200_000_000) == 12_500_000   # the 12.5M nodes / 200M edges
    for bad in ("", "m", "-5m", "0", "1.5"):
        with pytest.raises(Exception, match="expected"):
            B.parse_count(bad)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    work = tmp_path_factory.mktemp("scale")
    return work, B.generate(work, 4000, 300, seed=3)


def test_the_generated_graph_is_valid_with_the_counts_and_features_asked(tiny):
    work, folder = tiny
    # Full validation (every row of every file), as a user would run it.
    run = subprocess.run([sys.executable, "-m", "distpart", "validate", str(folder), "--quiet"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "validate: OK (2 node types, 3 edge types, 300 nodes, 4000 edges)" in run.stdout, \
        run.stdout + run.stderr
    meta = load_metadata(folder)
    assert list(meta.node_types) == ["user", "item"] and sum(meta.node_counts) == 300
    assert [et.name for et in meta.edge_types] == list(B.EDGE_TYPES) and sum(meta.edge_counts) == 4000
    assert all(f.endswith(".parquet") for _, f in ((k, str(p)) for k, p in meta.all_files()))
    # A 16-float node feature on both node types and a float32 edge feature on every edge type.
    raw = json.loads((folder / "metadata.json").read_text())
    assert set(raw["node_data"]) == {"user", "item"} and set(raw["edge_data"]) == set(B.EDGE_TYPES)
    feat = pq.read_table(folder / raw["node_data"]["item"]["feat"]["data"][0])
    assert feat.num_columns == 16 and feat.column(0).type == "float"
    rows = sum(pq.read_metadata(folder / p).num_rows for p in raw["edge_data"]["user:buys:item"]["weight"]["data"])
    assert rows == meta.edge_counts[1]
    # Edge endpoints lie inside their node types.
    src = np.concatenate([pq.read_table(folder / p).column(0).to_numpy()
                          for p in raw["edges"]["user:buys:item"]["data"]])
    assert len(src) == meta.edge_counts[1] and 0 <= src.min() and src.max() < meta.node_counts[0]


def test_the_input_is_generated_once_and_reused(tiny, capsys):
    work, folder = tiny
    stamp = (folder / "metadata.json").stat().st_mtime_ns
    assert B.generate(work, 4000, 300, seed=3) == folder
    assert "input cached" in capsys.readouterr().out
    assert (folder / "metadata.json").stat().st_mtime_ns == stamp
    assert B.generate(work, 4000, 300, seed=4) != folder    # another seed is another graph


def test_chunks_bound_what_the_generator_holds():
    assert B.num_chunks(2_000) == 4
    assert 0.4 * 200_000_000 / B.num_chunks(200_000_000) <= B.MAX_CHUNK_EDGES


def _stats(peaks_mb):
    return {"ranks": 2, "stages": [{"stage": s, "wall_s": 1.0, "peak_rss_mb": p, "job": "pipeline"}
                                   for s, p in peaks_mb]}


def test_stage_rows_put_the_estimate_so_far_beside_the_measured_peak(tiny):
    work, folder = tiny
    stats = _stats([("validate", [100, 100]), ("assign", [300, 320]), ("edges", [300, 330]),
                    ("verify", [300, 330])])
    rows = B.stage_rows(stats, folder, 2, 2, "multilevel")
    by = {r["stage"]: r for r in rows}
    assert "estimate_mb" not in by["validate"]
    assert by["assign"]["bytes_per_edge"] == round(620 * 2**20 / 4000, 1)
    # dispatch's sub-stages ("edges") are compared with dispatch's estimate (or Step 1's, if larger).
    assert by["edges"]["estimate_mb"] >= by["assign"]["estimate_mb"]
    assert by["edges"]["measured_over_estimate"] == pytest.approx(330 / by["edges"]["estimate_mb"], abs=2e-3)


def test_fit_gives_the_bytes_per_edge_a_results_file_implies(tmp_path, capsys):
    edges, nodes = 20_000_000, 1_250_000
    model = STAGE_MODELS["dispatch"]
    # Step 1 peaks at 2000 MiB per rank; dispatch alone (stages apart) at 1500 MiB.
    run = {"method": "multilevel", "ranks": 2, "edges": edges, "nodes": nodes, "feature_bytes": 0,
           "stages_apart": True, "balance": "nodes",
           "stages": [{"stage": "assign", "peak_rss_mb": [1900, 2000], "max_peak_mb": 2000, "job": "assign"},
                      {"stage": "edges", "peak_rss_mb": [1500, 1400], "max_peak_mb": 1500, "job": "dispatch"}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(run))
    fitted = B.fit([path])
    ml = STAGE_MODELS["assign/multilevel"]
    assert fitted["assign/multilevel"] == pytest.approx(
        ((2000 << 20) - BASE_BYTES) * 2 / edges - ml.per_node * nodes / edges, abs=0.1)
    assert fitted["dispatch"] == pytest.approx(
        ((1500 << 20) - BASE_BYTES) * 2 / edges - model.per_node * nodes / edges, abs=0.1)
    assert "assign/multilevel" in capsys.readouterr().out
    # In one pipeline process dispatch's 1500 MiB would hide under Step 1's 2000: not its own peak.
    for row in run["stages"]:
        row["job"] = "pipeline"
        row["peak_rss_mb"] = [row["max_peak_mb"]] * 2
    run["stages"][1]["max_peak_mb"] = 2000
    path.write_text(json.dumps(run))
    assert set(B.fit([path])) == {"assign/multilevel"}
    # Step 1 balancing several columns (the default set) is fitted to its own constant.
    del run["balance"]
    path.write_text(json.dumps(run))
    assert set(B.fit([path])) == {"assign/multilevel multi"}


def test_sizing_tables_group_dispatch_and_fill_the_200m_placeholder(tmp_path):
    import scale_tables as T
    run = {"method": "multilevel", "ranks": 2, "edges": 2**20, "nodes": 2**16, "mpiexec_wall_s": 10.0, "feature_bytes": 0,
           "command": "python benchmarks/bench_scale.py --edges 200m --ranks 2",
           "cut": {"edge_cut_fraction": 0.25},
           "stages": [{"stage": "validate", "wall_s": 1.0, "peak_rss_mb": [100, 100]},
                      {"stage": "assign", "wall_s": 2.0, "peak_rss_mb": [300, 320], "estimate_mb": 400,
                       "measured_over_estimate": 0.8},
                      {"stage": "nodes", "wall_s": 1.5, "peak_rss_mb": [310, 330]},
                      {"stage": "edges", "wall_s": 2.5, "peak_rss_mb": [350, 320]}]}
    g = T.grouped(run)
    assert list(g) == ["assign", "dispatch"]
    assert g["dispatch"]["wall_s"] == 4.0 and g["dispatch"]["peak_rss_mb"] == [350, 330]
    assert g["dispatch"]["bytes_per_edge"] == 680    # (350 + 330) MiB over 2**20 edges
    from distpart.chunked.estimate import stage_peak
    step1 = stage_peak(STAGE_MODELS["assign/multilevel"], 2**16, 2**20, 0, 2, columns=4)   # the default set
    dispatch = stage_peak(STAGE_MODELS["dispatch"], 2**16, 2**20, 0, 2)
    assert g["assign"]["estimate_mb"] == step1 / 2**20
    assert g["dispatch"]["estimate_mb"] == max(step1, dispatch) / 2**20   # one process: the peak so far
    assert g["dispatch"]["measured_over_estimate"] == 350 / g["dispatch"]["estimate_mb"]
    assert "Not measured yet" in T.perf_200m(tmp_path)
    (tmp_path / T.RUN_200M).write_text(json.dumps(run))
    text = T.perf_200m(tmp_path)
    assert "| dispatch | 4.0 | 350/330 | 680 |" in text and "cut 25.00% of edges" in text
    # With the node-count run beside it: both in one table, the default set first, each command once.
    nodes = dict(run, balance="nodes", command=run["command"] + " --balance nodes", cut={"edge_cut_fraction": 0.5})
    (tmp_path / T.RUN_200M_NODES).write_text(json.dumps(nodes))
    text = T.perf_200m(tmp_path)
    assert text.index("| multilevel | 2 | assign") < text.index("| multilevel (nodes only) | 2 | assign")
    assert "--ranks 2`: mpiexec wall 10 s; cut 25.00%" in text and "--balance nodes`: mpiexec wall 10 s; cut 50.00%" in text
    assert T.perf_sizing(tmp_path).count("\n") <= 2   # the 200M runs are not in the sizing table


def test_machines_needed_follows_the_guards_model():
    import scale_tables as T
    from distpart.chunked.estimate import stage_peak
    n = 10**9
    need = T.machines_needed(n, 16)
    assert need > 1   # a graph that needs several machines of 16 GB
    # `need` machines hold every stage within 90% of their memory, one fewer would not.
    nodes = n // 16
    stages = [STAGE_MODELS[k] for k in ("assign/multilevel", "dispatch", "verify")]
    assert all(stage_peak(m, nodes, n, 0, need, columns=2) <= 0.9 * 16 * 2**30 for m in stages)
    assert any(stage_peak(m, nodes, n, 0, need - 1, columns=2) > 0.9 * 16 * 2**30 for m in stages)
    assert T.machines_needed(1000, 24) == 1
    # KaMinPar holds the whole graph in one process: past one machine's memory no count helps.
    assert T.machines_needed(10**11, 24, method="kaminpar") is None


def test_dgls_pipeline_is_extrapolated_from_its_worst_step(tmp_path):
    import scale_tables as T
    assert "not measured yet" in T.dgl_extrapolated(tmp_path)
    run = {"dgl_version": "2.1.0", "nodes": 1_000_000, "edges": 2**24,
           "stages": [{"stage": "random_partition.py", "wall_s": 5.0, "peak_rss_mb": [512]},
                      {"stage": "dispatch_data.py (2 ranks)", "wall_s": 100.0, "peak_rss_mb": [2048, 2048]}]}
    (tmp_path / T.RUN_DGL).write_text(json.dumps(run))
    text = T.dgl_extrapolated(tmp_path, edges=2**24 * 10)
    # dispatch_data.py: 4 GiB summed over 2**24 edges = 256 B/edge; x10 edges = 40 GiB, 20 per process.
    assert "32 B/edge in random_partition.py (512 MiB, 5 s)" in text and "256 B/edge in dispatch_data.py" in text
    assert "cannot run" in text and "about 40 GiB summed" in text and "about 20 GiB in each of its 2 processes." in text
    assert "can run" in T.dgl_extrapolated(tmp_path, edges=2**24)

"""Mesh-like graphs in `--method multilevel`: which graphs count as mesh-like (coarsened in
pairs and given a V-cycle), and that the V-cycle only ever lowers the cut, on one process
(COMM_SELF). The same on 1, 2 and 4 ranks: mpi_tests/test_mpi_ml_coarsen.py (hierarchy) and
mpi_tests/test_multilevel.py (whole method on a torus)."""
from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import distpart.assign.multilevel.partitioner as ml
from distpart.assign.multilevel.coarsening import hierarchy as coarsen_module
from distpart.assign.multilevel.coarsening import mesh_like
from distpart.assign.multilevel.graph import block_caps
from graphs import cut_of, grid_edges, weights_of
from graphs import level_graph as graph

COMM = MPI.COMM_SELF


def test_a_grid_is_mesh_like_and_a_grid_with_a_hub_is_not() -> None:
    edges = grid_edges(30, 30)
    g, _ = graph(900, edges)
    assert mesh_like(COMM, g)
    hub = np.stack([np.zeros(120, dtype=np.int64), np.arange(1, 121)], 1)   # vertex 0 gains 120 neighbours
    both = np.unique(np.sort(np.concatenate([edges, hub]), axis=1), axis=0)
    g, _ = graph(900, both)
    assert not mesh_like(COMM, g)


def run(g, k: int, vcycles=None) -> "tuple[np.ndarray, dict]":
    timings: dict = {}
    parts = ml.multilevel_partition(COMM, g, k, 1.03, seed=2, timings=timings, vcycles=vcycles)
    return parts, timings


def test_a_v_cycle_never_raises_the_cut_and_keeps_the_caps(monkeypatch) -> None:
    monkeypatch.setattr(coarsen_module, "TARGET_PER_BLOCK", 40)   # a 60 x 60 grid gets levels
    nx = ny = 60
    edges = grid_edges(nx, ny)
    rng = np.random.default_rng(7)
    vwgt = np.stack([np.ones(nx * ny), rng.random(nx * ny) < 0.2], 1).astype(np.int64)
    g, _ = graph(nx * ny, edges, vwgt)
    k = 4
    caps = block_caps(g.total, k, 1.03)
    once, t1 = run(g, k, vcycles=0)
    default, t2 = run(g, k)
    thrice, t3 = run(g, k, vcycles=2)
    # A grid is mesh-like: by default it gets MESH_VCYCLES V-cycles.
    assert t1["cycles"] == 1 and t2["cycles"] == 1 + ml.MESH_VCYCLES and t3["cycles"] == 3 and t2["levels"] >= 3
    for parts in (once, default, thrice):
        assert (weights_of(parts, vwgt, k) <= caps).all()
    assert cut_of(edges, thrice) <= cut_of(edges, default) <= cut_of(edges, once)
    # Four blocks of a 60 x 60 grid: the best cut 120 edges, random 5300.
    assert cut_of(edges, default) < 3 * 120, cut_of(edges, default)


def test_a_graph_with_hubs_gets_one_pass(monkeypatch) -> None:
    monkeypatch.setattr(coarsen_module, "TARGET_PER_BLOCK", 40)
    rng = np.random.default_rng(3)
    n = 2000
    u = rng.integers(0, n, 8000)
    v = np.where(rng.random(8000) < 0.5, rng.integers(0, 20, 8000), rng.integers(0, n, 8000))   # 20 hubs
    e = np.unique(np.sort(np.stack([u, v], 1)[u != v], axis=1), axis=0)
    g, _ = graph(n, e)
    _, t = run(g, 4)
    assert t["cycles"] == 1
    _, t = run(g, 4, vcycles=1)   # asked for: given, hubs or not
    assert t["cycles"] == 2


@pytest.mark.parametrize("value, message", [("-1", "must be 0 or more, got -1"), ("two", "expected a whole number")])
def test_a_bad_vcycles_value_is_refused_by_name(value: str, message: str, capsys, tmp_path) -> None:
    from distpart.cli import main
    with pytest.raises(SystemExit) as stop:
        main(["assign", str(tmp_path / "in"), str(tmp_path / "out"), "--num-parts", "4", "--vcycles", value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--vcycles" in err and message in err, err
    assert not (tmp_path / "out").exists()


def test_each_constraint_keeps_its_own_cap(monkeypatch) -> None:
    """--balance-edges FACTOR: the in-degree column gets its own, looser cap (per-constraint
    ubvec, as METIS and ParMETIS allow); the node column keeps --imbalance's."""
    monkeypatch.setattr(coarsen_module, "TARGET_PER_BLOCK", 40)
    rng = np.random.default_rng(5)
    n = 3000
    hubs = rng.integers(0, 30, 6000)                 # a few hubs take most edges
    edges = np.unique(np.sort(np.stack([hubs, rng.integers(30, n, 6000)], 1), axis=1), axis=0)
    degree = np.bincount(edges.ravel(), minlength=n)
    vwgt = np.stack([np.ones(n), degree], 1).astype(np.int64)
    g, _ = graph(n, edges, vwgt)
    k, factors = 4, np.array([1.03, 1.6])
    parts = ml.multilevel_partition(COMM, g, k, factors, seed=2)
    weights = weights_of(parts, vwgt, k)
    assert (weights <= block_caps(g.total, k, factors)).all()
    imbalance = weights.max(axis=0) / (g.total / k)
    assert imbalance[0] <= 1.03 + 1e-9 and imbalance[1] <= 1.6 + 1e-9
    assert block_caps(g.total, k, factors)[1] > block_caps(g.total, k, 1.03)[1]


def test_balance_edges_factor_on_the_command_line() -> None:
    from distpart.assign.balance import BalanceOptions
    from distpart.cli import _parser
    parse = _parser().parse_args
    assert parse(["assign", "i", "o", "--num-parts", "2"]).balance_edges is None      # the method's default
    assert parse(["assign", "i", "o", "--num-parts", "2", "--no-balance-edges"]).balance_edges is False
    from distpart.assign.options import default_balance
    assert default_balance("multilevel", None, None) == (True, 1.5)
    assert default_balance("parmetis", None, None) == (True, False)
    assert default_balance("kaminpar", None, None) == (False, False)
    assert default_balance("multilevel", False, True) == (False, True)
    assert parse(["assign", "i", "o", "--num-parts", "2", "--balance-edges"]).balance_edges is True
    assert parse(["assign", "i", "o", "--num-parts", "2", "--balance-edges", "1.5"]).balance_edges == 1.5
    names = ["ntype:a", "edges:a", "feature:a/m"]
    assert BalanceOptions(True, True, ("a/m",), 1.05, 1.5).imbalances(names).tolist() == [1.05, 1.5, 1.05]
    assert BalanceOptions(True, True, ("a/m",), 1.05).imbalances(names).tolist() == [1.05, 1.05, 1.05]

"""`--method kaminpar` end to end on 1, 2 and 4 ranks, the parallel ParHIP writer, the refusals."""
from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

from harness import RANKS, distpart, mpirun, start_early
from distpart.synthetic import read_whole_graph
from reference import check_output, read_assignment_files

kaminpar = pytest.importorskip("kaminpar", reason="pip install 'distpart[kaminpar]'")

NUM_PARTS = 4
NTYPES = ["author", "paper", "institution"]   # the example's metadata order = homogeneous ID order


def _input_cut(example_dir: Path, assign: dict) -> int:
    ref = read_whole_graph(example_dir / "metadata.json")
    return sum(int((assign[e.split(":")[0]][s] != assign[e.split(":")[2]][d]).sum())
               for e, (s, d) in ref["edges"].items())


def _no_work_files(folder: Path) -> None:
    assert not any(p.name.startswith(".distpart-kaminpar") for p in folder.rglob("*")), \
        sorted(map(str, folder.rglob("*")))


@pytest.fixture(scope="module")
def one_thread(example_dir, tmp_path_factory) -> dict:
    """`pipeline --method kaminpar --threads 1 --seed 11` on each rank count: {R: (OUT, run)}.
    One run per R serves both the end-to-end checks and the same-assignment-for-any-R check
    (the default thread count's pipeline runs in test_balance_edges_alone_balances_in_degree)."""
    outs = {}
    for r in RANKS:
        out = tmp_path_factory.mktemp(f"kaminpar_r{r}") / "out"
        outs[r] = out, distpart(r, "pipeline", example_dir, out, "--num-parts", NUM_PARTS, "--method", "kaminpar",
                                "--threads", 1, "--seed", 11)
    return outs


@pytest.mark.parametrize("nranks", RANKS)
def test_pipeline_kaminpar(nranks, example_dir, one_thread):
    out, run = one_thread[nranks]
    assert "verify: OK" in run.stdout and "edge cut:" in run.stdout, run.output
    check_output(example_dir, out / "assignment", out)
    meta = json.loads((out / "assignment" / "partition_meta.json").read_text())
    assert meta == {"algo_name": "kaminpar", "num_parts": NUM_PARTS, "version": "1.0.0"}
    assert json.loads((out / "metadata.json").read_text())["part_method"] == "kaminpar"
    assign = read_assignment_files(out / "assignment", NTYPES)
    everything = np.concatenate(list(assign.values()))
    assert everything.min() >= 0 and everything.max() < NUM_PARTS
    sizes = np.bincount(everything, minlength=NUM_PARTS)
    # KaMinPar's guarantee: no block above (1 + eps) * ceil(N / P), eps = --imbalance - 1.
    assert sizes.max() <= 1.05 * math.ceil(len(everything) / NUM_PARTS), sizes
    cut = _input_cut(example_dir, assign)
    report = json.loads((out / "report.json").read_text())
    assert report["edge_cut"] == cut and report["edges"] == 10000
    assert cut < 0.6 * 10000 * (1 - 1 / NUM_PARTS)   # far better than random's expected cut
    _no_work_files(out)


def test_one_thread_gives_the_same_assignment_for_any_rank_count(example_dir, tmp_path, one_thread):
    """With one thread KaMinPar is deterministic for a seed (with more it is not), and the
    ParHIP file the ranks write together is the same graph for any R."""
    files = {r: {t: (out / "assignment" / f"{t}.txt").read_bytes() for t in NTYPES}
             for r, (out, _) in one_thread.items()}
    for r in RANKS[1:]:
        assert files[r] == files[1], f"R={r} differs from R=1"
    other = tmp_path / "other-seed"
    distpart(1, "assign", example_dir, other, "--num-parts", NUM_PARTS, "--method", "kaminpar",
             "--threads", 1, "--seed", 12)
    assert {t: (other / f"{t}.txt").read_bytes() for t in NTYPES} != files[1]
    _no_work_files(other)


@start_early
def test_balance_edges_alone_balances_in_degree(example_dir, tmp_path):
    out = tmp_path / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", NUM_PARTS, "--method", "kaminpar", "--balance-edges")
    imbalance = json.loads((out / "report.json").read_text())["imbalance"]
    assert imbalance["edges"] <= 1.06, imbalance


@pytest.mark.parametrize("args, message", [
    (["--balance-ntypes"], "--balance-ntypes (3 node types, one constraint each) asks for 3 balance constraints "
                           "but --method kaminpar balances one"),
    (["--balance-edges", "--balance-ntypes"], "with --balance-edges ask for 6 balance constraints"),
    (["--balance-feature", "paper/train_mask"], "--balance-feature paper/train_mask: --method kaminpar balances "
                                                "one weight per node"),
    (["--balance-edges", "--balance-feature", "paper/train_mask"], "--balance-feature paper/train_mask"),
    (["--threads", "0"], "--threads must be at least 1, got 0"),
])
def test_refusals(args, message, example_dir, tmp_path):
    out = tmp_path / "out"
    run = distpart(2, "pipeline", example_dir, out, "--num-parts", 2, "--method", "kaminpar", *args, ok=False)
    assert run.returncode == 2 and message in run.stderr, run.output
    assert "Traceback" not in run.output
    assert not (out / "metadata.json").exists()
    _no_work_files(out)


def test_two_constraints_on_one_node_type_are_refused_too(tmp_path):
    from distpart.synthetic import homogeneous_graph
    in_dir = homogeneous_graph(tmp_path / "in", 500, 2000, feat_dim=0).parent
    run = distpart(1, "assign", in_dir, tmp_path / "a", "--num-parts", 2, "--method", "kaminpar",
                   "--balance-ntypes", "--balance-edges", ok=False)
    assert "--balance-ntypes with --balance-edges ask for 2 balance constraints" in run.stderr, run.output
    # One node type: --balance-ntypes alone is node balance, which KaMinPar does.
    distpart(1, "assign", in_dir, tmp_path / "b", "--num-parts", 2, "--method", "kaminpar", "--balance-ntypes")


WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from mpi4py import MPI
    from distpart.assign.adjacency import build_csr
    from distpart.chunked.metadata import load_metadata
    from distpart.assign.parhip import write_parhip

    comm = MPI.COMM_WORLD
    csr = build_csr(comm, load_metadata(sys.argv[1]), 1 << 16)
    write_parhip(comm, sys.argv[2], csr)
    write_parhip(comm, sys.argv[3], csr, np.asarray(csr.in_degree))
    if comm.Get_rank() == 0:
        print("checks: passed")
""")


def test_parallel_writer_gives_the_same_file_for_any_rank_count(example_dir, tmp_path):
    """The ranks' MPI-IO pieces form one file, byte-identical for R = 1, 2, 4 and holding
    the symmetrized simple graph (and in-degree weights) of an independent reading."""
    script = tmp_path / "write_parhip.py"
    script.write_text(WRITER)
    files = {}
    for r in RANKS:
        plain, weighted = tmp_path / f"g{r}.parhip", tmp_path / f"w{r}.parhip"
        run = mpirun(r, [example_dir / "metadata.json", plain, weighted], script=script)
        assert run.returncode == 0 and "checks: passed" in run.stdout, run.output
        files[r] = (plain.read_bytes(), weighted.read_bytes())
    for r in RANKS[1:]:
        assert files[r] == files[1], f"R={r} differs from R=1"

    ref = read_whole_graph(example_dir / "metadata.json")
    offsets = np.cumsum([0] + [ref["num_nodes"][t] for t in NTYPES])
    n = int(offsets[-1])
    src, dst = (np.concatenate(x) for x in zip(*(
        (s + offsets[NTYPES.index(e.split(":")[0])], d + offsets[NTYPES.index(e.split(":")[2])])
        for e, (s, d) in ref["edges"].items())))
    in_degree = np.bincount(dst, minlength=n)
    loop = src == dst
    pairs = set(zip(src[~loop].tolist(), dst[~loop].tolist()))
    pairs |= {(v, u) for u, v in pairs}
    neighbours = [set() for _ in range(n)]
    for u, v in pairs:
        neighbours[u].add(v)
    for path, weighted in ((tmp_path / "g1.parhip", False), (tmp_path / "w1.parhip", True)):
        g = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, compress=False)
        assert (g.n(), g.m()) == (n, len(pairs))
        for u in range(n):
            assert {v for v, _ in g.neighbors(u)} == neighbours[u], u
            if weighted:
                assert g.node_weight(u) == in_degree[u], u


def test_progress_lines_continue_while_kaminpar_runs(tmp_path):
    """The binding holds the GIL, so KaMinPar runs in a child process: rank 0's progress
    thread keeps printing the ETA line meanwhile."""
    from distpart.synthetic import homogeneous_graph
    # Big enough that KaMinPar runs for more than one interval (about 1.5 s alone).
    in_dir = homogeneous_graph(tmp_path / "in", 20_000, 200_000, feat_dim=0).parent
    run = distpart(2, "assign", in_dir, tmp_path / "a", "--num-parts", 8, "--method", "kaminpar",
                   "--threads", 1, "--progress-every", 0.5)
    lines = [line for line in run.stderr.splitlines() if "assign/KaMinPar: running" in line]
    assert len(lines) >= 2 and "(estimate)" in lines[0], run.stderr
    _no_work_files(tmp_path / "a")


# ---------------------------------------------------------------- pure functions (no mpiexec)

def test_memory_estimate_covers_measured_peaks_and_refuses_with_both_numbers():
    from distpart.errors import InputError
    from distpart.assign.kaminpar import check_memory, memory_estimate
    # Peak RSS measured for kaminpar 3.7.3 (default and eco presets, k = 4..256, 1-4 threads).
    for n, m, peak_mb in ((1_000_000, 18_938_802, 885), (4_000_000, 19_621_048, 678), (300_000, 23_975_208, 601)):
        assert memory_estimate(n, m, False) >= peak_mb << 20
    assert memory_estimate(10, 10, True) > memory_estimate(10, 10, False)
    need = memory_estimate(2_000_000_000, 40_000_000_000, False)
    with pytest.raises(InputError) as err:
        check_memory(need, 24 << 30, "node-a", 2_000_000_000, 40_000_000_000)
    text = str(err.value)
    assert "needs about 1.57 TiB" in text and "node-a has 24 GiB available" in text, text
    assert "--method parmetis" in text
    check_memory(1 << 30, 2 << 30, "node-a", 1, 1)   # fits: no error


def test_missing_package_names_the_install_command(monkeypatch):
    import importlib.util
    from distpart.errors import InputError
    from distpart.assign.kaminpar import kaminpar_installed
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match=r"pip install 'distpart\[kaminpar\]'"):
        kaminpar_installed()


def test_a_failing_kaminpar_is_a_clear_error(tmp_path):
    from distpart.assign.kaminpar import KaMinParError, run_kaminpar
    bad = tmp_path / "bad.parhip"
    bad.write_bytes(b"not a graph")
    with pytest.raises(KaMinParError, match="KaMinPar failed"):
        run_kaminpar(bad, tmp_path / "p.npy", 2, 0.03, 0, 1, [], 5)


def test_allowed_cpus_include_the_bound_ones():
    import os
    from distpart.assign.kaminpar import allowed_cpus
    before = os.sched_getaffinity(0)
    assert allowed_cpus() >= before
    assert os.sched_getaffinity(0) == before   # the binding is restored

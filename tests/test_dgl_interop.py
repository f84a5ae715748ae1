"""Cross-checks against real DGL 2.x, run in a separate interpreter that has DGL.

The interpreter is harness.find_dgl_python's ($DISTPART_DGL_PYTHON, else /opt/dglenv/bin/python,
else this one if it can import dgl); without one every test here is skipped. Each test runs
tests/dgl_check.py under it and compares DGL's view with distpart's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphs import NUM_PARTS, build_partitions, make_source_graph, random_config
from harness import DGL_MISSING, find_dgl_python
from reference import check_dgl_written_files

from distpart import load_orig_ids, load_partition, load_partition_book, load_partition_feats
from distpart.partitions.partbook import PartitionBook

TESTS = Path(__file__).resolve().parent
DGL_CHECK = TESTS / "dgl_check.py"
TIMEOUT_S = 300


def _load_dgl_check() -> Any:
    spec = importlib.util.spec_from_file_location("dgl_check", DGL_CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dgl_check = _load_dgl_check()


@pytest.fixture(scope="module")
def dgl_python() -> str:
    python = find_dgl_python()
    if python is None:
        pytest.skip(DGL_MISSING)
    return python


def _run(python: str, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [python, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, f"{args} failed:\n{result.stderr[-4000:]}"
    return result.stdout


def _assert_same(ours: Any, theirs: Any, path: str = "") -> None:
    """Equality, with float sums compared to 1e-9 (numpy versions may sum differently)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), f"{path}: keys differ"
        for key in theirs:
            _assert_same(ours[key], theirs[key], f"{path}/{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), f"{path}: lengths differ"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-9), path
    else:
        assert ours == theirs, path


def _our_view(config: Path) -> list[dict[str, Any]]:
    cfg = json.loads(config.read_text())
    parts = []
    for p in range(cfg["num_parts"]):
        graph, node_feats, edge_feats, gpb, graph_name, ntypes, etypes = load_partition(config, p)
        orig_nids, orig_eids = load_orig_ids(config, p)
        book, book_name, book_ntypes, book_etypes = load_partition_book(config, p)
        part = dgl_check.describe_partition(
            vars(graph), node_feats, edge_feats, orig_nids, orig_eids
        )
        part.update(
            graph_name=graph_name,
            ntypes=ntypes,
            etypes=[":".join(e) for e in etypes],
            feats_only=[
                {k: dgl_check.describe_array(v[k]) for k in sorted(v)}
                for v in load_partition_feats(config, p)
            ],
            book=dgl_check.book_view(gpb, p, cfg, np.arange),
            book_loaded_alone=dgl_check.book_view(book, p, cfg, np.arange),
            book_types=[book_name, book_ntypes, {":".join(k): v for k, v in book_etypes.items()}],
        )
        parts.append(part)
    return parts


def test_dgl_loads_distpart_partitions(dgl_python: str, tmp_path: Path) -> None:
    config = build_partitions(tmp_path / "out", make_source_graph())
    # DGL_DIST_DEBUG makes load_partition verify every partition against its book.
    stdout = _run(dgl_python, str(DGL_CHECK), str(config), env={"DGL_DIST_DEBUG": "1"})
    theirs = json.loads(stdout.strip().splitlines()[-1])["partitions"]
    assert len(theirs) == NUM_PARTS
    _assert_same(_our_view(config), theirs)


def test_partition_book_matches_dgl_on_random_configs(dgl_python: str, tmp_path: Path) -> None:
    """Random configs, many with empty types and empty partitions, vs RangePartitionBook."""
    configs = {}
    for seed in range(25):
        config = tmp_path / f"config{seed}.json"
        configs[str(config)] = random_config(seed)
        config.write_text(json.dumps(configs[str(config)]))
    stdout = _run(dgl_python, str(DGL_CHECK), "--books", *configs)
    theirs = json.loads(stdout.strip().splitlines()[-1])
    for path, cfg in configs.items():
        ours = [
            dgl_check.book_view(PartitionBook.from_config(cfg, p), p, cfg, np.arange)
            for p in range(cfg["num_parts"])
        ]
        _assert_same(ours, theirs[path], path)


def test_as_torch_matches_dgl(dgl_python: str, tmp_path: Path) -> None:
    """distpart's as_torch=True, run under the DGL interpreter, equals DGL's own tensors."""
    config = build_partitions(tmp_path / "out", make_source_graph())
    code = f"""
import sys, torch, dgl.distributed as dd
import distpart
for p in range({NUM_PARTS}):
    g, nf, ef, *_ = distpart.load_partition({str(config)!r}, p, as_torch=True)
    dg, dnf, def_, *_ = dd.load_partition({str(config)!r}, p)
    src, dst = dg.edges(order="eid")
    assert torch.equal(g.src, src) and torch.equal(g.dst, dst)
    for ours, theirs in ((g.ndata, dg.ndata), (g.edata, dg.edata), (nf, dnf), (ef, def_)):
        assert sorted(ours) == sorted(theirs)
        for k in ours:
            assert isinstance(ours[k], torch.Tensor) and ours[k].dtype == theirs[k].dtype, k
            assert torch.equal(ours[k], theirs[k]), k
    nf, ef = distpart.load_partition_feats({str(config)!r}, p, load_edges=False, as_torch=True)
    assert ef is None and all(isinstance(v, torch.Tensor) for v in nf.values())
print("ok")
"""
    stdout = _run(dgl_python, "-c", code, env={"PYTHONPATH": str(TESTS.parent)})
    assert stdout.strip().endswith("ok")


def test_read_files_written_by_dgl(dgl_python: str, tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    _run(dgl_python, str(DGL_CHECK), "--save-fixtures", str(fixtures))
    check_dgl_written_files(fixtures, tmp_path)

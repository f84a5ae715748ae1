"""DGL's tools folder replaced by `distpart tools-path`, run as its callers run it (ranks: 2
for dispatch_data.py and the ParMETIS steps, 1 for data_proc_pipeline.py and
random_partition.py), each script started by the system `python3`, which lacks numpy:

- DGL's guide: `random_partition.py`, then `dispatch_data.py --ip-config ip_config.txt`
  (127.0.0.1 twice: one machine), checked against the input by the serial reference and
  loaded by real DGL when a DGL environment is present;
- GraphStorm's exact `dispatch_data.py` command (metadata named otherwise, --python-path,
  --ssh-port, --process-group-timeout, --save-orig-*): the same bytes, and nothing but
  `part*` folders named `part...` in its output; and across two network-namespace hosts
  with sshd (conftest's `netns_pair`), as GraphStorm runs it on a cluster;
- `data_proc_pipeline.py` started directly: the same bytes from one rank;
- a corrupt input: a non-zero status and no metadata.json (DGL's exits 0 there);
- GraphStorm's `--partition-algorithm parmetis` steps as it runs them (paths with spaces):
  the assignment is exactly `distpart assign --method parmetis --balance-ntypes` on as many ranks.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

from harness import distpart, mpi_command, mpi_env, run_bounded, start_early
from reference import check_output, tree_bytes

TOOLS = Path(subprocess.run([sys.executable, "-m", "distpart", "tools-path"], capture_output=True, text=True,
                            check=True, timeout=60).stdout.strip())
PYTHON3 = next((p for p in ("/usr/bin/python3", "/bin/python3") if os.access(p, os.X_OK)), sys.executable)
P = 2


def bare_env() -> Dict[str, str]:
    """GraphStorm's environment at its simplest: /usr/bin on PATH, no virtualenv, plus what
    Open MPI needs on this machine (root, oversubscribed 2 cores)."""
    keep = {k: v for k, v in mpi_env().items() if k.startswith("OMPI_") or k == "PYTHONUNBUFFERED"}
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), **keep}


def tool(script: str, *argv, cwd: Path = None, timeout: float = 180):
    return run_bounded([PYTHON3, TOOLS / script, *argv], bare_env(), timeout, cwd)


def outputs(out: Path) -> Dict[str, bytes]:
    """The partition files and config (the manifest names the input's path, which differs)."""
    return {k: v for k, v in tree_bytes(out).items() if k.startswith("part") or k == "metadata.json"}


@pytest.fixture(scope="module")
def guide(example_dir, tmp_path_factory):
    """DGL's guide, step 1 and step 2, with our tools path."""
    d = tmp_path_factory.mktemp("guide")
    (d / "ip_config.txt").write_text("127.0.0.1\n127.0.0.1\n")
    step1 = tool("partition_algo/random_partition.py", "--in_dir", example_dir, "--out_dir", d / "parts",
                 "--num_partitions", P)
    assert step1.returncode == 0, step1.output
    step2 = tool("dispatch_data.py", "--in-dir", example_dir, "--partitions-dir", d / "parts", "--out-dir",
                 d / "out", "--ip-config", d / "ip_config.txt", cwd=d)
    assert step2.returncode == 0, step2.output
    return d, step1, step2


def test_guide_commands_give_the_input_partitioned(guide, example_dir):
    d, step1, step2 = guide
    meta = json.loads((d / "parts" / "partition_meta.json").read_text())
    assert meta == {"algo_name": "random", "num_parts": P, "version": "1.0.0"}
    assert f" -n {P} " in step2.stderr          # one rank per partition on the one machine
    counts = check_output(example_dir, d / "parts", d / "out")
    graph = json.loads((example_dir / "metadata.json").read_text())
    assert counts["num_nodes"] == sum(map(sum, graph["num_nodes_per_chunk"]))
    assert counts["num_edges"] == sum(map(sum, graph["num_edges_per_chunk"]))
    # seeded: the assignment is the one `distpart assign --method random --seed 0` writes
    again = distpart(1, "assign", example_dir, d / "again", "--num-parts", P, "--method", "random")
    assert again.returncode == 0
    for ntype in graph["node_type"]:
        assert (d / "again" / f"{ntype}.txt").read_bytes() == (d / "parts" / f"{ntype}.txt").read_bytes()


def test_graphstorm_command_gives_the_same_partitions(guide, example_dir, tmp_path):
    d, _, _ = guide
    inp = tmp_path / "gsprocessing"
    shutil.copytree(example_dir, inp)
    (inp / "metadata.json").rename(inp / "updated_row_counts_metadata.json")
    out = tmp_path / "gs_out"
    shutil.copytree(d / "parts", out / "partition_assignment")     # GraphStorm writes the assignment itself
    (tmp_path / "ips.txt").write_text("127.0.0.1\n")
    run = tool("dispatch_data.py", "--in-dir", inp, "--metadata-filename", "updated_row_counts_metadata.json",
               "--partitions-dir", out / "partition_assignment", "--ip-config", tmp_path / "ips.txt",
               "--out-dir", out / "dist_graph", "--ssh-port", 22, "--python-path", sys.executable,
               "--log-level", "INFO", "--process-group-timeout", 600, "--save-orig-nids", "--save-orig-eids",
               cwd=tmp_path)
    assert run.returncode == 0, run.output
    assert "--process-group-timeout is ignored" in run.stderr and "cannot run distpart" not in run.stderr
    # GraphStorm counts the entries of dist_graph whose names start with "part"
    assert sorted(p.name for p in (out / "dist_graph").iterdir() if p.name.startswith("part")) == ["part0", "part1"]
    assert outputs(out / "dist_graph") == outputs(d / "out")


def test_data_proc_pipeline_started_directly(guide, example_dir, tmp_path):
    d, _, _ = guide
    run = tool("distpartitioning/data_proc_pipeline.py", "--input-dir", example_dir, "--graph-name", "example",
               "--schema", "metadata.json", "--num-parts", P, "--output", tmp_path / "out", "--partitions-dir",
               d / "parts", "--world-size", 1, "--process-group-timeout", 60, "--save-orig-nids", "--save-orig-eids")
    assert run.returncode == 0, run.output
    assert outputs(tmp_path / "out") == outputs(d / "out")      # the output does not depend on the ranks


@pytest.mark.parametrize("fault", ["short_file", "bad_endpoint"])
def test_corrupt_input_fails_without_an_output(guide, example_dir, tmp_path, fault):
    """DGL's dispatch_data.py exits 0 after a failed dispatch; ours passes the failure on,
    whether it is found before anything is written (an edge file shorter than the metadata
    says) or while dispatching (an edge to a node that does not exist)."""
    d, _, _ = guide
    bad = tmp_path / "bad"
    shutil.copytree(example_dir, bad)
    if fault == "short_file":
        edges = bad / "edges" / "paper___cites___paper-1.npy"
        np.save(edges, np.load(edges)[:-5])
        problem = f"{edges}: has 745 edges but num_edges_per_chunk for 'paper:cites:paper' says 750"
    else:
        edges = sorted((bad / "edges").glob("author___writes___paper-*.csv"))[1]
        lines = edges.read_text().splitlines()
        lines[1] = f"{lines[1].split()[0]} 999999"          # a paper that does not exist
        edges.write_text("\n".join(lines) + "\n")
        problem = f"{edges}: edge endpoint 999999 is outside [0, 2000) of the destination node type 'paper'"
    run = tool("dispatch_data.py", "--in-dir", bad, "--partitions-dir", d / "parts", "--out-dir", tmp_path / "out",
               "--ip-config", d / "ip_config.txt", "--save-orig-nids", "--save-orig-eids", cwd=tmp_path)
    assert not (tmp_path / "out" / "metadata.json").exists()
    assert run.returncode == 2 and f"distpart dispatch: error: {problem}" in run.stderr, run.output


@start_early
def test_graphstorm_parmetis_steps(example_dir, tmp_path):
    """GraphStorm's ParMetisPartitionAlgorithm: preprocess under mpirun with its Python, then
    pm_dglpart (from ~/local/bin: here a link to ours) under mpirun, then postprocess; the
    input and the assignment in folders whose names have a space."""
    inp = tmp_path / "in dir"
    shutil.copytree(example_dir, inp)           # GraphStorm's steps write into the input folder
    bin_dir = tmp_path / "local" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "pm_dglpart").symlink_to(TOOLS / "pm_dglpart")
    mpirun = mpi_command(P, [])[:3]             # mpiexec -n P
    pre = run_bounded([*mpirun, "-wdir", inp, PYTHON3, TOOLS / "distpartitioning/parmetis_preprocess.py",
                       "--input_dir", inp, "--schema_file", "metadata.json", "--output_dir", inp,
                       "--num_parts", P], bare_env(), 180)
    assert pre.returncode == 0, pre.output
    assert (inp / "example_stats.txt").read_text() == "3003 10000 3"
    part = run_bounded([*mpirun, "-wdir", inp, bin_dir / "pm_dglpart", "example", P, inp / "parmetis_nfiles.txt",
                        inp / "parmetis_efiles.txt"], bare_env(), 180)
    assert part.returncode == 0, part.output
    post = tool("distpartitioning/parmetis_postprocess.py", "--postproc_input_dir", inp, "--schema_file",
                "metadata.json", "--parmetis_output_file", inp / f"example_part.{P}", "--partitions_dir",
                tmp_path / "assign dir")
    assert post.returncode == 0, post.output
    assert json.loads((tmp_path / "assign dir" / "partition_meta.json").read_text())["num_parts"] == P
    ref = distpart(P, "assign", example_dir, tmp_path / "ref", "--num-parts", P, "--method", "parmetis",
                   "--balance-ntypes")
    assert ref.returncode == 0
    for ntype in ("author", "paper", "institution"):
        assert (tmp_path / "assign dir" / f"{ntype}.txt").read_bytes() == (tmp_path / "ref" / f"{ntype}.txt").read_bytes()
    lines = np.loadtxt(inp / f"example_part.{P}", dtype=np.int64)
    assert lines.shape == (3003, 2) and (lines[:, 0] == np.arange(3003)).all()


def test_real_dgl_loads_the_guide_output(guide, dgl_python, tmp_path):
    d, _, _ = guide
    dump = Path(__file__).parent / "drivers" / "dgl_dump.py"
    run = subprocess.run([dgl_python, dump, d / "out" / "metadata.json", tmp_path / "dump"], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    config = json.loads((d / "out" / "metadata.json").read_text())
    for p in range(P):
        theirs = np.load(tmp_path / "dump" / f"part{p}.npz")
        inner = theirs["ndata:inner_node"].astype(bool)
        owned = sum(config["node_map"][t][p][1] - config["node_map"][t][p][0] for t in config["ntypes"])
        assert int(inner.sum()) == owned
        for t in config["ntypes"]:
            lo, hi = config["node_map"][t][p]
            assert len(theirs[f"orig_nids:{t}"]) == hi - lo


@pytest.mark.xdist_group("netns_pair")      # the session's two sshd hosts (conftest.netns_pair)
def test_graphstorm_command_on_two_hosts(example_dir, netns_pair, tmp_path):
    """GraphStorm's command with an ip_config of bare IPs: one rank on each host (the remote
    one over ssh), --python-path being the interpreter that runs there. The assignment is
    written as GraphStorm's RandomPartitionAlgorithm writes it (np.random, one ID a line)."""
    c = netns_pair
    parts = tmp_path / "OUT" / "partition_assignment"
    parts.mkdir(parents=True)
    graph = json.loads((example_dir / "metadata.json").read_text())
    rng = np.random.default_rng(7)
    for ntype, counts in zip(graph["node_type"], graph["num_nodes_per_chunk"]):
        np.savetxt(parts / f"{ntype}.txt", rng.integers(0, P, sum(counts)), fmt="%d")
    (parts / "partition_meta.json").write_text(json.dumps({"algo_name": "random", "num_parts": P, "version": "1.0.0"}))
    (tmp_path / "ips.txt").write_text("".join(f"{h.address}\n" for h in c.hosts))
    env = dict(bare_env(), OMPI_MCA_plm_rsh_agent=c.env["OMPI_MCA_plm_rsh_agent"],
               DISTPART_LAUNCH_ARGS=f"--interface {c.subnet}")   # the hosts' dead second network (issue 10)
    before = len(c.hosts[1].accepted_logins())
    out = tmp_path / "OUT" / "dist_graph"
    run = c.hosts[0].run([PYTHON3, TOOLS / "dispatch_data.py", "--in-dir", example_dir, "--metadata-filename",
                          "metadata.json", "--partitions-dir", parts, "--ip-config", tmp_path / "ips.txt",
                          "--out-dir", out, "--ssh-port", 22, "--python-path", sys.executable, "--log-level", "INFO",
                          "--process-group-timeout", 600, "--save-orig-nids", "--save-orig-eids"],
                         env=env, timeout=180, cwd=tmp_path)
    assert run.returncode == 0, run.output
    assert f"2 ranks on 2 hosts ({c.hosts[0].name} x1, {c.hosts[1].name} x1)" in run.stderr
    assert len(c.hosts[1].accepted_logins()) > before
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("part")) == ["part0", "part1"]
    check_output(example_dir, parts, out)

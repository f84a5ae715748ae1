"""The drop-in for DGL's tools folder (distpart/dgltools), without MPI: DGL's flags parsed as
DGL's scripts parse them, unknown ones refused with exit 2, the flags mapped to distpart's
commands, distpart's interpreter found from a `python3` that lacks numpy, and the whole
chain from `python3 TOOLS/dispatch_data.py` to the mpiexec it starts (a fake one that
records its command line and exits with a status of its own choosing).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pytest

from distpart.dgltools import TOOLS_DIR, _flags, _python, backend, parmetis_steps
from distpart.errors import InputError

REPO = Path(__file__).resolve().parents[1]
VENV_PYTHON = str(Path(sys.executable))
# A python3 outside distpart's environment, as GraphStorm's `python3` on PATH may be.
SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/bin/python3") if os.access(p, os.X_OK)), None)
needs_system_python = pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no /usr/bin/python3 on this machine")

# Every flag of DGL's scripts (tools/ at the v2.1.0 tag, plus master's GraphBolt flags), as
# DGL's argparse declares them.
DGL_FLAGS = {
    "dispatch_data": ["--in-dir", "--metadata-filename", "--partitions-dir", "--out-dir", "--ip-config",
                      "--master-port", "--log-level", "--python-path", "--ssh-port", "--process-group-timeout",
                      "--save-orig-nids", "--save-orig-eids", "--use-graphbolt", "--store-inner-node",
                      "--store-inner-edge", "--store-eids", "--graph-formats"],
    "data_proc_pipeline": ["--input-dir", "--graph-name", "--schema", "--num-parts", "--output", "--partitions-dir",
                           "--log-level", "--world-size", "--process-group-timeout", "--save-orig-nids",
                           "--save-orig-eids", "--use-graphbolt", "--store-inner-node", "--store-inner-edge",
                           "--store-eids", "--graph-formats"],
    "random_partition": ["--in_dir", "--out_dir", "--num_partitions"],
    "parmetis_preprocess": ["--schema_file", "--input_dir", "--output_dir", "--num_parts", "--log_level"],
    "parmetis_postprocess": ["--postproc_input_dir", "--schema_file", "--parmetis_output_file", "--partitions_dir"],
}
SCRIPTS = {"dispatch_data": "dispatch_data.py", "random_partition": "partition_algo/random_partition.py",
           "data_proc_pipeline": "distpartitioning/data_proc_pipeline.py",
           "parmetis_preprocess": "distpartitioning/parmetis_preprocess.py",
           "parmetis_postprocess": "distpartitioning/parmetis_postprocess.py", "pm_dglpart": "pm_dglpart"}

# GraphStorm's dist_partition_graph.run_build_dglgraph, flag for flag.
GRAPHSTORM = ["--in-dir", "IN", "--metadata-filename", "updated_row_counts_metadata.json",
              "--partitions-dir", "OUT/partition_assignment", "--ip-config", "ips.txt", "--out-dir", "OUT/dist_graph",
              "--ssh-port", "2222", "--python-path", "/opt/gs/bin/python", "--log-level", "INFO",
              "--process-group-timeout", "600", "--save-orig-nids", "--save-orig-eids"]


def option_strings(tool: str) -> List[str]:
    return [s for a in _flags.PARSERS[tool]()._actions for s in a.option_strings if s not in ("-h", "--help")]


@pytest.mark.parametrize("tool", sorted(DGL_FLAGS))
def test_every_dgl_flag_and_no_other(tool):
    assert sorted(option_strings(tool)) == sorted(DGL_FLAGS[tool])


def test_graphstorm_and_guide_commands_parse():
    args = _flags.parse("dispatch_data", GRAPHSTORM)
    assert (args.in_dir, args.metadata_filename, args.ssh_port, args.python_path) == \
        ("IN", "updated_row_counts_metadata.json", 2222, "/opt/gs/bin/python")
    assert args.save_orig_nids and args.save_orig_eids and args.process_group_timeout == 600
    guide = _flags.parse("dispatch_data", ["--in-dir", "g/", "--partitions-dir", "p/", "--out-dir", "o",
                                           "--ip-config", "ip_config.txt"])
    assert guide.metadata_filename == "metadata.json" and guide.ssh_port == 22 and guide.graph_formats is None
    master = _flags.parse("dispatch_data", GRAPHSTORM + ["--use-graphbolt", "--store-eids", "--store-inner-node",
                                                         "--store-inner-edge", "--graph-formats", "csc,coo"])
    assert master.use_graphbolt and master.store_eids and master.graph_formats == "csc,coo"
    rp = _flags.parse("random_partition", ["--in_dir", "g", "--out_dir", "p", "--num_partitions", "2"])
    assert rp.num_partitions == 2


def test_given_tells_flags_set_from_defaults():
    assert _flags.given("dispatch_data", GRAPHSTORM) >= {"process_group_timeout", "python_path", "ssh_port"}
    assert "master_port" not in _flags.given("dispatch_data", GRAPHSTORM)
    # argparse's abbreviations, which DGL's parser also takes
    assert "master_port" in _flags.given("dispatch_data", GRAPHSTORM + ["--master-p", "5"])


def _script(tool: str, *argv: str, python: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    python = python or SYSTEM_PYTHON or VENV_PYTHON
    cmd = [str(TOOLS_DIR / SCRIPTS[tool]), *argv] if tool == "pm_dglpart" else \
        [python, str(TOOLS_DIR / SCRIPTS[tool]), *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=env if env is not None else bare_env())


def bare_env(**extra: str) -> Dict[str, str]:
    """What GraphStorm's python3 may see: no virtualenv, no PYTHONPATH, /usr/bin first."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), **extra}


@pytest.mark.parametrize("tool, argv, problem", [
    ("dispatch_data", GRAPHSTORM + ["--num-parts", "4"], "unrecognized arguments: --num-parts 4"),
    ("dispatch_data", ["--in-dir", "IN"], "required: --partitions-dir, --out-dir, --ip-config"),
    ("dispatch_data", GRAPHSTORM + ["--log-level", "LOUD"], "invalid choice: 'LOUD'"),
    ("random_partition", ["--in_dir", "g", "--out_dir", "p", "--num_partitions", "two"], "invalid int value"),
    ("random_partition", ["--in-dir", "g"], "unrecognized arguments"),
    ("data_proc_pipeline", ["--input-dir", "g"], "the following arguments are required"),
    ("parmetis_postprocess", ["--postproc_input_dir", "g"], "the following arguments are required"),
    ("pm_dglpart", ["g", "2", "n", "e", "extra"], "unrecognized arguments: extra"),
])
def test_bad_flags_exit_2_under_any_python(tool, argv, problem):
    done = _script(tool, *argv)
    assert done.returncode == 2, done.stderr
    assert problem in done.stderr and "usage:" in done.stderr
    assert done.stdout == ""


def test_help_under_any_python():
    done = _script("dispatch_data", "--help")
    assert done.returncode == 0 and "--process-group-timeout" in done.stdout and "(default: 12345)" in done.stdout


# ---------------------------------------------------------------- the mapping

def _args(tool: str, argv: List[str]) -> argparse.Namespace:
    return _flags.parse(tool, argv)


def test_graphstorm_command_becomes_a_launch_of_dispatch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = _args("dispatch_data", GRAPHSTORM)
    cmd = backend.dispatch_data_command(args, 4, ["10.0.0.1", "10.0.0.2"], {})
    assert cmd == ["launch", "--ip-config", str(tmp_path / "ips.txt"), "--ranks-per-host", "2", "--",
                   "dispatch", str(tmp_path / "IN" / "updated_row_counts_metadata.json"),
                   str(tmp_path / "OUT/partition_assignment"), str(tmp_path / "OUT/dist_graph"), "--overwrite"]
    # DGL's guide: two lines of one machine are one machine; metadata.json -> the folder itself
    guide = _args("dispatch_data", ["--in-dir", "g/", "--partitions-dir", "p", "--out-dir", "o",
                                    "--ip-config", "ip_config.txt", "--graph-formats", "csc"])
    cmd = backend.dispatch_data_command(guide, 2, ["127.0.0.1", "127.0.0.1"],
                                        {"DISTPART_LAUNCH_ARGS": "--interface eth0",
                                         "DISTPART_DISPATCH_ARGS": "--max-memory-gb 8"})
    assert cmd[3:7] == ["--ranks-per-host", "2", "--interface", "eth0"]
    assert cmd[8:10] == ["dispatch", str(tmp_path / "g")]
    assert cmd[-5:] == ["--overwrite", "--graph-formats", "csc", "--max-memory-gb", "8"]


def test_partitions_must_be_a_multiple_of_the_machines():
    args = _args("dispatch_data", GRAPHSTORM)
    with pytest.raises(InputError, match="names 2 machines, but the assignment has 3 partitions") as e:
        backend.dispatch_data_command(args, 3, ["a", "b", "a"], {})
    assert "ips.txt" in str(e.value)


def test_output_flags_map_to_dispatch_options(capsys):
    gb = _args("dispatch_data", GRAPHSTORM + ["--use-graphbolt", "--store-eids", "--store-inner-edge",
                                              "--log-level", "WARNING"])
    assert backend.output_options("dispatch_data", gb, {}) == ["--overwrite", "--graphbolt", "--store-eids",
                                                               "--store-inner-edge", "--quiet"]
    plain = _args("dispatch_data", ["--in-dir", "g", "--partitions-dir", "p", "--out-dir", "o",
                                    "--ip-config", "i", "--store-eids"])
    assert backend.output_options("dispatch_data", plain, {}) == ["--overwrite"]
    said = capsys.readouterr().err
    assert "ignored without --use-graphbolt" in said and "orig_nids.dgl and orig_eids.dgl are written" in said


def test_ssh_port_reaches_open_mpi():
    assert backend.ssh_port_env(22, {}) == {}
    assert backend.ssh_port_env(2222, {}) == {"OMPI_MCA_plm_rsh_args": "-p 2222"}
    assert backend.ssh_port_env(2222, {"OMPI_MCA_plm_rsh_args": "-F cfg"}) == {"OMPI_MCA_plm_rsh_args": "-F cfg -p 2222"}
    with pytest.raises(InputError, match="not a TCP port"):
        backend.ssh_port_env(70000, {})


def test_random_partition_and_data_proc_pipeline_jobs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rp = _args("random_partition", ["--in_dir", "g", "--out_dir", "p", "--num_partitions", "4"])
    assert backend.random_partition_job(rp) == ["assign", str(tmp_path / "g"), str(tmp_path / "p"), "--num-parts",
                                                "4", "--method", "random", "--seed", "0", "--overwrite"]
    dp = _args("data_proc_pipeline", ["--input-dir", "g", "--graph-name", "x", "--schema", "m.json", "--num-parts",
                                      "4", "--output", "o", "--partitions-dir", "p", "--world-size", "2",
                                      "--process-group-timeout", "60", "--save-orig-nids", "--save-orig-eids",
                                      "--graph-formats", "coo,csc"])
    assert backend.data_proc_pipeline_job(dp, {}) == [
        "dispatch", str(tmp_path / "g" / "m.json"), str(tmp_path / "g" / "p"), str(tmp_path / "o"),
        "--num-parts", "4", "--overwrite", "--graph-formats", "coo,csc"]
    dp.world_size = 3
    with pytest.raises(InputError, match="multiple of --world-size 3"):
        backend.data_proc_pipeline_job(dp, {})


# ---------------------------------------------------------------- ParMETIS files (pure parts)

def test_part_file_lines_and_reading_them_back(tmp_path):
    lines = parmetis_steps.part_file_lines(10, 2, np.array([1, 0, 3]))
    assert lines == b"12 1\n13 0\n14 3\n"
    f = tmp_path / "g_part.4"
    f.write_bytes(b"2 3\n0 1\n1 0\n3 3\n\n")        # DGL's pm_dglpart does not sort its lines
    parts, num_parts = parmetis_steps.read_part_file(f, 4, 4)
    assert parts.tolist() == [1, 0, 3, 3] and num_parts == 4
    for text, p, problem in [
            (b"0 1\n1 0\n", 4, "has 2 lines, but the graph has 4 nodes (node ID 2 has no line)"),
            (b"0 1\n1 0\n2 1\n3 0\n1 1\n", 4, "node ID 1 is on line 2 and again on line 5: each node must be on "
                                               "exactly one line"),
            (b"0 1\n1 0\n1 0\n3 0\n", 4, "node ID 1 is on line 2 and again on line 3"),
            (b"0 1\n1 0\n4 1\n3 0\n", 4, "node ID 4 on line 3 is outside [0, 4) (the graph has 4 nodes)"),
            (b"0 1\n1 0\n2 -1\n3 0\n", 4, "partition ID -1 on line 3 is outside [0, 4) (P = 4: from the file "
                                           "name, <graph>_part.4)"),
            (b"0 1\n1 0\n2 4\n3 0\n", 4, "partition ID 4 on line 3 is outside [0, 4)"),
            # no `.<P>` in the name: P is the number of distinct partitions, as DGL's counts it
            (b"0 0\n1 2\n2 0\n3 2\n", None, "partition ID 2 on line 2 is outside [0, 2) (P = 2: the number of "
                                             "distinct partitions, as DGL counts it)"),
            (b"0 1\n\n1 0\n2 0\n3 0\n", 4, "line 2 is not '<node ID> <partition>'"),
            (b"0 1\n1\n2 0\n3 0\n", 4, "Expected 2 columns, got 1"),
            (b"0 1 7\n1 0 7\n2 0 7\n3 0 7\n", 4, "has 3 fields a line: expected two integers"),
            (b"0 a\n1 b\n2 c\n3 d\n", 4, "invalid value 'a'"),
            (b"0\n1\n2\n3\n", 4, "has 1 field a line: expected two integers")]:
        f.write_bytes(text)
        with pytest.raises(InputError) as e:
            parmetis_steps.read_part_file(f, 4, p)
        assert str(e.value).startswith(f"{f}: ") and problem in str(e.value) and "\n" not in str(e.value)
    assert parmetis_steps.num_parts_of(Path("x/g_part.12")) == 12 and parmetis_steps.num_parts_of(Path("g.txt")) is None


@pytest.mark.parametrize("line, problem", [
    ("{d}/node_weights_paper_0.txt 0 100\n", "does not name a chunked graph's metadata file: it was not written by "
                                             "distpart's parmetis_preprocess.py (DGL's lists node weight files"),
    ("{d}/in dir/metadata.json 0 100\n", "line 1 names a metadata file whose path has a space but is not quoted"),
    ("", "is empty: it must hold one line 'METADATA_FILE 0 NODES'"),
    ("{d}/metadata.json 0 100\n{d}/metadata.json 0 100\n", "has 2 lines, but distpart's parmetis_preprocess.py "
                                                           "writes one"),
    ("'{d}/in dir/metadata.json 0 100\n", "line 1 is not 'METADATA_FILE 0 NODES' with the path quoted as a "
                                               "shell word (No closing quotation)"),
    ("{d}/metadata.json 1 100\n", "line 1 is not 'METADATA_FILE 0 NODES' (3 fields"),
])
def test_pm_dglpart_says_what_is_wrong_with_nfiles(tmp_path, line, problem):
    nfiles = tmp_path / "parmetis_nfiles.txt"
    nfiles.write_text(line.format(d=tmp_path))
    with pytest.raises(InputError) as e:
        parmetis_steps.read_nfiles(nfiles)
    assert str(e.value).startswith(f"{nfiles}: {problem}"), str(e.value)
    assert str(e.value).endswith("run parmetis_preprocess.py from `distpart tools-path` again")


@pytest.mark.parametrize("name", ["metadata.json", "in dir/metadata.json", "it's \\ $x/metadata.json"])
def test_nfiles_line_round_trips_any_path(tmp_path, name):
    nfiles = tmp_path / "parmetis_nfiles.txt"
    nfiles.write_text(parmetis_steps.nfiles_line(tmp_path / name, 1500))
    assert parmetis_steps.read_nfiles(nfiles) == (tmp_path / name, 1500)
    nfiles.write_text(f"{tmp_path}/metadata.json 0 1500\n")       # the older, unquoted line: still read
    assert parmetis_steps.read_nfiles(nfiles) == (tmp_path / "metadata.json", 1500)


# ---------------------------------------------------------------- ParMETIS steps, one process (no mpiexec)

NODES = 1500        # the graph of the ParMETIS step tests: one type, "homogeneous"


def _graph(folder: Path) -> Path:
    """A 1,500-node graph (graph_name "homogeneous") in `folder`; its metadata.json."""
    from distpart.synthetic.graphs import homogeneous_graph
    return homogeneous_graph(folder, NODES, 6000, num_chunks=2, feat_dim=0)


def _tree(root: Path) -> Dict[str, object]:
    """Every entry under root: a file's bytes, a link's target (what a refusal must not change)."""
    return {str(p.relative_to(root)): os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def _refused(done: subprocess.CompletedProcess, tool: str, message: str) -> None:
    """Exit 2 with one error line, the last one, which is `message`."""
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert errors == [f"{backend.script_name(tool)}: error: {message}"], done.stderr


def _postprocess(meta: Path, part: Path, out: Path) -> subprocess.CompletedProcess:
    return _script("parmetis_postprocess", "--postproc_input_dir", str(meta.parent), "--schema_file",
                   "metadata.json", "--parmetis_output_file", str(part), "--partitions_dir", str(out))


def _preprocess(meta: Path, out: Path, num_parts: int) -> subprocess.CompletedProcess:
    return _script("parmetis_preprocess", "--input_dir", str(meta.parent), "--schema_file", "metadata.json",
                   "--output_dir", str(out), "--num_parts", str(num_parts))


@pytest.mark.parametrize("num_parts, listed, problem", [
    (5000, NODES, "{meta}: the number of partitions (5000) is larger than the number of nodes (1500): some "
                  "partitions would be empty"),
    (2, NODES - 1, "{nfiles}: says the graph has 1499 nodes, but {meta} has 1500: the graph changed after "
                   "parmetis_preprocess.py ran; run it again"),
])
def test_pm_dglpart_checks_its_partitions_and_the_graph(tmp_path, num_parts, listed, problem):
    meta = _graph(tmp_path / "in")
    nfiles = tmp_path / "parmetis_nfiles.txt"
    nfiles.write_text(f"{meta} 0 {listed}\n")
    before = _tree(tmp_path)
    done = _script("pm_dglpart", "homogeneous", str(num_parts), str(nfiles), cwd=tmp_path)
    _refused(done, "pm_dglpart", problem.format(meta=meta, nfiles=nfiles))
    assert _tree(tmp_path) == before and done.stdout == ""      # no homogeneous_part.<P>


def test_parmetis_preprocess_refuses_more_partitions_than_nodes(tmp_path):
    meta = _graph(tmp_path / "in")
    before = _tree(tmp_path)
    done = _preprocess(meta, tmp_path / "out", 5000)
    _refused(done, "parmetis_preprocess", f"{meta}: the number of partitions (5000) is larger than the number of "
                                          "nodes (1500): some partitions would be empty")
    assert _tree(tmp_path) == before        # no stats, no out folder


@pytest.mark.parametrize("name, change, problem", [
    ("g_part.2", (NODES - 1, 5), "partition ID 5 on line 1500 is outside [0, 2) (P = 2: from the file name, "
                                 "<graph>_part.2)"),
    ("g_part.5000", None, "the number of partitions (5000) is larger than the number of nodes (1500): some "
                          "partitions would be empty"),
    ("g_part.2", (7, None), "node ID 7 is on line 8 and again on line 1500: each node must be on exactly one line"),
])
def test_parmetis_postprocess_checks_every_line(tmp_path, name, change, problem):
    meta = _graph(tmp_path / "in")
    lines = [f"{i} {i % 2}" for i in range(NODES)]
    if change:
        node, part = change
        lines[-1] = f"{node} {part}" if part is not None else lines[node]
    source = tmp_path / name
    source.write_text("\n".join(lines) + "\n")
    before = _tree(tmp_path)
    done = _postprocess(meta, source, tmp_path / "assignment")
    _refused(done, "parmetis_postprocess", f"{source}: {problem}")
    assert _tree(tmp_path) == before        # no assignment folder, no partition_meta.json


def test_parmetis_steps_with_spaces_in_every_path(tmp_path):
    """GraphStorm's three steps (one process each) on a graph whose folder has a space: the
    nfiles line is quoted and read back whole, and the assignment is complete."""
    meta = _graph(tmp_path / "in dir")
    steps = tmp_path / "step files"
    pre = _preprocess(meta, steps, 2)
    assert pre.returncode == 0, pre.stderr
    work = tmp_path / "work dir"
    work.mkdir()
    part = _script("pm_dglpart", "homogeneous", "2", str(steps / "parmetis_nfiles.txt"),
                   str(steps / "parmetis_efiles.txt"), cwd=work)
    assert part.returncode == 0 and "(1500 nodes, 2 partitions)" in part.stdout, part.stderr
    assert (steps / "parmetis_nfiles.txt").read_text() == f"'{meta.resolve()}' 0 1500\n"
    assert (meta.parent / "homogeneous_stats.txt").read_text() == "1500 6000 1"
    lines = np.loadtxt(work / "homogeneous_part.2", dtype=np.int64)
    assert lines.shape == (NODES, 2) and (lines[:, 0] == np.arange(NODES)).all()
    post = _postprocess(meta, work / "homogeneous_part.2", tmp_path / "assign dir")
    assert post.returncode == 0, post.stderr
    assert json.loads((tmp_path / "assign dir" / "partition_meta.json").read_text())["num_parts"] == 2
    assert (np.loadtxt(tmp_path / "assign dir" / "_N.txt", dtype=np.int64) == lines[:, 1]).all()


@pytest.mark.parametrize("tool", ["parmetis_preprocess", "pm_dglpart", "parmetis_postprocess"])
def test_parmetis_steps_never_write_through_a_link(tmp_path, tool):
    """An output path that is a symbolic link (to a file of someone else's) is refused before
    anything is written: the file it leads to is unchanged and no other output appears."""
    meta = _graph(tmp_path / "in")
    victim = tmp_path / "victim.txt"
    victim.write_text("not distpart's\n")
    out = tmp_path / "out"
    out.mkdir()
    link = out / {"parmetis_preprocess": "parmetis_nfiles.txt", "pm_dglpart": "homogeneous_part.2",
                  "parmetis_postprocess": "partition_meta.json"}[tool]
    link.symlink_to(victim)
    nfiles, source = tmp_path / "parmetis_nfiles.txt", tmp_path / "g_part.2"
    nfiles.write_text(f"{meta} 0 {NODES}\n")
    source.write_text("".join(f"{i} {i % 2}\n" for i in range(NODES)))
    before = _tree(tmp_path)
    if tool == "parmetis_preprocess":
        done = _preprocess(meta, out, 2)
    elif tool == "pm_dglpart":
        done = _script("pm_dglpart", "homogeneous", "2", str(nfiles), cwd=out)
    else:
        done = _postprocess(meta, source, out)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"error: {link}: is a symbolic link (to {victim})" in done.stderr, done.stderr
    assert _tree(tmp_path) == before and victim.read_text() == "not distpart's\n"


# ---------------------------------------------------------------- distpart's interpreter

def test_candidates_in_order(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "distpart"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "distpart").write_text("#!/opt/env/bin/python3.11\nimport sys\n")
    (bin_dir / "distpart").chmod(0o755)
    (bin_dir / "python3").write_text("")
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": str(bin_dir), "VIRTUAL_ENV": "/venv"}
    found = _python.candidates(["/gs/bin/python", "python3 "], env, site, running="/usr/bin/python3")
    assert found == ["/gs/bin/python", str(bin_dir / "python3"), "/usr/bin/python3",
                     str(tmp_path / "env/bin/python3"), str(tmp_path / "env/bin/python"),
                     *(str(site.parent / v / "bin" / p) for v in (".venv", "venv") for p in ("python3", "python")),
                     "/opt/env/bin/python3.11", "/venv/bin/python3", "/venv/bin/python"]
    assert _python.candidates(["/gs/bin/python"], {"DISTPART_PYTHON": "/x/python"}, site) == ["/x/python"]
    (bin_dir / "distpart").write_text("#!/usr/bin/env python3\n")
    assert _python.shebang_python(str(bin_dir / "distpart")) is None


def test_probe_names_what_is_wrong(tmp_path):
    assert _python.probe(VENV_PYTHON, os.environ) is None
    assert _python.probe(str(tmp_path / "nope"), os.environ) == "no such executable"
    other = tmp_path / "other" / "distpart"
    other.mkdir(parents=True)
    assert _python.probe(VENV_PYTHON, os.environ, other) == f"imports another distpart ({_python.PACKAGE_DIR})"


@needs_system_python
def test_system_python_without_numpy_hands_over_to_distparts(tmp_path):
    """`env -i PATH=/usr/bin /usr/bin/python3 dispatch_data.py ...`: the error comes from the
    backend, so distpart's interpreter was found and ran it."""
    (tmp_path / "ip_config.txt").write_text("127.0.0.1\n")
    (tmp_path / "parts").mkdir()
    done = _script("dispatch_data", "--in-dir", str(tmp_path), "--partitions-dir", str(tmp_path / "parts"),
                   "--out-dir", str(tmp_path / "out"), "--ip-config", str(tmp_path / "ip_config.txt"),
                   "--python-path", SYSTEM_PYTHON, "--master-port", "1234")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    used = re.fullmatch(rf"dispatch_data.py: note: {SYSTEM_PYTHON} cannot run distpart \(.+\); using (\S+)", lines[0])
    assert used and _python.probe(used.group(1), os.environ) is None, lines[0]
    assert "--master-port is ignored" in lines[1]
    assert lines[-1] == (f"dispatch_data.py: error: {tmp_path / 'parts' / 'partition_meta.json'}: does not exist: "
                         "dispatch_data.py takes the number of partitions from it, as DGL's does "
                         "(random_partition.py and distpart assign write it)")
    assert not (tmp_path / "out").exists()


def test_no_interpreter_found_is_exit_2_naming_what_was_tried(tmp_path):
    done = _script("random_partition", "--in_dir", "g", "--out_dir", "p", "--num_partitions", "2",
                   env=bare_env(DISTPART_PYTHON=str(tmp_path / "python")))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"random_partition.py: error: no Python found that runs distpart from "
                                   f"{_python.PACKAGE_DIR} with numpy, mpi4py and pyarrow (tried "
                                   f"{tmp_path / 'python'}: no such executable); set DISTPART_PYTHON to the "
                                   "interpreter of distpart's environment")


@needs_system_python
def test_installed_package_is_found_through_its_environment(tmp_path, monkeypatch):
    """A non-editable install: the package in <env>/lib/pythonX.Y/site-packages and nothing on
    PATH; the script, started by the system python3, finds <env>/bin/python3."""
    env_dir = tmp_path / "env"
    subprocess.run([VENV_PYTHON, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    shutil.copytree(REPO / "distpart", site / "distpart", ignore=shutil.ignore_patterns("__pycache__"))
    # the dependencies from this environment, not distpart (an editable install's finder is not read from here)
    import numpy
    (site / "deps.pth").write_text(str(Path(numpy.__file__).parents[1]) + "\n")
    tools = site / "distpart" / "dgltools"
    done = subprocess.run([SYSTEM_PYTHON, str(tools / "dispatch_data.py"), "--in-dir", str(tmp_path),
                           "--partitions-dir", str(tmp_path), "--out-dir", str(tmp_path / "o"),
                           "--ip-config", str(tmp_path / "none.txt")],
                          capture_output=True, text=True, timeout=120, env=bare_env(), cwd=tmp_path)
    assert done.returncode == 2 and "partition_meta.json: does not exist" in done.stderr, done.stderr
    monkeypatch.chdir(tmp_path)       # from the clone's folder, `python -c` would import the clone
    found, _ = _python.find_python([], bare_env(), site / "distpart")
    assert found == str(env_dir / "bin" / "python3")


def _fake_mpiexec(tmp_path: Path, status: int) -> Path:
    """Open MPI's --version; otherwise records argv and the ssh options, exits `status`."""
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\n"
                    'if [ "$1" = --version ]; then echo "mpiexec (OpenRTE) 4.1.4"; exit 0; fi\n'
                    f'echo "$@" > {tmp_path}/argv\necho "$OMPI_MCA_plm_rsh_args" > {tmp_path}/rsh\n'
                    f"exit {status}\n")
    fake.chmod(0o755)
    return fake


def test_graphstorm_command_runs_mpiexec_and_returns_its_status(tmp_path):
    """GraphStorm's exact command, from python3 to the mpiexec it starts: the status of mpiexec
    is the script's (GraphStorm checks only that), the ssh port reaches Open MPI."""
    (tmp_path / "ips.txt").write_text("10.0.0.1\n10.0.0.2\n")
    (tmp_path / "OUT" / "partition_assignment").mkdir(parents=True)
    (tmp_path / "OUT" / "partition_assignment" / "partition_meta.json").write_text(
        '{"algo_name": "random", "num_parts": 4, "version": "1.0.0"}')
    fake = _fake_mpiexec(tmp_path, 3)
    env = bare_env(DISTPART_LAUNCH_ARGS=f"--mpiexec {fake} --no-check")
    done = _script("dispatch_data", *GRAPHSTORM, env=env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "--process-group-timeout is ignored" in done.stderr
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:2] == ["--hostfile", argv[1]] and argv[2:4] == ["-n", "4"]
    assert argv[argv.index("-m"):] == ["-m", "distpart", "dispatch", str(tmp_path / "IN/updated_row_counts_metadata.json"),
                                       str(tmp_path / "OUT/partition_assignment"), str(tmp_path / "OUT/dist_graph"),
                                       "--overwrite"]
    assert (tmp_path / "rsh").read_text().strip() == "-p 2222"
    _fake_mpiexec(tmp_path, 0)
    assert _script("dispatch_data", *GRAPHSTORM, env=env, cwd=tmp_path).returncode == 0


def test_data_proc_pipeline_started_per_machine_is_refused(tmp_path):
    done = _script("data_proc_pipeline", "--input-dir", str(tmp_path), "--graph-name", "g", "--schema",
                   "metadata.json", "--num-parts", "2", "--output", str(tmp_path / "o"), "--partitions-dir", "p",
                   "--world-size", "2", "--process-group-timeout", "60", env=bare_env(RANK="1"))
    assert done.returncode == 2 and "started with RANK=1" in done.stderr, done.stderr


def test_tools_path_prints_the_folder():
    done = subprocess.run([VENV_PYTHON, "-m", "distpart", "tools-path"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"{TOOLS_DIR}\n"
    for script in SCRIPTS.values():
        assert (TOOLS_DIR / script).is_file(), script
    assert os.access(TOOLS_DIR / "pm_dglpart", os.X_OK)

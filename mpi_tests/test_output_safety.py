"""A run never destroys its input or files it did not write, and replaces its own output
only with --overwrite (2 ranks)."""
from __future__ import annotations

import json
import shutil

from harness import distpart, start_early
from reference import tree_bytes


def test_output_into_the_input_folder_is_refused_and_the_input_untouched(example_dir, tmp_path):
    graph = tmp_path / "g"
    shutil.copytree(example_dir, graph)
    before = tree_bytes(graph)
    for argv in (["pipeline", graph, graph, "--num-parts", 2],
                 ["pipeline", graph, graph, "--num-parts", 2, "--overwrite"],
                 ["assign", graph, graph, "--num-parts", 2],
                 ["dispatch", graph, graph / "nowhere", graph, "--num-parts", 2]):
        run = distpart(2, *argv, ok=False)
        assert run.returncode == 2 and "is the input graph's folder" in run.stderr, run.output
        assert tree_bytes(graph) == before, argv
    assert sorted(p.name for p in graph.iterdir()) == sorted(p.name for p in example_dir.iterdir())


def test_assignment_that_would_replace_an_input_file_is_refused(example_dir, tmp_path):
    graph = tmp_path / "g"
    shutil.copytree(example_dir, graph)
    meta = json.loads((graph / "metadata.json").read_text())
    # An input chunk file outside the input folder (an absolute path), named like an
    # assignment file: elsewhere/paper.txt.
    spec = meta["edges"]["author:writes:paper"]
    first = graph / spec["data"][0]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first.rename(elsewhere / "paper.txt")
    spec["data"][0] = str(elsewhere / "paper.txt")
    (graph / "metadata.json").write_text(json.dumps(meta))
    before = tree_bytes(tmp_path)
    run = distpart(2, "assign", graph, elsewhere, "--num-parts", 2, ok=False)
    assert run.returncode == 2 and "would replace the input file" in run.stderr and "paper.txt" in run.stderr
    # Any folder inside the input folder is refused too, collision or not.
    run = distpart(2, "assign", graph, graph / "edges", "--num-parts", 2, ok=False)
    assert run.returncode == 2 and "is inside the input graph's folder" in run.stderr, run.output
    assert tree_bytes(tmp_path) == before


def test_foreign_metadata_json_is_never_replaced(example_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "metadata.json").write_text('{"mine": true}')
    for extra in ([], ["--overwrite"]):
        run = distpart(2, "pipeline", example_dir, out, "--num-parts", 2, *extra, ok=False)
        assert "metadata.json: exists and was not written by distpart" in run.stderr
    assert (out / "metadata.json").read_text() == '{"mine": true}'
    assert sorted(p.name for p in out.iterdir()) == ["metadata.json"]


def test_rerun_needs_overwrite_and_removes_leftover_partitions(example_dir, tmp_path):
    out = tmp_path / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random")
    run = distpart(2, "pipeline", example_dir, out, "--num-parts", 2, "--method", "random", ok=False)
    assert "holds the output of a previous distpart run" in run.stderr and "--overwrite" in run.stderr
    assert (out / "metadata.json").exists()          # refused: the old output is intact
    (out / "notes.md").write_text("the user's")
    distpart(2, "pipeline", example_dir, out, "--num-parts", 2, "--method", "random", "--overwrite")
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == ["assignment", "distpart-manifest.json", "metadata.json", "notes.md", "part0", "part1",
                     "report.json"]
    assert json.loads((out / "metadata.json").read_text())["num_parts"] == 2


@start_early
def test_dispatch_overwrite_keeps_the_assignment_it_reads(example_dir, tmp_path):
    out = tmp_path / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 2, "--method", "random")
    before = tree_bytes(out / "assignment")
    distpart(2, "dispatch", example_dir, out / "assignment", out, "--overwrite")
    assert tree_bytes(out / "assignment") == before
    distpart(2, "verify", example_dir, out / "assignment", out)


def test_output_folder_that_is_a_file(example_dir, tmp_path):
    (tmp_path / "file").write_text("")
    run = distpart(2, "pipeline", example_dir, tmp_path / "file", "--num-parts", 2, ok=False)
    assert run.returncode == 2 and "file: exists and is not a folder" in run.stderr

"""Output folder checks: never replace input or foreign files; --overwrite only our own."""
import json

import pytest

from distpart.errors import InputError
from distpart.run.outdir import ASSIGNMENT, MARKER, PARTITIONS, OutputFolder, claim, plan_removals


@pytest.fixture
def graph(tmp_path):
    root = tmp_path / "in"
    (root / "edges").mkdir(parents=True)
    files = [root / "metadata.json", root / "edges" / "e-0.npy", root / "x" / "paper.txt"]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("input")
    return root, files


def test_input_folder_itself_is_refused(graph):
    root, files = graph
    with pytest.raises(InputError, match="is the input graph's folder"):
        plan_removals(OutputFolder(root, PARTITIONS), root, files, [], overwrite=True)


def test_a_name_that_would_replace_an_input_file_is_refused(graph):
    root, files = graph
    with pytest.raises(InputError, match=r"would replace the input file .*x/paper.txt"):
        plan_removals(OutputFolder(root / "x", ASSIGNMENT, ["paper"]), root, files, [], overwrite=True)
    # Inside the input folder without a collision is allowed: edges/ holds no name we write.
    assert plan_removals(OutputFolder(root / "edges", PARTITIONS), root, files, [], False) == []
    # The parent of the input folder: `in/` is not a name distpart writes.
    assert plan_removals(OutputFolder(root.parent, PARTITIONS), root, files, [], False) == []


def test_foreign_files_are_never_replaced(tmp_path, graph):
    root, files = graph
    out = tmp_path / "out"
    out.mkdir()
    (out / "metadata.json").write_text("{}")
    for overwrite in (False, True):
        with pytest.raises(InputError, match="metadata.json: exists and was not written by distpart"):
            plan_removals(OutputFolder(out, PARTITIONS), root, files, [], overwrite)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "paper.txt").write_text("0\n")
    with pytest.raises(InputError, match="paper.txt: exists and was not written by distpart"):
        plan_removals(OutputFolder(tmp_path / "a", ASSIGNMENT, ["paper"]), root, files, [], True)
    # Unrelated files are left alone and do not block.
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.md").write_text("mine")
    assert plan_removals(OutputFolder(tmp_path / "b", PARTITIONS), root, files, [], False) == []


def test_previous_output_needs_overwrite_which_removes_only_ours(tmp_path, graph):
    root, files = graph
    out = tmp_path / "out"
    folder = OutputFolder(out, PARTITIONS, default_assign_dir="assignment")
    claim([folder], [])
    assert json.loads((out / MARKER).read_text()) == {"tool": "distpart", "kind": PARTITIONS}
    for name in ("part0", "part1", "part7", "assignment"):
        (out / name).mkdir()
    (out / "metadata.json").write_text("{}")
    (out / "notes.md").write_text("mine")
    with pytest.raises(InputError, match=r"previous distpart run \(assignment, metadata.json, part0, part1, \.\.\.\): "
                                         r"pass --overwrite to replace it, or --resume"):
        plan_removals(folder, root, files, [], overwrite=False)
    # --resume keeps the previous output for the stages to check; --overwrite clears it.
    assert plan_removals(folder, root, files, [], overwrite=False, resume=True) == []
    removals = plan_removals(folder, root, files, [], overwrite=True)
    claim([folder], removals)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "notes.md"]


def test_resume_never_adopts_a_foreign_folder(tmp_path, graph):
    root, files = graph
    out = tmp_path / "out"
    out.mkdir()
    (out / "metadata.json").write_text("{}")
    with pytest.raises(InputError, match="was not written by distpart"):
        plan_removals(OutputFolder(out, PARTITIONS), root, files, [], overwrite=False, resume=True)


def test_overwrite_never_removes_what_the_run_reads(tmp_path, graph):
    root, files = graph
    out = tmp_path / "out"
    folder = OutputFolder(out, PARTITIONS)
    claim([folder], [])
    (out / "assignment").mkdir()
    (out / "part0").mkdir()
    removals = plan_removals(folder, root, files, [out / "assignment"], overwrite=True)
    assert removals == [out / "part0"]
    # A dispatch reading OUT/assignment into OUT is not a previous output by itself.
    (out / "part0").rmdir()
    assert plan_removals(folder, root, files, [out / "assignment"], overwrite=False) == []


def test_output_path_that_is_a_file(tmp_path, graph):
    root, files = graph
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError, match="exists and is not a folder"):
        plan_removals(OutputFolder(tmp_path / "f", PARTITIONS), root, files, [], False)


def test_work_folders_left_by_a_killed_run_go_with_overwrite(tmp_path, graph):
    """KaMinPar's and partition_graph's work folders are removed when their run ends; after a
    SIGKILL they stay, and --overwrite removes them with the rest of the previous output."""
    root, files = graph
    assign = OutputFolder(tmp_path / "a", ASSIGNMENT, ["paper"])
    parts = OutputFolder(tmp_path / "o", PARTITIONS)
    claim([assign, parts], [])
    (tmp_path / "a" / ".distpart-kaminpar").mkdir()
    (tmp_path / "a" / ".distpart-kaminpar" / "graph.parhip").write_bytes(b"\0" * 8)
    (tmp_path / "o" / ".distpart-partition-graph-input").mkdir()
    for folder in (assign, parts):
        with pytest.raises(InputError, match="previous distpart run"):
            plan_removals(folder, root, files, [], overwrite=False)
        claim([folder], plan_removals(folder, root, files, [], overwrite=True))
        assert [p.name for p in folder.path.iterdir()] == [MARKER]

"""Output folder checks: never replace input or foreign files; --overwrite only our own."""
import json

import pytest

from distpart.errors import InputError
from distpart.run.outdir import ASSIGNMENT, MARKER, PARTITIONS, OutputFolder, claim, plan_removals


@pytest.fixture
def graph(tmp_path):
    root = tmp_path / "in"
    (root / "edges").mkdir(parents=True)
    # A chunk file may lie outside the input folder (an absolute path in metadata.json).
    files = [root / "metadata.json", root / "edges" / "e-0.npy", tmp_path / "x" / "paper.txt"]
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
        plan_removals(OutputFolder(root.parent / "x", ASSIGNMENT, ["paper"]), root, files, [], overwrite=True)
    # The parent of the input folder: `in/` is not a name distpart writes.
    assert plan_removals(OutputFolder(root.parent, PARTITIONS), root, files, [], False) == []


@pytest.mark.parametrize("inside", ["edges", "node_data", "edges/deeper"])
def test_an_output_inside_the_input_folder_is_refused(graph, inside):
    """Issue 18 item 7: OUT=IN/node_data wrote into the input before."""
    root, files = graph
    with pytest.raises(InputError, match=r"is inside the input graph's folder"):
        plan_removals(OutputFolder(root / inside, PARTITIONS), root, files, [], overwrite=True)


def test_a_symbolic_link_where_distpart_writes_is_refused(tmp_path, graph):
    """Issue 18 item 7: OUT/part1 -> a folder of the input, with --resume, wrote into the input."""
    root, files = graph
    out = tmp_path / "out"
    folder = OutputFolder(out, PARTITIONS)
    claim([folder], [])
    (out / "part1").symlink_to(root / "edges")
    for overwrite, resume in ((False, True), (True, False), (False, False)):
        with pytest.raises(InputError, match=r"part1: is a symbolic link \(to .*edges\)"):
            plan_removals(folder, root, files, [], overwrite=overwrite, resume=resume)
    assert sorted(p.name for p in (root / "edges").iterdir()) == ["e-0.npy"]


@pytest.mark.parametrize("where", ["part0/notes.md", "part3/mine/a.txt", "assignment/notes.txt",
                                   "assignment/sub/x"])
def test_overwrite_refuses_to_delete_a_file_distpart_did_not_write(tmp_path, graph, where):
    """Issue 18 item 6: --overwrite deleted the user's own files inside part<p>/ and assignment/."""
    root, files = graph
    out = tmp_path / "out"
    folder = OutputFolder(out, PARTITIONS, ["paper"], default_assign_dir="assignment")
    claim([folder], [])
    for name in ("part0/graph.dgl", "part0/.distpart-complete.json", "part3/graph.dgl.partial",
                 "assignment/paper.txt", "assignment/partition_meta.json", "metadata.json"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("ours")
    (out / where).parent.mkdir(parents=True, exist_ok=True)
    (out / where).write_text("the user's")
    alien = out / where.split("/")[0] / where.split("/")[1]
    with pytest.raises(InputError, match=f"{alien}: was not written by distpart: --overwrite removes only"):
        plan_removals(folder, root, files, [], overwrite=True)
    assert (out / where).read_text() == "the user's"


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
        (out / name / ("partition_meta.json" if name == "assignment" else "graph.dgl")).write_text("ours")
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


def test_overwrite_takes_the_previous_runs_node_types_from_its_config(tmp_path, graph):
    """A previous output of a graph with other node types: its assignment files are distpart's
    (the config names the types), a file named after no type of either run is not."""
    root, files = graph
    out = tmp_path / "out"
    folder = OutputFolder(out, PARTITIONS, ["paper"], default_assign_dir="assignment")
    claim([folder], [])
    (out / "metadata.json").write_text(json.dumps({"ntypes": {"author": 0, "venue": 1}}))
    (out / "assignment").mkdir()
    for name in ("author.txt", "venue.txt", "partition_meta.json"):
        (out / "assignment" / name).write_text("0\n")
    assert sorted(p.name for p in plan_removals(folder, root, files, [], overwrite=True)) == \
        ["assignment", "metadata.json"]
    (out / "assignment" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="notes.txt: was not written by distpart"):
        plan_removals(folder, root, files, [], overwrite=True)


def test_output_inside_an_input_given_as_its_metadata_file_is_refused(tmp_path):
    """GSProcessing's metadata file has its own name, so IN may be the file: its folder is
    the input all the same."""
    from distpart.run.outdir import refuse_inside_input
    meta = tmp_path / "in" / "updated_row_counts_metadata.json"
    meta.parent.mkdir()
    meta.write_text("{}")
    for where in (tmp_path / "in", tmp_path / "in" / "out"):
        with pytest.raises(InputError, match="input graph's folder"):
            refuse_inside_input(where, meta)
    refuse_inside_input(tmp_path / "out", meta)   # beside the input: fine

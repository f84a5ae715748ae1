"""The manifest: written before metadata.json, listing every file; `verify --quick` checks
an output against it without the input, and names the first file that changed."""
from __future__ import annotations

import json
import shutil

import pytest

from harness import distpart
from distpart.partitions.manifest import file_digest


@pytest.fixture(scope="module")
def output(example_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("manifest") / "out"
    distpart(2, "pipeline", example_dir, out, "--num-parts", 4, "--method", "random", "--seed", 5)
    return out


def test_manifest_lists_every_file_with_size_and_checksum(output, example_dir):
    manifest = json.loads((output / "distpart-manifest.json").read_text())
    names = {f"part{p}/{n}" for p in range(4) for n in ("graph.dgl", "node_feat.dgl", "edge_feat.dgl",
                                                            "orig_nids.dgl", "orig_eids.dgl")}
    assert set(manifest["files"]) == names | {"metadata.json"}
    for rel, entry in manifest["files"].items():
        assert entry == {"size": (output / rel).stat().st_size, "sha256": file_digest(output / rel)}
    assert manifest["options"]["num_parts"] == 4 and manifest["options"]["seed"] == 5
    assert len(manifest["input_fingerprint"]) == 64
    assert not list(output.glob("part*/*.partial"))


@pytest.mark.parametrize("nranks", [1, 2, 4])
def test_verify_quick_passes_an_intact_output(output, nranks):
    run = distpart(nranks, "verify", "--quick", output)
    assert "verify --quick: OK (21 files," in run.stdout


def _flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, expected", [
    (lambda o: _flip_byte(o / "part1" / "node_feat.dgl"), "part1/node_feat.dgl: differs from the manifest's checksum"),
    (lambda o: (o / "part3" / "orig_eids.dgl").unlink(), "part3/orig_eids.dgl: is listed in the manifest but missing"),
    (lambda o: (o / "part2" / "graph.dgl").write_bytes((o / "part2" / "graph.dgl").read_bytes()[:100]),
     "part2/graph.dgl: has 100 bytes but the manifest says"),
    (lambda o: (o / "metadata.json").write_text((o / "metadata.json").read_text() + " "),
     "metadata.json: has"),
    (lambda o: (o / "distpart-manifest.json").unlink(), "distpart-manifest.json: does not exist"),
])
def test_verify_quick_names_the_damaged_file(output, tmp_path, damage, expected):
    out = tmp_path / "out"
    shutil.copytree(output, out)
    damage(out)
    run = distpart(2, "verify", "--quick", out, ok=False)
    assert run.returncode == 2 and expected in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_verify_needs_three_folders_without_quick(output):
    run = distpart(1, "verify", output, ok=False)
    assert run.returncode == 2 and "verify takes IN_DIR ASSIGN_DIR OUT_DIR" in run.stderr

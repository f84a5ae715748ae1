"""The package's imports run one way: a part never imports a higher part, no module
imports itself back through others, and no folder's entries (its modules and subfolders,
each subfolder taken whole) import each other in a cycle.

The parts, lowest first (docs/08-layout.md explains each):

    errors/paths/arrays <- mpi <- run <- chunked <- assign <- partitions <- dispatch <- check
    <- synthetic <- launch/steps <- api/commands <- cli <- dgltools <- __init__/__main__

Every import counts: module level, inside functions (lazy) and under TYPE_CHECKING, because
each is a dependency a reader must follow. The walk is pure `ast`: nothing is imported, so
no MPI starts.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "distpart"

# Lowest first. A top-level module is its own entry; a folder's modules are all one part.
ORDER: List[Tuple[str, ...]] = [
    ("errors", "paths", "arrays"),
    ("mpi",),
    ("run",),
    ("chunked",),
    ("assign",),
    ("partitions",),
    ("dispatch",),
    ("check",),
    ("synthetic",),
    ("launch", "steps"),
    ("api", "commands"),
    ("cli",),
    ("dgltools",),            # its scripts run `distpart` commands (cli.main)
    ("__init__", "__main__"),
]
RANK = {name: rank for rank, names in enumerate(ORDER) for name in names}


def module_name(root: Path, path: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(root: Path, path: Path) -> str:
    rel = path.relative_to(root).parts
    return rel[0] if len(rel) > 1 else Path(rel[0]).stem


def imports(root: Path) -> Dict[str, List[Tuple[Path, int, str]]]:
    """module -> [(file relative to the package's parent, line, imported module)] for every
    import of the package by itself."""
    files = {module_name(root, f): f for f in sorted(root.rglob("*.py"))}
    out: Dict[str, List[Tuple[Path, int, str]]] = {}
    for mod, f in files.items():
        package = mod if f.name == "__init__.py" else mod.rsplit(".", 1)[0]
        edges = out.setdefault(mod, [])
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base_mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    base_mod = node.module or ""
                # `from pkg import submodule` depends on the submodule itself.
                targets = [f"{base_mod}.{a.name}" if f"{base_mod}.{a.name}" in files else base_mod
                           for a in node.names]
            else:
                continue
            for t in targets:
                if t == root.name or t.startswith(root.name + "."):
                    while t not in files and "." in t:   # `import distpart.x.attr`
                        t = t.rsplit(".", 1)[0]
                    if t != mod:
                        edges.append((f.relative_to(root.parent), node.lineno, t))
    return out


def problems(root: Path) -> List[str]:
    """Every import against the order, and every cycle, as 'file:line: what' lines."""
    found: List[str] = []
    files = {module_name(root, f): f for f in root.rglob("*.py")}
    graph = imports(root)
    for mod, edges in graph.items():
        src_part = part_of(root, files[mod])
        if src_part not in RANK:
            found.append(f"{files[mod].relative_to(root.parent)}: part {src_part!r} is not in the import "
                         f"order (add it to ORDER)")
            continue
        for f, line, target in edges:
            dst_part = part_of(root, files[target]) if target in files else None
            if dst_part is None or dst_part not in RANK:
                continue
            if RANK[dst_part] > RANK[src_part]:
                found.append(f"{f}:{line}: {mod} imports {target}: part {dst_part!r} is above "
                             f"{src_part!r} in the import order")
    found += [f"{f}:{line}: import cycle: {' -> '.join(loop)}" for f, line, loop in cycles(graph)]
    return found + folder_cycles(root, graph, files)


def cycles(graph: Dict[str, List[Tuple[Path, int, str]]]) -> List[Tuple[Path, int, List[str]]]:
    """Each back edge of a depth-first walk of `graph` (node -> [(file, line, target)]), once,
    as (file, line, the loop it closes)."""
    found: List[Tuple[Path, int, List[str]]] = []
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for f, line, target in graph.get(node, []):
            if state.get(target) == 1:
                found.append((f, line, stack[stack.index(target):] + [target]))
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def folder_cycles(root: Path, graph: Dict[str, List[Tuple[Path, int, str]]],
                  files: Dict[str, Path]) -> List[str]:
    """In every folder, a cycle among its entries (a module, or a subfolder taken whole: any
    module in it) that passes through a subfolder (a cycle of modules alone is an import
    cycle already), as 'file:line: folder cycle in FOLDER: a -> b -> a' at one of its imports."""
    found: List[str] = []
    for folder in sorted({f.parent for f in files.values()}):
        def entry(path: Path) -> str:
            rel = path.relative_to(folder).parts
            return rel[0] if len(rel) > 1 else Path(rel[0]).stem

        # entry -> entry -> the first import that makes the edge
        first: Dict[str, Dict[str, Tuple[Path, int]]] = {}
        for mod, imported in graph.items():
            if folder not in files[mod].parents:
                continue
            for f, line, target in imported:
                if target in files and folder in files[target].parents:
                    a, b = entry(files[mod]), entry(files[target])
                    if a != b:
                        first.setdefault(a, {}).setdefault(b, (f, line))
        edges = {a: [(f, line, b) for b, (f, line) in sorted(to.items())] for a, to in first.items()}
        found += [f"{f}:{line}: folder cycle in {folder.relative_to(root.parent)}: {' -> '.join(loop)}"
                  for f, line, loop in cycles(edges) if any((folder / name).is_dir() for name in loop)]
    return found


def test_the_package_imports_one_way() -> None:
    found = problems(PACKAGE)
    assert not found, "imports against the order or in a cycle:\n" + "\n".join(found)


def test_every_part_is_in_the_order() -> None:
    parts: Set[str] = {part_of(PACKAGE, f) for f in PACKAGE.rglob("*.py")}
    assert parts <= set(RANK), f"parts missing from ORDER: {sorted(parts - set(RANK))}"


def _tree(tmp_path: Path, files: Dict[str, str]) -> Path:
    root = tmp_path / "distpart"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_planted_back_import_is_named_with_file_and_line(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "",
        "errors.py": "",
        "mpi/__init__.py": "",
        "mpi/exchange.py": "from ..errors import X\n",
        "chunked/__init__.py": "",
        "chunked/metadata.py": "from ..errors import X\n",
        "assign/__init__.py": "",
        "assign/ordering.py": "import numpy\n\ndef f():\n    from ..dispatch.relabel import g\n",
        "dispatch/__init__.py": "",
        "dispatch/relabel.py": "from ..chunked.metadata import GraphMeta\n",
    })
    found = problems(root)
    assert len(found) == 1, found
    assert found[0].startswith(f"{Path('distpart', 'assign', 'ordering.py')}:4: ")
    assert "distpart.dispatch.relabel" in found[0] and "'dispatch' is above 'assign'" in found[0]


def test_an_unknown_part_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"__init__.py": "", "extras/__init__.py": "", "extras/thing.py": ""})
    assert any("'extras' is not in the import order" in p for p in problems(root))


@pytest.mark.parametrize("files, loops", [
    # Two modules import each other (TYPE_CHECKING counts).
    ({"chunked/__init__.py": "", "chunked/metadata.py": "from . import blocks\n",
      "chunked/blocks.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .metadata import M\n"},
     ["import cycle: distpart.chunked.metadata -> distpart.chunked.blocks -> distpart.chunked.metadata",
      "import cycle: distpart.chunked.blocks -> distpart.chunked.metadata -> distpart.chunked.blocks"]),
    # No module imports itself back, yet two folders of one part import each other.
    ({"assign/__init__.py": "", "assign/methods/__init__.py": "", "assign/methods/a.py": "from ..tools.b import x\n",
      "assign/tools/__init__.py": "", "assign/tools/b.py": "x = 1\n",
      "assign/tools/c.py": "def f():\n    from ..methods.a import y\n"},
     ["folder cycle in distpart/assign: methods -> tools -> methods",
      "folder cycle in distpart/assign: tools -> methods -> tools"]),
    # The cycle the folder check was written for: cli imported dgltools, dgltools.backend cli.
    ({"cli.py": "from .dgltools import TOOLS_DIR\n", "dgltools/__init__.py": "TOOLS_DIR = 1\n",
      "dgltools/backend.py": "def run():\n    from ..cli import main\n"},
     ["folder cycle in distpart: cli -> dgltools -> cli", "folder cycle in distpart: dgltools -> cli -> dgltools"]),
])
def test_a_planted_cycle_is_named(tmp_path: Path, files: Dict[str, str], loops: List[str]) -> None:
    found = [p for p in problems(_tree(tmp_path, {"__init__.py": "", **files})) if "cycle" in p]
    assert len(found) == 1 and any(loop in found[0] for loop in loops), found

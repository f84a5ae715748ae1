"""Every command in README.md and docs/*.md runs as written.

- Every `distpart` command line in a fenced shell block (directly, `python -m distpart[.cli]`,
  under `mpiexec`/`srun`, or the job after `distpart launch ... --`) is parsed by distpart's own
  argparse parser after its placeholders (IN_DIR, P, $VARS) get sample values: an unknown
  subcommand or option fails, naming the file and line.
- Python blocks compile and use only distpart's public names; `distpart.<name>` in prose too.
- Blocks marked `<!-- docs-test: run -->` on the line before the fence are run, in order, in
  one temporary folder per markdown file; when the next block is ```text (with only prose in
  between), each of its lines must appear in what the run printed.
- Relative links (and their #anchors) and the repository paths the pages name exist.
- Every benchmark number the pages quote about speed, memory or cut is generated from
  `benchmarks/results/` (`benchmarks/docs_numbers.py`, between markers) and up to date, or
  checked here against the results files or the code; README.md, docs/03-step1.md and
  docs/07-performance.md quote none outside the generated snippets.

Nothing here needs a cluster, DGL or SLURM: those blocks are parse-checked only. distpart is
imported inside the tests, so this module loads even while the package is being rearranged.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

import pooled_mpiexec
from harness import mpi_env, start_early

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_MARK = "<!-- docs-test: run -->"
SHELL_LANGS = {"bash", "sh", "shell", "console", ""}
README_MAX_LINES = 200                  # the README is a front page; the rest belongs in docs/
BLOCK_TIMEOUT_S = 120                   # a hung mpiexec must not eat the suite's budget

# What users may write after `distpart.`: the command and the public API (distpart/__init__.py).
PUBLIC_NAMES = {"load_partition", "load_partition_feats", "load_partition_book", "load_orig_ids",
                "partition_graph", "IdConverter", "IdRangeError", "write_graph", "__version__"}
COMMAND_MODULES = {"cli"}

# Placeholders the pages use for values an option parses as a number; every other word
# (IN_DIR, OUT_DIR, ASSIGN_DIR, F, ...) is a path or name and parses as itself.
NUMBER_PLACEHOLDERS = {"P": "4", "R": "2", "N": "2", "K": "2", "T": "2", "S": "10"}
VARIABLE_VALUES = {"NUM_PARTS": "4"}    # $NAME / ${NAME}; others become a sample path

OUTPUT_OPTIONS = {"--json", "--out", "--stats-json", "--log-file"}   # their value is a file to write
REPO_PATH = re.compile(r"^(distpart|tests|mpi_tests|benchmarks|scripts|hostfiles|\.ci|docs)/[\w./-]*$")


# --- markdown ---------------------------------------------------------------------------------

@dataclass
class Block:
    page: Path
    line: int                      # line of the opening fence, 1-based
    lang: str
    lines: List[str]
    run: bool                      # marked <!-- docs-test: run -->
    expected: Optional["Block"] = None   # the ```text block that shows its output

    def where(self, offset: int = 0) -> str:
        """file:line of the block's line `offset` (0 = first line inside the fence)."""
        return f"{self.page.relative_to(ROOT)}:{self.line + 1 + offset}"


@dataclass
class Page:
    path: Path
    blocks: List[Block] = field(default_factory=list)
    prose: List[Tuple[int, str]] = field(default_factory=list)   # (line, text) outside fences


def read_page(path: Path) -> Page:
    page = Page(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    between: List[str] = []        # prose since the last block: may it show that block's output?
    while i < len(lines):
        m = re.match(r"^\s*```\s*([\w+-]*)\s*$", lines[i])
        if not m:
            page.prose.append((i + 1, lines[i]))
            between.append(lines[i])
            i += 1
            continue
        start, lang = i, m.group(1).lower()
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"{path.relative_to(ROOT)}:{start + 1}: the fence is never closed"
        i += 1
        marked = start > 0 and lines[start - 1].strip() == RUN_MARK
        block = Block(path, start + 1, lang, body, marked)
        previous = page.blocks[-1] if page.blocks else None
        if (lang == "text" and previous is not None and previous.run and previous.expected is None
                and not any(t.lstrip().startswith("#") for t in between)):
            previous.expected = block
        page.blocks.append(block)
        between = []
    return page


@pytest.fixture(scope="module", params=PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def page(request) -> Page:
    return read_page(request.param)


# --- shell lines ------------------------------------------------------------------------------

@dataclass
class ShellCommand:
    where: str
    words: List[str]


def shell_lines(block: Block) -> Iterator[Tuple[int, str]]:
    """(offset in block, logical line): continuations joined, `$ ` prompts of console blocks
    stripped (their other lines are output), heredoc bodies left out."""
    i = 0
    while i < len(block.lines):
        first, text = i, block.lines[i]
        if block.lang == "console":
            if not text.startswith("$ "):
                i += 1
                continue
            text = text[2:]
        while text.endswith("\\") and i + 1 < len(block.lines):
            i += 1
            text = text[:-1] + " " + block.lines[i].strip()
        i += 1
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", text)
        if heredoc:
            while i < len(block.lines) and block.lines[i].strip() != heredoc.group(1):
                i += 1
            i += 1
        yield first, text


def heredoc_bodies(block: Block) -> Iterator[Tuple[int, str, str]]:
    """(offset, command line, body) of every heredoc in a shell block."""
    i = 0
    while i < len(block.lines):
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", block.lines[i])
        i += 1
        if not m:
            continue
        start, body = i, []
        while i < len(block.lines) and block.lines[i].strip() != m.group(1):
            body.append(block.lines[i])
            i += 1
        yield start, block.lines[start - 1], "\n".join(body) + "\n"


def commands(where: str, text: str) -> List[ShellCommand]:
    """The simple commands of one shell line, split at ; && || | &, without redirections."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as e:
        raise AssertionError(f"{where}: cannot split the shell line ({e}): {text}") from None
    out, words, skip = [], [], False
    for tok in tokens:
        if skip:
            skip = False
        elif tok in (";", "&&", "||", "|", "&", "(", ")"):
            if words:
                out.append(ShellCommand(where, words))
            words = []
        elif set(tok) <= set("<>&") and tok:
            skip = True            # a redirection and its target
        else:
            words.append(tok)
    if words:
        out.append(ShellCommand(where, words))
    return out


def distpart_argv(words: List[str]) -> Optional[List[str]]:
    """The arguments after `distpart` / `python -m distpart[.cli]` in a command, else None."""
    for i, word in enumerate(words):
        if os.path.basename(word) == "distpart" and not word.startswith("-"):
            return words[i + 1:]
        if word == "-m" and i + 1 < len(words) and words[i + 1] in ("distpart", "distpart.cli"):
            return words[i + 2:]
        if word == "-m":
            return None            # another module (pytest, pip)
    return None


def substitute(word: str) -> str:
    if word in NUMBER_PLACEHOLDERS:
        return NUMBER_PLACEHOLDERS[word]

    def variable(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        return VARIABLE_VALUES.get(name, f"/tmp/sample-{name.lower()}")
    return re.sub(r"\$\{(\w+)[^}]*\}|\$(\w+)", variable, word)


def check_distpart_args(parser: argparse.ArgumentParser, argv: List[str], where: str) -> List[str]:
    """Problems with one distpart command line, as 'file:line: ...' strings."""
    argv = [substitute(w) for w in argv]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit:
        last = err.getvalue().strip().splitlines()
        return [f"{where}: distpart rejects `distpart {' '.join(argv)}`: {last[-1] if last else '?'}"]
    if args.command == "verify" and not (len(args.dirs) == 3 or (len(args.dirs) == 1 and args.quick)):
        return [f"{where}: verify takes IN_DIR ASSIGN_DIR OUT_DIR (or --quick OUT_DIR): `distpart {' '.join(argv)}`"]
    if args.command == "launch":
        job = list(args.job)
        if job and job[0] == "--":
            job = job[1:]
        if not job:
            return [f"{where}: `distpart launch` without a job after `--`"]
        if job[0] in ("launch", "hostfile", "example"):
            return [f"{where}: `{job[0]}` is not a job distpart launch starts"]
        return check_distpart_args(parser, job, where)
    return []


def distpart_commands(page: Page) -> Iterator[Tuple[str, List[str]]]:
    """(file:line, arguments) of every distpart command in the page's shell blocks."""
    for block in page.blocks:
        if block.lang not in SHELL_LANGS:
            continue
        for offset, text in shell_lines(block):
            for cmd in commands(block.where(offset), text):
                argv = distpart_argv(cmd.words)
                if argv is not None:
                    yield cmd.where, argv


def cli_parser() -> argparse.ArgumentParser:
    from distpart.cli import _parser
    return _parser()


# --- the parse checks -------------------------------------------------------------------------

def test_every_distpart_command_parses(page: Page):
    parser = cli_parser()
    problems = [p for where, argv in distpart_commands(page) for p in check_distpart_args(parser, argv, where)]
    assert not problems, "commands the docs show that distpart would refuse:\n" + "\n".join(problems)


def test_the_docs_show_the_pipeline():
    """Guards the extraction itself: if it silently found nothing, every check above would pass."""
    found = {argv[0] for p in PAGES for _, argv in distpart_commands(read_page(p)) if argv}
    assert {"validate", "assign", "dispatch", "verify", "report", "pipeline", "launch", "chunk",
            "example", "hostfile"} <= found


@pytest.mark.parametrize("line, problem", [
    ("distpart pipeline IN_DIR OUT_DIR --num-parts P --no-such-option", "unrecognized arguments"),
    ("mpiexec -n 2 distpart frobnicate IN_DIR", "invalid choice"),
    ("srun --mpi=pmix -n 4 .venv/bin/python -m distpart pipeline IN_DIR OUT_DIR", "--num-parts"),
    ("distpart launch --hostfile F -- pipeline IN_DIR OUT_DIR --num-parts P --metod random", "unrecognized"),
    ("distpart verify IN_DIR OUT_DIR", "verify takes"),
    ("distpart assign IN_DIR A --num-parts $NUM_PARTS --method metis  # a comment", "invalid choice"),
])
def test_the_checker_rejects_what_distpart_rejects(line, problem):
    parser = cli_parser()
    cmds = [argv for c in commands("x:1", line) for argv in [distpart_argv(c.words)] if argv is not None]
    assert len(cmds) == 1
    found = check_distpart_args(parser, cmds[0], "x:1")
    assert found and problem in found[0], found


def test_the_checker_finds_commands_in_every_form():
    block = Block(ROOT / "README.md", 1, "bash", [
        "distpart example /tmp/ex && mpiexec -n 2 distpart pipeline /tmp/ex /tmp/o --num-parts 4",
        "PYTHONPATH=$PWD mpiexec -n 2 $DGL -m distpart.cli pipeline a b \\",
        "    --num-parts 2 --method random",
        "python - <<'EOF'",
        "distpart not-a-command-inside-a-heredoc",
        "EOF",
        "python -m pytest -s mpi_tests/test_dgl_training.py",
        "distpart hostfile ip_config.txt --slots 2 > out.hostfile",
    ], run=False)
    page = Page(ROOT / "README.md", [block])
    found = [argv for _, argv in distpart_commands(page)]
    assert [a[0] for a in found] == ["example", "pipeline", "pipeline", "hostfile"]
    assert found[2][-2:] == ["--method", "random"]
    assert found[3] == ["hostfile", "ip_config.txt", "--slots", "2"]


def python_sources(page: Page) -> Iterator[Tuple[str, str]]:
    """(file:line, source) of every Python block and every `python - <<EOF` body."""
    for block in page.blocks:
        if block.lang in ("python", "py"):
            yield block.where(), "\n".join(block.lines) + "\n"
        elif block.lang in SHELL_LANGS:
            for offset, command, body in heredoc_bodies(block):
                if re.search(r"\bpython3?\b", command):
                    yield block.where(offset), body


def test_python_blocks_compile_and_use_public_names(page: Page):
    problems = []
    for where, source in python_sources(page):
        try:
            tree = ast.parse(source)
        except SyntaxError as e:
            problems.append(f"{where}: does not compile: {e}")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("distpart."):
                problems.append(f"{where}: `from {node.module} import ...`: use `from distpart import ...`")
            elif isinstance(node, ast.ImportFrom) and node.module == "distpart":
                problems += [f"{where}: `distpart.{a.name}` is not a public name"
                             for a in node.names if a.name not in PUBLIC_NAMES]
            elif isinstance(node, ast.Import):
                problems += [f"{where}: `import {a.name}`: use `import distpart`"
                             for a in node.names if a.name.startswith("distpart.")]
    assert not problems, "\n".join(problems)


def test_distpart_names_in_the_text_are_public(page: Page):
    """`distpart.<name>` anywhere on the page: the public API or the command module."""
    problems = []
    text = page.path.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(text, 1):
        for name in re.findall(r"(?<![\w/.-])distpart\.(\w+)", line):
            if name not in PUBLIC_NAMES | COMMAND_MODULES:
                problems.append(f"{page.path.relative_to(ROOT)}:{n}: `distpart.{name}` is not a public name")
    assert not problems, "\n".join(problems)


def test_public_names_exist():
    import distpart
    missing = sorted(n for n in PUBLIC_NAMES if not hasattr(distpart, n))
    assert not missing, f"the docs use distpart.{missing} but distpart does not export them"


def test_json_blocks_parse(page: Page):
    import json
    for block in page.blocks:
        if block.lang == "json":
            try:
                json.loads("\n".join(block.lines))
            except ValueError as e:
                pytest.fail(f"{block.where()}: not JSON: {e}")


# --- links and paths --------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]{2,}|`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set:
    return {slug(m.group(1)) for line in read_page(path).prose
            for m in [re.match(r"^#{1,6}\s+(.*)$", line[1])] if m}


def test_links_resolve(page: Page):
    problems = []
    for n, line in page.prose:
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+://", target):
                continue
            file_part, _, anchor = target.partition("#")
            path = (page.path.parent / file_part).resolve() if file_part else page.path
            where = f"{page.path.relative_to(ROOT)}:{n}"
            if not path.exists():
                problems.append(f"{where}: link to {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                problems.append(f"{where}: link to {target}: no heading with that anchor")
    assert not problems, "\n".join(problems)


def named_paths(page: Page) -> Iterator[Tuple[str, str]]:
    """(file:line, path) of repository paths in inline code and in shell commands."""
    rel = page.path.relative_to(ROOT)
    for n, line in page.prose:
        for span in re.findall(r"`([^`]+)`", line):
            yield f"{rel}:{n}", span
    for block in page.blocks:
        if block.lang in SHELL_LANGS:
            for offset, text in shell_lines(block):
                for cmd in commands(block.where(offset), text):
                    for before, word in zip([""] + cmd.words, cmd.words):
                        if before not in OUTPUT_OPTIONS:     # a file the command writes need not exist
                            yield block.where(offset), word[2:] if word.startswith("./") else word


def test_named_repository_paths_exist(page: Page):
    problems = [f"{where}: `{p}` does not exist" for where, p in named_paths(page)
                if REPO_PATH.match(p) and not any(c in p for c in "*<>") and not (ROOT / p).exists()]
    assert not problems, "\n".join(problems)


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details into docs/"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("./scripts/example.sh", "./scripts/test.sh"):
        assert command in text


def test_every_page_is_in_the_index():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in PAGES:
        if path.parent.name == "docs" and path.name != "README.md":
            assert f"({path.name})" in index, f"docs/README.md does not list {path.name}"
            assert f"(docs/{path.name})" in readme, f"README.md does not link docs/{path.name}"


# --- running the marked blocks ----------------------------------------------------------------

def run_env() -> Dict[str, str]:
    """The environment of `source scripts/mpienv.sh` (with the harness's settings for many
    short jobs side by side), with this checkout first on the path."""
    env = mpi_env()
    if "PYTHONUNBUFFERED" not in os.environ:   # a block's output interleaves as a user sees it
        del env["PYTHONUNBUFFERED"]
    venv_bin = ROOT / ".venv" / "bin"
    env["PATH"] = os.pathsep.join([str(venv_bin), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_block(block: Block, cwd: Path) -> str:
    """Run a marked block; its combined output. Fails naming the block when it fails."""
    source = "\n".join(block.lines) + "\n"
    if block.lang in ("python", "py"):
        argv = [sys.executable, "-c", source]
    else:
        argv = ["bash", "-c", "set -euo pipefail\n" + source]
    # The block's `mpiexec -n R distpart ...` runs in this worker's standing MPI jobs.
    with pooled_mpiexec.serving(run_env(), BLOCK_TIMEOUT_S) as env:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)   # mpiexec and its ranks with it
            out, _ = proc.communicate()
            pytest.fail(f"{block.where()}: still running after {BLOCK_TIMEOUT_S} s:\n{out[-3000:]}")
    assert proc.returncode == 0, f"{block.where()}: exit status {proc.returncode}:\n{out[-3000:]}"
    return out


def normalized(line: str) -> str:
    return " ".join(line.split())


@start_early
@pytest.mark.parametrize("path", [p for p in PAGES if any(b.run for b in read_page(p).blocks)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_marked_blocks_run(path: Path, tmp_path: Path):
    for block in read_page(path).blocks:
        if not block.run:
            continue
        assert block.lang in ("python", "py", "bash", "sh"), f"{block.where()}: cannot run ```{block.lang}"
        out = run_block(block, tmp_path)
        if block.expected is not None:
            printed = {normalized(line) for line in out.splitlines()}
            missing = [line for line in block.expected.lines if line.strip() and normalized(line) not in printed]
            assert not missing, (f"{block.where()}: the output shown at {block.expected.where()} differs; "
                                 f"not printed: {missing}\nprinted:\n{out[-3000:]}")


# --- numbers from the results files -----------------------------------------------------------

def docs_numbers():
    """benchmarks/docs_numbers.py, the generator of every benchmark number the pages quote."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import docs_numbers as module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_generated_numbers_match_the_results_files():
    """A benchmark rerun changes benchmarks/results/*.json; the pages and tables must follow."""
    stale = docs_numbers().stale()
    assert not stale, (f"out of date with benchmarks/results/: {stale}; "
                       "run `python benchmarks/docs_numbers.py` and commit the result")


def test_every_snippet_is_embedded_once_known():
    gen = docs_numbers()
    used = gen.used_snippets()
    assert set(used) == set(gen.SNIPPETS), (f"unknown: {sorted(set(used) - set(gen.SNIPPETS))}, "
                                            f"never embedded: {sorted(set(gen.SNIPPETS) - set(used))}")
    assert all(len(pages) == 1 for pages in used.values()), used


def test_the_checker_sees_a_stale_number(tmp_path: Path):
    """Guards the check itself: a snippet edited by hand, or a changed results file, is caught."""
    gen = docs_numbers()
    page = (ROOT / "docs" / "03-step1.md").read_text(encoding="utf-8")
    assert gen.render(page) == page
    edited = page.replace("| RMAT 2M/20M, nodes | ", "| RMAT 2M/20M, nodes | 1", 1)
    assert edited != page and gen.render(edited) == page
    import shutil
    results = tmp_path / "results"
    shutil.copytree(ROOT / "benchmarks" / "results", results)
    data = json.loads((results / "assign_rmat_2m.json").read_text())
    data["rows"][0]["time_s"] += 1.0
    (results / "assign_rmat_2m.json").write_text(json.dumps(data))
    assert gen.render(page, results) != page


# Pages whose benchmark numbers all come from generated snippets: their prose and code outside
# the markers quote no time, memory size or cut percentage.
NUMBER_FREE_PAGES = ["README.md", "docs/03-step1.md", "docs/07-performance.md"]
MEASUREMENT = re.compile(r"\b\d[\d,.]*\s?(%|s\b|ms\b|min\b|minutes\b|MB\b|GB\b|x\b)")


@pytest.mark.parametrize("name", NUMBER_FREE_PAGES)
def test_no_measurement_outside_the_generated_snippets(name: str):
    inside, problems = False, []
    for n, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().startswith("<!-- generated by benchmarks/docs_numbers.py"):
            inside = True
        elif line.strip().startswith("<!-- end generated:"):
            inside = False
        elif not inside:
            problems += [f"{name}:{n}: `{m.group(0)}` is a measurement no results file backs: "
                         f"generate it (benchmarks/docs_numbers.py)" for m in MEASUREMENT.finditer(line)]
    assert not problems, "\n".join(problems)


def _assign_rows() -> List[dict]:
    return [r for f in sorted((ROOT / "benchmarks" / "results").glob("assign_*.json"))
            for r in json.loads(f.read_text())["rows"]]


def test_multilevel_never_over_the_imbalance_as_docs_say():
    """docs/03-step1.md: 'Multilevel never went over --imbalance in the suite'."""
    rows = [r for r in _assign_rows() if r["method"].startswith("multilevel") and "cut_pct" in r]
    assert len(rows) > 50
    over = [(r["graph"], r["constraints"], r["imbalance_allowed"], r["over"]) for r in rows if r.get("over")]
    assert not over, f"docs/03-step1.md says multilevel never exceeds --imbalance, but: {over}"


def _code_constant(name: str) -> str:
    """The value of `NAME = value` wherever distpart defines it (modules move; names stay)."""
    found = [m.group(1) for path in (ROOT / "distpart").rglob("*.py")
             for m in re.finditer(rf"^{name}\s*=\s*([^\s#]+)", path.read_text(encoding="utf-8"), re.M)]
    assert len(found) == 1, f"{name}: defined {len(found)} times in distpart/"
    return found[0]


def test_kaminpar_memory_estimate_is_the_code_s():
    """docs/03-step1.md quotes the estimate KaMinPar runs are refused by."""
    text = (ROOT / "docs" / "03-step1.md").read_text(encoding="utf-8")
    m = re.search(r"about (\d+) bytes per vertex plus (\d+) per adjacency entry", text)
    assert m, "docs/03-step1.md no longer quotes KaMinPar's memory estimate: update this test"
    assert (m.group(1), m.group(2)) == (_code_constant("MEMORY_PER_VERTEX"), _code_constant("MEMORY_PER_ENTRY"))

"""Every fenced code block of README.md and docs/**/*.md is run, checked or
accounted for.

The rule, by the block's language (the first word after the fence):

* ``python``: run. The python blocks of one page are one program: they run
  in page order in one interpreter (a child process), so a block can use
  what an earlier block of its page defined.
* ``sh``, ``bash``, ``shell``: run by ``bash -e -o pipefail``, each block in
  a shell of its own (files carry over to later blocks, variables and ``cd``
  do not).
* ``console``: a terminal transcript. Its lines starting with ``$ `` (with
  their ``\\`` continuation lines) are run as one ``sh`` block; the other
  lines are sample output and are not compared.
* ``c``: compiled (``-std=c11 -Wall -Wextra -Werror -fsyntax-only`` with the
  flags of ``acc-host sdk --cflags``). ``json``, ``toml``: parsed.
* ``text``, ``plain``, ``output``: sample output, not code; not run.
* Any other language, or a fence without one, fails the test unless marked.

Every page runs in a new temporary directory of its own, in which
``tests/models`` and ``tests/onnx_models`` are links to the checkout's, so
the docs' paths read as from the checkout root and nothing is written into
the checkout. Blocks run in page order. The environment: this tree's
acc_host first on ``PYTHONPATH``; ``acc-host``, ``python``, ``python3`` and
``pytest`` on ``PATH`` run this interpreter; the caller's acc-host, engine
and plugin variables (``MXNET_*``, ``CPU_REF_*``, ``ACC_CPU_REF_*``,
``MLU_SIM_*``) are removed.

Markers: an HTML comment on the line right above the fence.

* ``<!-- doc-test: skip: REASON -->``: not run, for the reason given (the
  README's install commands, which CI runs itself). Keep these few.
* ``<!-- doc-test: tests/<layer>/test_x.py -->``: run by that test instead; the
  file must exist and name the page.
* ``<!-- doc-test: file NAME -->``: written to NAME in the page's directory
  instead of being run (a source or a script that later blocks use).
* ``<!-- doc-test: needs NAME from PAGE -->``: before the block runs, NAME
  in the page's directory gets the one block of PAGE in NAME's language
  (``myacc.c`` from ``docs/quickstart.md``: one copy of the code in the docs).

``python tests/project/test_docs.py`` prints the inventory: blocks per page and
language, and what happens to each.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.paths import ROOT

SRC = ROOT / "src"
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINKED_DIRS = ("tests/models", "tests/onnx_models", "tests/mxnet_expected", "docs/examples")

RUN = {"python", "sh", "bash", "shell", "console", "c", "json", "toml"}
SAMPLES = {"text", "plain", "output"}
# The environment variables of acc-host, its engine and the bundled plugins.
CLEARED_PREFIXES = ("MXNET_", "CPU_REF_", "ACC_CPU_REF_", "MLU_SIM_")
MAX_SKIPS = 8  # skips must stay few (5 in README.md, onnx.md and performance.md)
BLOCK_TIMEOUT = 300.0
# Variables the environment table need not name.
GENERIC_VARIABLES = {"PATH", "PYTHONPATH", "HOME", "TMPDIR"}

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`\n]*)$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
NEEDS = re.compile(r"^needs (?P<name>\S+) from (?P<page>\S+)$")
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: str | None  # the doc-test comment right above the fence

    @property
    def where(self) -> str:
        return f"{page_id(self.page)}:{self.line}"

    @property
    def action(self) -> str:
        """run, sample, skip, covered, file or unknown."""
        if self.marker is not None:
            if self.marker.startswith("skip:"):
                return "skip"
            if self.marker.startswith("tests/"):
                return "covered"
            if self.marker.startswith("file "):
                return "file"
        if self.language in RUN:
            return "run"
        if self.language in SAMPLES:
            return "sample"
        return "unknown"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a markdown page, with the marker above each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    number = 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if opening is None:
            number += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        language = opening["info"].strip().split(" ")[0].lower()
        end = number + 1
        while end < len(lines) and not (lines[end].strip().startswith(fence)
                                        and set(lines[end].strip()) == {"`"}):
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page_id(page)}:{number + 1}: unclosed fence")
        code = "".join(_dedent(line, indent) + "\n" for line in lines[number + 1:end])
        above = MARKER.match(lines[number - 1]) if number > 0 else None
        found.append(Block(page, number + 1, language, code, above["body"] if above else None))
        number = end + 1
    return found


def _dedent(line: str, indent: int) -> str:
    """line without the fence's indentation (at most indent blanks)."""
    blanks = len(line) - len(line.lstrip(" \t"))
    return line[min(blanks, indent):]


def stray_markers(page: Path) -> list[str]:
    """doc-test comments that are not right above a fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    return [f"{page_id(page)}:{k + 1}" for k, line in enumerate(lines)
            if "doc-test:" in line and MARKER.match(line)
            and not (k + 1 < len(lines) and FENCE.match(lines[k + 1]))]


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


# ---- what every block is ----------------------------------------------------------------


def marker_problem(block: Block) -> str | None:
    """Why a block's marker or language is not acceptable, or None."""
    marker = block.marker
    if marker is not None:
        if marker.startswith("skip:"):
            return None if marker[5:].strip() else "skip without a reason"
        if marker.startswith("tests/"):
            test = ROOT / marker
            if not (test.is_file() and test.suffix == ".py"):
                return f"{marker} does not exist"
            if block.page.name not in test.read_text(encoding="utf-8"):
                return f"{marker} does not name {block.page.name}"
            return None
        if marker.startswith("file "):
            name = marker[5:].strip()
            return None if name and "/" not in name else f"bad file name in {marker!r}"
        needs = NEEDS.match(marker)
        if needs is None:
            return f"unknown marker {marker!r}"
        source = ROOT / needs["page"]
        if not source.is_file():
            return f"{needs['page']} does not exist"
        if len(_source_blocks(needs["name"], source)) != 1:
            return f"{needs['page']} must have exactly one block for {needs['name']}"
    if block.action == "unknown":
        return (f"a ```{block.language or '(no language)'} block: give it a language this "
                "test runs or `text`, or mark it")
    return None


def _source_blocks(name: str, page: Path) -> list[Block]:
    language = {".c": "c", ".h": "c", ".py": "python", ".sh": "sh", ".json": "json"}.get(
        Path(name).suffix, "")
    return [block for block in blocks(page) if block.language == language]


def test_every_block_is_accounted_for() -> None:
    problems = [f"{block.where}: {problem}" for block in all_blocks()
                if (problem := marker_problem(block)) is not None]
    problems += [f"{where}: doc-test comment not right above a fence"
                 for page in PAGES for where in stray_markers(page)]
    assert not problems, "\n".join(problems)


def test_skips_are_few() -> None:
    skipped = [f"{block.where}: {block.marker}" for block in all_blocks()
               if block.action == "skip"]
    assert len(skipped) <= MAX_SKIPS, "\n".join(skipped)


def _without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def anchors(page: Path) -> set[str]:
    """GitHub's ids of the page's headings."""
    headings = re.findall(r"^#+ (.+)$", _without_code(page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in headings}


def test_relative_links_resolve() -> None:
    broken = []
    for page in PAGES:
        for match in LINK.finditer(_without_code(page.read_text(encoding="utf-8"))):
            target, _, anchor = match["target"].partition("#")
            if re.match(r"[a-z]+:", target):
                continue
            path = page.parent / target if target else page
            if not path.exists():
                broken.append(f"{page_id(page)}: {match['target']}")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page_id(page)}: {match['target']} (no such heading)")
    assert not broken, "\n".join(broken)


# ---- running a page ----------------------------------------------------------------------


def environment(bin_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(CLEARED_PREFIXES)}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def make_shims(bin_dir: Path) -> None:
    """acc-host, python, python3 and pytest: this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    commands = {"acc-host": "-m acc_host", "python": "", "python3": "", "pytest": "-m pytest"}
    for name, arguments in commands.items():
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {arguments} "$@"\n')
        shim.chmod(0o755)


_DRIVER = r"""
import json, sys, traceback
namespace = {"__name__": "__main__"}
sentinel = sys.argv[1]
while True:
    line = sys.stdin.readline()
    if not line:
        break
    request = json.loads(line)
    status = "ok"
    try:
        exec(compile(request["code"], request["name"], "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        status = "error"
    sys.stdout.flush()
    sys.stderr.flush()
    print(sentinel + status, flush=True)
"""


class PythonSession:
    """One interpreter that runs a page's python blocks in turn."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.sentinel = f"@@doc-test-{uuid.uuid4().hex}@@"
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-c", _DRIVER, self.sentinel], cwd=cwd, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def run(self, code: str, name: str, timeout: float) -> tuple[bool, str]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"code": code, "name": name}) + "\n")
        self.process.stdin.flush()
        output: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False, "".join(output) + f"\n(timed out after {timeout:.0f} s)"
            if line is None:
                return False, "".join(output) + "\n(the interpreter exited)"
            if line.startswith(self.sentinel):
                return line[len(self.sentinel):].strip() == "ok", "".join(output)
            output.append(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def console_commands(code: str) -> str:
    """The commands of a transcript: "$ " lines and their continuations."""
    commands: list[str] = []
    continued = False
    for line in code.splitlines():
        if continued or line.startswith("$ "):
            commands.append(line if continued else line[2:])
            continued = line.rstrip().endswith("\\")
    return "\n".join(commands) + "\n"


def check_c(code: str, cwd: Path, env: dict[str, str]) -> tuple[bool, str]:
    source = cwd / "doc_block.c"
    source.write_text(code, encoding="utf-8")
    flags = subprocess.run(["acc-host", "sdk", "--cflags"], cwd=cwd, env=env,
                           capture_output=True, text=True, check=False)
    if flags.returncode != 0:
        return False, flags.stderr
    compiler = os.environ.get("CC") or shutil.which("cc") or "gcc"
    done = subprocess.run([compiler, "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                           *flags.stdout.split(), str(source)], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)
    return done.returncode == 0, done.stdout + done.stderr


def check_data(language: str, code: str) -> tuple[bool, str]:
    try:
        if language == "json":
            json.loads(code)
        else:
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10: tomli where installed, else unchecked
                tomllib = pytest.importorskip("tomli")
            tomllib.loads(code)
    except ValueError as error:
        return False, str(error)
    return True, ""


def run_shell(script: str, cwd: Path, env: dict[str, str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=BLOCK_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as error:
        return False, f"{error.output or ''}\n(timed out after {BLOCK_TIMEOUT:.0f} s)"
    return done.returncode == 0, done.stdout


class PageRun:
    """A page's directory, environment and python session."""

    def __init__(self, page: Path, directory: Path) -> None:
        self.page = page
        self.directory = directory / "page"
        self.directory.mkdir(parents=True)
        for name in LINKED_DIRS:
            (self.directory / name).parent.mkdir(parents=True, exist_ok=True)
            (self.directory / name).symlink_to(ROOT / name, target_is_directory=True)
        make_shims(directory / "bin")
        self.env = environment(directory / "bin")
        self.session: PythonSession | None = None
        self.timings: list[tuple[Block, float]] = []

    def run(self, block: Block) -> tuple[bool, str]:
        start = time.perf_counter()
        try:
            return self._run(block)
        finally:
            self.timings.append((block, time.perf_counter() - start))

    def _run(self, block: Block) -> tuple[bool, str]:
        needs = NEEDS.match(block.marker or "")
        if needs is not None:
            (source,) = _source_blocks(needs["name"], ROOT / needs["page"])
            (self.directory / needs["name"]).write_text(source.code, encoding="utf-8")
        if block.action == "file":
            (self.directory / block.marker[5:].strip()).write_text(block.code, encoding="utf-8")
            return True, ""
        language = block.language
        if language == "python":
            if self.session is None:
                self.session = PythonSession(self.directory, self.env)
            return self.session.run(block.code, block.where, BLOCK_TIMEOUT)
        if language in ("sh", "bash", "shell"):
            return run_shell(block.code, self.directory, self.env)
        if language == "console":
            return run_shell(console_commands(block.code), self.directory, self.env)
        if language == "c":
            return check_c(block.code, self.directory, self.env)
        return check_data(language, block.code)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def run_page(page: Path, directory: Path) -> Iterator[tuple[Block, bool, str]]:
    """Runs the page's blocks in order; yields each run block's result."""
    page_run = PageRun(page, directory)
    try:
        for block in blocks(page):
            if block.action in ("run", "file"):
                ok, output = page_run.run(block)
                yield block, ok, output
    finally:
        page_run.close()


RUNNABLE_PAGES = [page for page in PAGES
                  if any(block.action in ("run", "file") for block in blocks(page))]


# The pages whose blocks take longest (they build plugins and run the
# conformance checks, the CLI and the guides' models): the default run
# leaves them out, the full run runs them.
SLOW_PAGES = {"docs/cli.md", "docs/conformance.md", "docs/plugin_guide.md",
              "docs/user_guide.md"}


def uses_onnx(page: Path) -> bool:
    """Whether a block the page runs names onnx (mx.onnx, an .onnx model):
    such a page needs the onnx package."""
    return any(block.action == "run" and re.search(r"\bonnx\b", block.code)
               for block in blocks(page))


@pytest.mark.parametrize("page", [
    pytest.param(page, marks=[*([pytest.mark.needs_onnx] if uses_onnx(page) else []),
                              *([pytest.mark.slow] if page_id(page) in SLOW_PAGES else [])])
    for page in RUNNABLE_PAGES], ids=page_id)
def test_page_blocks_run(page: Path, tmp_path: Path) -> None:
    for block, ok, output in run_page(page, tmp_path):
        if not ok:
            excerpt = "".join(block.code.splitlines(keepends=True)[:12])
            pytest.fail(f"{block.where}: the ```{block.language} block failed:\n{excerpt}\n"
                        f"--- output ---\n{output[-6000:]}", pytrace=False)


def test_the_runner_follows_its_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXNET_ENGINE_TYPE", "NaiveEngine")  # removed for the blocks
    page = tmp_path / "rules.md"
    page.write_text("""\
<!-- doc-test: file data.txt -->
```text
written, not run
```

```python
seen = open("data.txt").read().strip()
import os
```

```console
$ test "$(cat data.txt)" = "written, not run" && echo "$MXNET_ENGINE_TYPE" > engine.txt
ignored output
$ acc-host sdk --abi-version > version.txt \\
    && true
```

- an indented block in a list:

  ```python
  print(seen, os.path.exists("engine.txt"), open("version.txt").read().strip())
  ```

```sh
false
echo never
```
""", encoding="utf-8")
    found = blocks(page)
    assert [(b.language, b.action) for b in found] == [
        ("text", "file"), ("python", "run"), ("console", "run"), ("python", "run"),
        ("sh", "run")]
    assert console_commands(found[2].code).count("\n") == 3
    results = list(run_page(page, tmp_path / "run"))
    assert [ok for _, ok, _ in results] == [True, True, True, True, False]
    assert results[3][2] == "written, not run True 1.2\n"  # python state carried over
    assert (tmp_path / "run" / "page" / "engine.txt").read_text() == "\n"
    assert "never" not in results[4][2]


def test_every_environment_variable_is_documented() -> None:
    guide = (ROOT / "docs" / "user_guide.md").read_text(encoding="utf-8")
    table = guide[guide.index("## Environment variables"):]
    documented = {name for row in table.splitlines() if row.startswith("| `")
                  for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}
    read: set[str] = set()
    for path in [*SRC.rglob("*.py"), ROOT / "build_plugins.py", ROOT / "tests" / "conftest.py",
                 *(ROOT / "tests" / "support").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        read.update(re.findall(r'"((?:MXNET|OPENBLAS|OMP|MKL)_[A-Z0-9_]+)"', text))
        read.update(re.findall(r'environ(?:\.get)?[(\[]\s*"([A-Z][A-Z0-9_]*)"', text))
    for path in (ROOT / "plugins").rglob("*.c"):
        read.update(re.findall(r'(?:getenv|read_env)\("([A-Z][A-Z0-9_]*)"',
                               path.read_text(encoding="utf-8")))
    assert read - GENERIC_VARIABLES - documented == set(), "missing from docs/user_guide.md"
    assert documented - read == set(), "documented but read nowhere"


def test_abi_changelog_starts_at_the_header_version() -> None:
    header = (ROOT / "include" / "mxnet_acc.h").read_text(encoding="utf-8")
    major, minor = (re.search(rf"#define MX_ACC_API_VERSION_{part} (\d+)", header)[1]
                    for part in ("MAJOR", "MINOR"))
    abi = (ROOT / "docs" / "abi.md").read_text(encoding="utf-8")
    changelog = abi[abi.index("## Changelog"):]
    versions = re.findall(r"^### (\d+)\.(\d+) ", changelog, re.M)
    assert versions and versions[0] == (major, minor), "add the header's version to the changelog"
    assert f"ABI version: **{major}.{minor}**" in abi


def test_architecture_diagram_is_rendered_from_its_source() -> None:
    source, svg = ROOT / "docs" / "architecture.dot", ROOT / "docs" / "architecture.svg"
    assert "(architecture.svg)" in (ROOT / "docs" / "architecture.md").read_text()
    nodes = set(re.findall(r"^\s*(\w+) \[label=", source.read_text(), re.M))
    drawn = set(re.findall(r'class="node">\s*<title>([^<]+)</title>', svg.read_text()))
    assert nodes and drawn == nodes, "render docs/architecture.svg again (dot -Tsvg)"
    dot = shutil.which("dot")
    if dot is None:
        return
    rendered = subprocess.run([dot, "-Tsvg", str(source)], capture_output=True, text=True,
                              check=True).stdout
    version = re.compile(r"Generated by graphviz version ([^\n]*)")
    if version.search(rendered)[1] == version.search(svg.read_text())[1]:
        assert rendered == svg.read_text(), "render docs/architecture.svg again (dot -Tsvg)"


# ---- the inventory -----------------------------------------------------------------------


def inventory() -> str:
    """Blocks per page and action, then totals per language and the skips."""
    rows, totals = [], Counter[tuple[str, str]]()
    for page in PAGES:
        counts = Counter((block.language or "-", block.action) for block in blocks(page))
        if counts:
            listed = ", ".join(f"{count} {language} {action}"
                               for (language, action), count in sorted(counts.items()))
            rows.append(f"{page_id(page)}: {listed}")
        totals.update(counts)
    rows.append("")
    rows += [f"{action:8} {language:8} {count}"
             for (language, action), count in sorted(totals.items(), key=lambda kv: kv[0][::-1])]
    rows += ["", *(f"{block.where}: {block.marker}" for block in all_blocks()
                   if block.action in ("skip", "covered"))]
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    """Prints the inventory; with --run [--show] [PAGE ...], runs pages (all
    by default) with timings, --show printing every block's output."""
    print(inventory())
    if argv[:1] != ["--run"]:
        return 0
    import tempfile

    show = "--show" in argv
    chosen = [ROOT / name for name in argv[1:] if name != "--show"] or RUNNABLE_PAGES
    failed = 0
    for page in chosen:
        with tempfile.TemporaryDirectory() as directory:
            start = last = time.perf_counter()
            for block, ok, output in run_page(page, Path(directory)):
                now = time.perf_counter()
                print(f"{'ok  ' if ok else 'FAIL'} {now - last:5.1f} s  {block.where} "
                      f"{block.language}")
                last = now
                if not ok:
                    failed += 1
                if show or not ok:
                    print(output[-4000:])
            print(f"  {page_id(page)}: {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

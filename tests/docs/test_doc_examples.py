"""Every command example in README.md and docs/*.md runs as shown, or says why it cannot.

A *command block* is a fenced block (any info string but a programming language's)
with a line that invokes scenc: `scenc ...`, `$ scenc ...`, `.venv/bin/scenc ...`, or
`... && .venv/bin/scenc ...`. Each one is either

* a ```console block: every `$ ` line is a command (a line ending in `\\` continues on
  the next), run with `bash -c` in a scratch folder shared by the blocks of the same
  document, in document order; the lines after it, up to the next `$ `, are its
  output (stdout and stderr together, as a terminal shows them). A command that exits
  non-zero must show `(exit status N)` as its last output line. The block's directive
  on the line before the fence, `<!-- doc-test: slow -->`, puts it under the `slow`
  marker; or
* marked illustrative on the line before the fence, with the reason:
  `<!-- illustrative: a 45 s comparison whose verdicts are the machine's -->`.

Outputs are compared after masking what differs from run to run: every number becomes
`#` (times, confidence intervals, sizes, pids, dates in file names; a histogram's bar of
`#`s too), `0x...` pointers `<address>`, the scratch folder `<dir>` and the checkout
`<repo>`; runs of blank space become one space and blank lines are dropped; the count
after a share at the end of a line (the outliers column, present only when a run was an
outlier) is dropped; `(cached)` after `built ...` reads as a build time. In the shown output, a line `...` stands for any
number of lines and `...` inside a line for any text: what a reader sees as an elision.

The scratch folder has `examples`, `tests`, `bench` and `docs` linked from the checkout
and `.venv/bin/scenc` linked to this interpreter's scenc, and `scenc` is first in PATH.
A block may use what the blocks before it in its document made (a program built, a
capture); a block selected alone (`-k`, `-m slow`) first runs those before it, unchecked.

To see what a block prints now (to paste into the doc):
`.venv/bin/python tests/docs/test_doc_examples.py docs/quickstart.md`.
"""

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = ("examples", "tests", "bench", "docs")
CODE_LANGUAGES = {"c", "cc", "cpp", "c++", "python", "py", "scn", "json", "yaml", "yml", "ini", "csv",
                  "toml", "make", "diff"}
COMMAND = re.compile(r"(?:^|&&\s*|^\$\s+)(?:\S*/)?scenc(?:\s|$)")
DIRECTIVE = re.compile(r"^<!--\s*(illustrative|doc-test):\s*(.*?)\s*-->$")
FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)")
COMMAND_TIMEOUT_S = 600


@dataclass
class Block:
    doc: Path
    line: int                  # 1-based line of the opening fence
    language: str
    text: list                 # the block's lines, dedented by the fence's indent
    directive: tuple = None    # ("illustrative", reason) or ("doc-test", flags)
    commands: list = field(default_factory=list)   # [(command, [expected output lines])]

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO) if self.doc.is_relative_to(REPO) else self.doc}:{self.line}"

    @property
    def illustrative(self) -> bool:
        return self.directive is not None and self.directive[0] == "illustrative"

    @property
    def slow(self) -> bool:
        return self.directive is not None and self.directive[0] == "doc-test" and "slow" in self.directive[1].split()


def is_command_line(line: str) -> bool:
    return bool(COMMAND.search(line.strip()))


def blocks_of(text: str, doc: Path):
    """Every fenced block of a markdown text, with the directive on the line before it."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, language = opening.group(1), opening.group(2), opening.group(3).lower()
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(ticks) and lines[j].strip().strip("`") == ""), len(lines))
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end]]
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        found = DIRECTIVE.match(before)
        yield Block(doc, i + 1, language, body, (found.group(1), found.group(2)) if found else None)
        i = end + 1


def command_blocks(text: str, doc: Path):
    """The blocks that show a scenc command, with their commands and outputs parsed."""
    for block in blocks_of(text, doc):
        if block.language in CODE_LANGUAGES or not any(is_command_line(line) for line in block.text):
            continue
        if block.language == "console":
            block.commands = parse_console(block.text)
        yield block


def runnable_blocks(text: str, doc: Path):
    """Every ```console block not marked illustrative (a block that builds the program the
    next one runs has no scenc command, and runs too), in document order."""
    for block in blocks_of(text, doc):
        if block.language == "console" and not block.illustrative:
            block.commands = parse_console(block.text)
            yield block


def parse_console(lines):
    commands, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if commands:
                commands[-1][1].append(line)
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        commands.append((command, []))
        i += 1
    return commands


def problems(block: Block):
    """Why a command block is neither runnable nor properly marked (empty: it is fine)."""
    if block.illustrative:
        return [] if block.directive[1] else [f"{block.where}: `illustrative:` needs a reason"]
    if block.language != "console":
        return [f"{block.where}: a ```{block.language or ''} block with a scenc command: make it a ```console "
                "block (`$ ` before each command, its output after) or mark it "
                "`<!-- illustrative: why -->` on the line before"]
    if not block.commands:
        return [f"{block.where}: a ```console block with no `$ ` command line"]
    return []


# --- masking and matching ---------------------------------------------------------------

NUMBER = re.compile(r"\d[\d,_]*(?:\.\d+)?(?:[eE][+-]?\d+)?")
POINTER = re.compile(r"0x[0-9a-fA-F]+")


def normalise(lines, places=()):
    out = []
    for line in lines:
        for path, name in places:
            line = line.replace(path, name)
        line = POINTER.sub("<address>", line)
        line = line.replace("(cached)", "(0 s)")       # built now or found in the build cache
        line = NUMBER.sub("#", line)
        line = " ".join(line.split())
        line = re.sub(r"#+", "#", line)                # a histogram's bar is a number too
        # The outliers column is there only when a run was an outlier, and a histogram's bar
        # only when its share is not 0: what follows a share at the end of a line varies.
        line = re.sub(r"(%|CV) (#|outliers)$", r"\1", line)
        if line:
            out.append(line)
    return out


def _line_matches(expected: str, actual: str) -> bool:
    if "..." not in expected:
        return expected == actual
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


def output_matches(expected, actual) -> bool:
    """expected (normalised, with `...` elisions) against actual (normalised)."""
    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[i, j]
        if i == len(expected):
            result = j == len(actual)
        elif expected[i] == "...":
            result = any(match(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            result = j < len(actual) and _line_matches(expected[i], actual[j]) and match(i + 1, j + 1)
        memo[i, j] = result
        return result

    return match(0, 0)


# --- running ------------------------------------------------------------------------------

def scratch_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if not (path / name).exists():
            (path / name).symlink_to(REPO / name)
    venv_bin = path / ".venv" / "bin"
    venv_bin.mkdir(parents=True, exist_ok=True)
    if not (venv_bin / "scenc").exists():
        (venv_bin / "scenc").symlink_to(Path(sys.executable).parent / "scenc")
    return path


def environment(folder: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "USER", "LOGNAME", "TMPDIR", "SCENC_CACHE")}
    env.update(PATH=f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", LC_ALL="C.UTF-8",
               PYTHONUNBUFFERED="1", TERM="dumb", COLUMNS="100",
               XDG_CONFIG_HOME=str(folder / ".config"))
    return env


def run_command(command: str, folder: Path):
    """The command's output as a terminal shows it, and `(exit status N)` when it fails."""
    done = subprocess.run(["bash", "-c", command], cwd=folder, env=environment(folder), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                          timeout=COMMAND_TIMEOUT_S)
    lines = done.stdout.splitlines()
    if done.returncode != 0:
        lines.append(f"(exit status {done.returncode})")
    return lines


def check_block(block: Block, folder: Path):
    """Run a console block's commands in folder; a list of mismatches (empty: as shown)."""
    places = [(str(folder.resolve()), "<dir>"), (str(folder), "<dir>"), (str(REPO), "<repo>")]
    failures = []
    for command, shown in block.commands:
        actual = run_command(command, folder)
        if not output_matches(normalise(shown), normalise(actual, places)):
            failures.append(f"{block.where}: `$ {command}` printed (unmasked):\n"
                            + "\n".join(actual) + "\n--- the doc shows:\n" + "\n".join(shown))
    return failures


# --- the tests ----------------------------------------------------------------------------

def all_blocks():
    return [block for doc in DOCS for block in command_blocks(doc.read_text(), doc)]


def test_every_command_block_runs_or_is_marked_illustrative():
    found = all_blocks()
    assert len(found) >= 10, "the extraction found almost no command blocks: is it broken?"
    bad = [p for block in found for p in problems(block)]
    assert not bad, "\n".join(bad)


_runnable = [block for doc in DOCS for block in runnable_blocks(doc.read_text(), doc)]


@pytest.fixture(scope="session")
def doc_folder(tmp_path_factory):
    """The scratch folder of a document, with every block before the given one run in it
    (those this session has not run yet, say deselected as slow, run unchecked)."""
    root = tmp_path_factory.mktemp("doc-examples")
    done = set()

    def folder_for(block: Block) -> Path:
        folder = scratch_folder(root / block.doc.stem)
        for earlier in _runnable:
            if earlier.doc == block.doc and earlier.line < block.line and earlier.where not in done:
                for command, _ in earlier.commands:
                    run_command(command, folder)
                done.add(earlier.where)
        done.add(block.where)
        return folder

    return folder_for


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where, marks=[pytest.mark.slow] if b.slow else [])
                                   for b in _runnable])
def test_doc_example_prints_what_the_doc_shows(block, doc_folder):
    failures = check_block(block, doc_folder(block))
    assert not failures, "\n\n".join(failures)


# --- self-tests: the checker itself can fail ---------------------------------------------

SNIPPET = """\
Some prose.

```console
$ scenc check examples/loop.scn
examples/loop.scn: ok (1 thread group, 2 threads, 0 warnings)
```

<!-- illustrative: a synopsis -->
```
scenc run FILE --allocators LIST
```

```
scenc emit FILE
```
"""

# What the checker runs in its self-test: shell commands standing for a program's output
# (the checker does not care what prints; these need no build and take milliseconds).
RUNNABLE = """\
```console
$ echo 'built loop.scn  (cached)'; echo 'plan: 2 allocators x 5 runs, 0.18 s at 0x55d0c0a0b2a0'
built loop.scn  (1.8 s)
plan: 2 allocators x 5 runs, 0.18 s at 0x7ffd00000010
$ echo 'fastest: mimalloc'; echo 'verdict: a word that matters'; echo 'no such file' >&2; exit 64
fastest: ...
verdict: a word that matters
no such file
(exit status 64)
```
"""


def test_the_checker_finds_blocks_markers_and_unmarked_blocks(tmp_path):
    doc = tmp_path / "snippet.md"
    found = list(command_blocks(SNIPPET, doc))
    assert [b.language for b in found] == ["console", "", ""]
    assert [len(b.commands) for b in found] == [1, 0, 0]
    assert found[1].illustrative and not found[2].illustrative
    assert [bool(problems(b)) for b in found] == [False, False, True]


def test_the_checker_passes_a_true_example_and_fails_a_changed_line(tmp_path):
    doc = tmp_path / "snippet.md"
    folder = scratch_folder(tmp_path / "run")
    [block] = runnable_blocks(RUNNABLE, doc)
    assert check_block(block, folder) == []

    # A number changed: masked, still as shown.
    [block] = runnable_blocks(RUNNABLE.replace("x 5 runs", "x 7 runs"), doc)
    assert check_block(block, folder) == []

    # A word changed (what a reader relies on): detected, and named with its command.
    [block] = runnable_blocks(RUNNABLE.replace("verdict: a word that matters\n", "verdict: another word\n"), doc)
    [failure] = check_block(block, folder)
    assert "exit 64" in failure and "another word" in failure

    # A line missing, an exit status not shown: detected.
    [block] = runnable_blocks(RUNNABLE.replace("no such file\n", ""), doc)
    assert len(check_block(block, folder)) == 1
    [block] = runnable_blocks(RUNNABLE.replace("(exit status 64)\n", ""), doc)
    assert len(check_block(block, folder)) == 1


def test_masking_and_elisions():
    assert normalise(["  took 0.18 s,  pid 742 at 0x55d0c0a0b2a0 ", ""]) == ["took # s, pid # at <address>"]
    assert normalise(["  [4K, 8K)  5032  12.6% ##########", "  [8K, 16K)  1  0.0% "]) == ["[#K, #K) # #%"] * 2
    assert normalise(["  sd     CV  outliers", "glibc *  10  1.0  3.2%         1"]) == ["sd CV", "glibc * # # #%"]
    assert output_matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert output_matches(["a", "...", "d"], ["a", "d"])
    assert not output_matches(["a", "...", "d"], ["a", "b"])
    assert output_matches(["fastest: ..."], ["fastest: mimalloc"])
    assert not output_matches(["fastest: ..."], ["slowest: mimalloc"])


if __name__ == "__main__":
    # Print what each console block of the given docs prints now, block by block.
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:]:
            doc = Path(name).resolve()
            folder = scratch_folder(Path(tmp) / doc.stem)
            for block in runnable_blocks(doc.read_text(), doc):
                print(f"===== {block.where}")
                for command, _ in block.commands:
                    print(f"$ {command}")
                    print("\n".join(run_command(command, folder)))

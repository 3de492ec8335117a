"""docs/ is user documentation: no session records in it (docs/architecture.md, "Docs and their examples").

Records of measurements (the load they ran under, the commits compared) belong in dated
files under bench/results/; the user documentation says what a command does. What is checked:
no load average given as a figure, no commit of this repository named by its hash, and
docs/capture.md within 600 lines (it once grew to 1694, a third of it session records).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USER_DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# "load average 5.1", "load average of 3.3-3.9", "load averages of about 3", "load 2.8-3.1 on 2 cores"
LOAD_FIGURE = re.compile(r"\bload(?: averages?)?(?: of| was| at| during the runs?)?(?: about)? [0-9]", re.IGNORECASE)
HEX_WORD = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
COMMIT_WORD = re.compile(r"\bcommits? [0-9a-f]{7,40}\b")


def lines_of(doc: Path):
    return enumerate(doc.read_text().splitlines(), 1)


def test_no_load_averages_in_user_docs():
    found = [f"{doc.relative_to(REPO)}:{n}: {line.strip()}" for doc in USER_DOCS for n, line in lines_of(doc)
             if LOAD_FIGURE.search(line)]
    assert not found, "a session's load in the user docs (move the record to bench/results/):\n" + "\n".join(found)


def test_no_commit_hashes_in_user_docs():
    found = [f"{doc.relative_to(REPO)}:{n}: {line.strip()}" for doc in USER_DOCS for n, line in lines_of(doc)
             if COMMIT_WORD.search(line)]
    assert not found, "\n".join(found)
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("no git checkout here to look hex words up in (the phrase check above ran)")
    words = sorted({w for doc in USER_DOCS for _, line in lines_of(doc) for w in HEX_WORD.findall(line)})
    commits = []
    for word in words:
        done = subprocess.run(["git", "cat-file", "-t", word], cwd=REPO, capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == "commit":
            commits.append(word)
    assert not commits, f"commits of this repository named in the user docs: {commits}"


def test_capture_doc_is_user_sized():
    lines = len((REPO / "docs" / "capture.md").read_text().splitlines())
    assert lines <= 600, f"docs/capture.md has {lines} lines: measurement records go to bench/results/"


def test_the_load_pattern_catches_what_it_is_for():
    assert LOAD_FIGURE.search("under a load average of 3.3-3.9 from other work")
    assert LOAD_FIGURE.search("load average 5.1 during the run")
    assert LOAD_FIGURE.search("(8 runs, load 0.8-1.7)")
    assert not LOAD_FIGURE.search("`load_average` (the 1, 5 and 15 minute load averages as the session starts)")
    assert COMMIT_WORD.search('"before" is commit 2020ab8')


LINK = re.compile(r"\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped but `-` and `_`, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(doc: Path) -> set:
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def test_links_between_docs_reach_their_page_and_heading():
    broken = []
    for doc in [*USER_DOCS, REPO / "CHANGELOG.md"]:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue                                   # https:, mailto:
            path, _, anchor = target.partition("#")
            page = (doc.parent / path).resolve() if path else doc
            if not page.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target}: no such file")
            elif anchor and page.suffix == ".md" and anchor not in anchors_of(page):
                broken.append(f"{doc.relative_to(REPO)}: {target}: no such heading in {page.name}")
    assert not broken, "\n".join(broken)


def test_anchors_are_github_s():
    assert github_anchor("`scenc convert --model`") == "scenc-convert---model"
    assert github_anchor("`scenc convert`: exact replay") == "scenc-convert-exact-replay"
    assert github_anchor("5. The replay beside the program") == "5-the-replay-beside-the-program"

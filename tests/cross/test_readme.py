"""The README's front door works as written: its Python examples run, its test and setup
commands are the ones CI runs, and its file tree names the folders git tracks.

    pytest tests/cross/test_readme.py
"""
import contextlib
import io
import re
import subprocess

import pytest

from helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
EXAMPLES = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_readme_has_a_python_example():
    assert EXAMPLES


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example {n + 1}" for n in range(len(EXAMPLES))])
def test_each_python_example_of_the_readme_runs_as_written(code):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    for prompt in re.findall(r'generate\([^,]+, [^,]+, "([^"]+)"', code):  # what it prints starts with its prompt
        assert printed.getvalue().startswith(prompt), printed.getvalue()


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    test_command = next(c.strip() for c in commands if "pytest" in c and "pip install" in c)
    assert test_command in ci


MANUAL = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md",
          ROOT / "bench" / "RESULTS.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:minigpt|app|pages|tests|bench|docs|\.ci|\.streamlit)/[\w./-]*[\w/])`")


def _anchors(text: str) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("doc", MANUAL, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_file_the_manual_names_exists(doc):
    """A relative link leads to a file (and its heading, if it names one); every repository path
    written in backticks exists: a moved module cannot leave the manual pointing at nothing."""
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text(encoding="utf-8")):
            broken.append(target)
    broken += [p for p in PATH.findall(text) if not (ROOT / p.rstrip("/")).exists()]
    assert not broken, broken


def _tree_folders() -> set[str]:
    """The folders README.md's file tree names, as paths: two spaces of indent per level."""
    section = README.split("## Files", 1)[1]
    tree = re.search(r"```\n(.*?)```", section, flags=re.S).group(1)
    folders, parents = set(), []
    for line in filter(str.strip, tree.splitlines()):
        indent = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        assert name.endswith("/"), f"the tree names folders only: {line!r}"
        parents[indent:] = [name.rstrip("/")]  # a line's parents are the names above it at each shallower indent
        folders.add("/".join(parents))
    return folders


def _tracked_folders() -> set[str]:
    """Every folder `git ls-files` puts a file in, with the folders above it."""
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):  # no git, or an unpacked archive: the tests skip
        return set()
    return {"/".join(parts[:n]) for parts in (f.split("/") for f in listed.splitlines()) for n in range(1, len(parts))}


def test_every_folder_the_readmes_tree_names_is_tracked():
    tracked = _tracked_folders()
    if not tracked:
        pytest.skip("not a git checkout")
    assert _tree_folders() <= tracked, sorted(_tree_folders() - tracked)


def test_the_readmes_tree_names_every_top_folder_and_every_folder_of_the_code():
    """Top-level folders, and every folder of minigpt/ and app/, except the data folders inside a
    folder of texts, checkpoints or catalogs (one per corpus or language), which the tree names as one."""
    tracked = _tracked_folders()
    if not tracked:
        pytest.skip("not a git checkout")
    data = ("minigpt/corpora/", "minigpt/pretrained/", "app/locales/")
    wanted = {f for f in tracked if "/" not in f or (f.startswith(("minigpt/", "app/")) and not f.startswith(data))}
    assert not wanted - _tree_folders(), sorted(wanted - _tree_folders())

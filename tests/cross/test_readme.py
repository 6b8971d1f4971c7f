"""The README's front door works as written: its Python examples run, and its test and setup
commands are the ones CI runs.

    pytest tests/cross/test_readme.py
"""
import contextlib
import io
import re

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

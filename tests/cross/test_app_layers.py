"""The app's rooms: chrome at the bottom, then state, then parts, then each page's view beside
navigation (what every page does first). A room imports only the rooms below it, a part imports
other parts without a circle, and a view imports no other view: what two pages share is a part,
what they exchange is state. Read from the source, function-level imports included.

    pytest tests/cross/test_app_layers.py
"""
import ast
from pathlib import Path

import pytest

from helpers import ROOT
from helpers.imports import circles

ROOMS = ("chrome", "state", "parts", "views")
MAY_IMPORT = {  # what each room may import of app/ (its own room only where it says so)
    "chrome": {"chrome"},
    "state": {"chrome", "state"},
    "parts": {"chrome", "state", "parts"},
    "views": {"chrome", "state", "parts"},
    "navigation": {"chrome", "state", "parts"},
}


def room_of(module: str) -> str:
    """app.state.runs -> state; app.navigation -> navigation."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in ROOMS else parts[1]


def app_modules(root: Path) -> dict[str, Path]:
    """Every module of app/, by its dotted name (a room's __init__ is no module of its own)."""
    found = {}
    for path in sorted((root / "app").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] != "__init__":
            found[".".join(parts)] = path
    return found


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The app modules a file imports, anywhere in it (inside functions too), as dotted names.
    `from app.state import runs` names the module app.state.runs; `from app.state.runs import X`
    names app.state.runs."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                found.add(whole if whole in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.add("relative import")  # the rooms import each other by their whole names
    return {m for m in found if m in modules or m == "relative import"}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = app_modules(root)
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def wrong_arrows(arrows: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, imported in sorted(arrows.items()):
        for target in sorted(imported):
            if target == "relative import":
                wrong.append(f"{name} imports relatively")
            elif room_of(target) not in MAY_IMPORT[room_of(name)]:
                wrong.append(f"{name} ({room_of(name)}) imports {target} ({room_of(target)})")
    return wrong


def test_every_module_of_app_stands_in_a_room_or_is_navigation():
    rooms = {room_of(name) for name in app_modules(ROOT)}
    assert rooms == {*ROOMS, "navigation"}


def test_each_room_imports_only_the_rooms_below_it_and_a_view_no_other_view():
    assert not wrong_arrows(graph()), "\n".join(wrong_arrows(graph()))


def test_app_has_no_circle_of_imports():
    assert circles(graph()) == []


@pytest.mark.parametrize("seeded, expected", [
    ("app/chrome/url.py", "app.chrome.url (chrome) imports app.state.runs (state)"),
    ("app/state/runs.py", "app.state.runs (state) imports app.parts.line (parts)"),
    ("app/views/generation.py", "app.views.generation (views) imports app.views.board (views)"),
    ("app/parts/line.py", "app.parts.line (parts) imports app.navigation (navigation)"),
])
def test_the_check_sees_an_import_up_or_across_even_inside_a_function(tmp_path, seeded, expected):
    """The check is not blind: each of these, written inside a function, is found."""
    target = expected.split(" imports ")[1].split(" ")[0]
    package, _, name = target.rpartition(".")
    for path in app_modules(ROOT).values():
        copy = tmp_path / path.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    fake = tmp_path / seeded
    fake.write_text(fake.read_text(encoding="utf-8") + f"\n\ndef later():\n    from {package} import {name}\n",
                    encoding="utf-8")
    assert expected in wrong_arrows(graph(tmp_path))


def test_the_check_sees_a_circle_and_a_relative_import(tmp_path):
    for path in app_modules(ROOT).values():
        copy = tmp_path / path.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    corpora, runs = tmp_path / "app/state/corpora.py", tmp_path / "app/state/runs.py"
    assert "from app.state.corpora import" in runs.read_text(encoding="utf-8")  # runs imports corpora already
    corpora.write_text(corpora.read_text(encoding="utf-8") + "\n\ndef later():\n    from app.state import runs\n",
                       encoding="utf-8")
    assert any({"app.state.corpora", "app.state.runs"} <= set(loop) for loop in circles(graph(tmp_path)))
    runs.write_text(runs.read_text(encoding="utf-8") + "\nfrom . import url\n", encoding="utf-8")
    assert "app.state.runs imports relatively" in wrong_arrows(graph(tmp_path))

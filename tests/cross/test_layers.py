"""The layers: the library (minigpt) imports no Streamlit and nothing of the app, and its tests
(tests/minigpt) run without either, so a newcomer working on the model never waits for them.

    pytest tests/cross/test_layers.py
"""
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT
from helpers.imports import circles

FOREIGN = ("streamlit", "app")  # what the library and its tests must never load


def _loaded_after(code: str) -> list[str]:
    """The foreign modules a fresh interpreter holds after running `code` from the repository."""
    probe = code + f"\nimport sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] in {FOREIGN!r}))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])})
    return eval(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_library_module_imports_no_streamlit_and_no_app():
    code = ("import importlib, pkgutil, minigpt\n"
            "for m in pkgutil.walk_packages(minigpt.__path__, 'minigpt.'):\n"
            "    if not m.name.endswith('__main__'):\n"
            "        importlib.import_module(m.name)\n"
            "for name in minigpt.__all__:\n"
            "    getattr(minigpt, name)")
    assert _loaded_after(code) == []


# what Home uses of the library, before torch has loaded (app.state.warmup): the corpora (the task corpora
# among them), the shipped model's config.json, the run registry and the names of `import minigpt`
TORCH_FREE = ("minigpt", "minigpt.corpus", "minigpt.header", "minigpt.pretrained", "minigpt.lab.tasks",
              "minigpt.lab.diagnosis", "minigpt.serve.line.registry")


def test_what_home_uses_of_the_library_loads_no_torch():
    code = (f"import importlib, sys\nfor name in {TORCH_FREE!r}:\n    importlib.import_module(name)\n"
            "import minigpt.pretrained as p\np.shipped_header('course-zh')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_library_tests_import_no_streamlit_and_no_app():
    """Collecting tests/minigpt imports every module there and every helper they use."""
    code = ("import pytest\n"
            "assert pytest.main(['tests/minigpt', '--collect-only', '-q', '-p', 'no:cacheprovider']) == 0")
    assert _loaded_after(code) == []


# The library's own layers: what each part may import at run time (imports under TYPE_CHECKING
# are annotations only, and free). The core trains, samples and saves a model without any
# instrument; the instruments measure it; serving runs it for many sessions; the figures draw
# plain data; the command line (minigpt/cli/, with __main__.py) drives the core and the instruments.
CORE = ("lazy", "messages", "config", "device", "tokenizer", "corpus", "data", "model", "train", "sample", "header",
        "checkpoint", "archive", "distributed", "pretrained")
MAY_IMPORT = {"core": {"core"}, "lab": {"core", "lab"}, "serve": {"core", "lab", "serve"}, "viz": {"viz", "messages"},
              "cli": {"core", "lab", "serve", "cli"}}


def _part(module: str) -> str:
    """minigpt.lab.tasks -> lab; minigpt.cli.train -> cli; minigpt.train -> core; minigpt.messages ->
    messages when asked by viz."""
    parts = module.split(".")
    if parts[1] in ("lab", "serve", "viz", "cli"):
        return parts[1]
    return "core" if parts[1] in CORE else parts[1]


def _runtime_imports(path) -> set[str]:
    """The minigpt modules a file imports outside `if TYPE_CHECKING:`, as absolute names."""
    import ast

    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = f"{base}.{node.module}" if node.level and node.module else base if node.level else node.module
            found.add(module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m and m.split(".")[0] == "minigpt" and m != "minigpt"}


@pytest.mark.parametrize("part", sorted(MAY_IMPORT))
def test_each_part_of_the_library_imports_only_the_parts_below_it(part):
    """Read from the source, function-level imports included: the core imports no instrument, no
    serving part and no figure; the figures import nothing of the model at run time."""
    files = ([ROOT / "minigpt" / f"{name}.py" for name in CORE] if part == "core"
             else sorted((ROOT / "minigpt" / part).glob("*.py")))
    if part == "cli":
        files.append(ROOT / "minigpt" / "__main__.py")  # `python -m minigpt` is the command line's door
    allowed = MAY_IMPORT[part]
    wrong = [f"{path.relative_to(ROOT)} imports {module}" for path in files for module in sorted(_runtime_imports(path))
             if _part(module) not in allowed and not (part == "viz" and module == "minigpt.messages")]
    assert files and not wrong, "\n".join(wrong)


def test_the_layer_check_sees_a_core_module_that_imports_an_instrument(tmp_path, monkeypatch):
    """The check above is not blind: a core module with `from .lab.tasks import accuracy` inside a
    function is caught; under TYPE_CHECKING it is not."""
    fake = tmp_path / "minigpt" / "train.py"
    fake.parent.mkdir()
    fake.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .serve.runner import TrainingRun\n"
                    "def f():\n    from .lab.tasks import accuracy\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _runtime_imports(fake) == {"minigpt.lab.tasks"}


@pytest.mark.slow
def test_importing_the_core_loads_no_instrument_and_no_figure():
    code = ("import importlib\n"
            f"for name in {CORE!r}:\n"
            "    importlib.import_module('minigpt.' + name)\n"
            "import sys\n"
            "print(sorted(m for m in sys.modules if m.startswith(('minigpt.lab', 'minigpt.serve', 'minigpt.viz'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_public_api_is_what_the_app_uses_and_each_name_is_its_modules_own():
    """minigpt re-exports the core names that app/, pages/ and Home use of it, no more and no
    fewer, and each is the very object of the module the TYPE_CHECKING block names."""
    import ast
    import importlib

    import minigpt

    used = set()
    for path in [ROOT / "streamlit_app.py", *(ROOT / "app").rglob("*.py"), *(ROOT / "pages").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "minigpt" and node.level == 0:
                used.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "minigpt":
                used.add(node.attr)  # `import minigpt`, then minigpt.Trainer where torch may load
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    used.update(re.findall(r"from minigpt import ([\w, ]+)", readme)[0].replace(" ", "").split(","))
    assert set(minigpt.__all__) == used
    tree = ast.parse((ROOT / "minigpt" / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    for node in block.body:
        module = importlib.import_module(f"minigpt.{node.module}")
        for alias in node.names:
            assert getattr(minigpt, alias.name) is getattr(module, alias.name), alias.name


@pytest.mark.slow
def test_importing_minigpt_alone_loads_no_torch():
    """The names load on first use: a page that only needs the package's constants waits for no torch."""
    done = subprocess.run([sys.executable, "-c", "import sys, minigpt; print('torch' in sys.modules)"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# The serving wing's rooms (minigpt/serve/__init__.py): each room imports only the rooms on a floor below
# its own, never a sibling on its floor; the face (server.py and the package's __init__) stands above them
# all. Read from the source, every import counted: function-level ones, and those under TYPE_CHECKING
# too, since an annotation that names a room above is a circle a reader has to untangle all the same.
SERVE_FLOORS = {"host": 0, "runs": 0, "store": 1, "line": 2, "classes": 3, "face": 4}


def serve_room(module: str) -> str:
    """minigpt.serve.line.registry -> line; minigpt.serve.server and minigpt.serve -> face."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else "face"


def serve_modules(root=ROOT) -> dict[str, object]:
    """Every module of minigpt/serve/, by its dotted name (a room's own __init__ is no module of its own)."""
    found = {}
    for path in sorted((root / "minigpt" / "serve").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 3:
            continue
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _serve_imports(path, root) -> list[tuple[str, list[str]]]:
    """(module, names) for each import of minigpt.serve a file makes, wherever it stands; a relative
    import is made absolute, and `from .room import module` names that module."""
    import ast

    package = ".".join(path.relative_to(root).parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = package.rsplit(".", node.level - 1)[0] if node.level else ""
        module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
        if module and module.startswith("minigpt.serve"):
            found.append((module, [alias.name for alias in node.names]))
    return found


def serve_graph(root=ROOT) -> tuple[dict[str, set[str]], list[str]]:
    """The serve modules each serve module imports, and the private names imported across modules."""
    modules = serve_modules(root)
    arrows, private = {}, []
    for name, path in modules.items():
        arrows[name] = set()
        for module, names in _serve_imports(path, root):
            for imported in names:
                whole = f"{module}.{imported}"
                target = whole if whole in modules else module  # `from .runs import thread` names the module
                if target in modules and target != name:
                    arrows[name].add(target)
                if imported.startswith("_") and target == module and module != name:
                    private.append(f"{name} imports {module}.{imported}")
    return arrows, private


def serve_wrong_arrows(arrows: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in sorted(arrows.items()):
        here = serve_room(name)
        for target in sorted(targets):
            there = serve_room(target)
            if there != here and SERVE_FLOORS[there] >= SERVE_FLOORS[here]:
                wrong.append(f"{name} ({here}) imports {target} ({there})")
    return wrong


def test_every_serve_module_stands_in_a_room():
    assert {serve_room(name) for name in serve_modules()} == set(SERVE_FLOORS)


def test_each_serve_room_imports_only_the_floors_below_it_and_no_private_name():
    arrows, private = serve_graph()
    assert not serve_wrong_arrows(arrows), "\n".join(serve_wrong_arrows(arrows))
    assert not private, "\n".join(private)


def test_serve_has_no_circle_of_imports():
    assert circles(serve_graph()[0]) == []


def _serve_copy(tmp_path):
    for path in serve_modules().values():
        copy = tmp_path / path.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    for init in (ROOT / "minigpt" / "serve").rglob("__init__.py"):
        (tmp_path / init.relative_to(ROOT)).write_text("")
    return tmp_path


@pytest.mark.parametrize("seeded, line, expected", [
    ("store/database.py", "from ..line.registry import RunEntry",
     "minigpt.serve.store.database (store) imports minigpt.serve.line.registry (line)"),
    ("line/registry.py", "from ..classes import board",
     "minigpt.serve.line.registry (line) imports minigpt.serve.classes.board (classes)"),
    ("runs/recipe.py", "from ..host.capacity import read_capacity",
     "minigpt.serve.runs.recipe (runs) imports minigpt.serve.host.capacity (host)"),
    ("host/turns.py", "from minigpt.serve.server import open_server",
     "minigpt.serve.host.turns (host) imports minigpt.serve.server (face)"),
])
def test_the_serve_check_sees_an_import_up_or_across_even_inside_a_function(tmp_path, seeded, line, expected):
    fake = _serve_copy(tmp_path) / "minigpt" / "serve" / seeded
    fake.write_text(fake.read_text(encoding="utf-8") + f"\n\ndef later():\n    {line}\n", encoding="utf-8")
    assert expected in serve_wrong_arrows(serve_graph(tmp_path)[0])


def test_the_serve_check_sees_a_circle_and_a_private_name(tmp_path):
    root = _serve_copy(tmp_path)
    run, thread = root / "minigpt/serve/runs/run.py", root / "minigpt/serve/runs/thread.py"
    assert "from .run import" in thread.read_text(encoding="utf-8")  # thread imports run already
    run.write_text(run.read_text(encoding="utf-8") + "\n\ndef later():\n    from .thread import _exit\n",
                   encoding="utf-8")
    arrows, private = serve_graph(root)
    assert ["minigpt.serve.runs.run", "minigpt.serve.runs.thread"] in circles(arrows)
    assert "minigpt.serve.runs.run imports minigpt.serve.runs.thread._exit" in private


def test_the_app_imports_the_serving_wing_only_through_its_face():
    """app/, pages/ and Home import `minigpt.serve` (open_server, its settings, the record types), never a room."""
    import ast

    wrong = []
    for path in [ROOT / "streamlit_app.py", *(ROOT / "app").rglob("*.py"), *(ROOT / "pages").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            wrong += [f"{path.relative_to(ROOT)} imports {n}" for n in names if n.startswith("minigpt.serve.")]
    assert not wrong, "\n".join(wrong)

"""Names a package hands out on first use (PEP 562), listed once: in the package's own
`if TYPE_CHECKING:` block, which type checkers and IDEs read as plain imports. `minigpt` and its
serving wing's face (`minigpt.serve`) both use it, so that importing either loads neither torch nor
anything else a name needs until that name is asked for."""
from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path


def lazy_names(init_file: str, package: str) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` for `package`, whose `__init__` is `init_file`: each name
    of its TYPE_CHECKING block is imported from its module when first asked for, then kept."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    names = {alias.name: node.module for node in block.body for alias in node.names}

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return sorted(names), __getattr__, __dir__

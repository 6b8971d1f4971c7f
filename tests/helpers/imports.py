"""Import graphs, for the layer tests (tests/cross/test_layers.py, test_app_layers.py)."""
from __future__ import annotations


def circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The loops of imports, each once (Tarjan's strongly connected components of more than one)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in arrows.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            loop = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                loop.append(top)
                if top == node:
                    break
            if len(loop) > 1:
                found.append(sorted(loop))

    for node in sorted(arrows):
        if node not in index:
            visit(node)
    return found

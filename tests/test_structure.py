"""The package's shape: no import circle (function-local imports included), small modules, one polling loop,
logging instead of prints, and the layer order of the README's "Layout of the code"."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "servebench"
MAX_LINES = 350


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """servebench modules imported anywhere in the file (top level or inside functions)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("servebench")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("servebench"):
                continue
            for alias in node.names:      # `from . import x` imports the module x
                sub = f"{target}.{alias.name}"
                out.add(sub if (PKG.parent / sub.replace(".", "/")).with_suffix(".py").exists()
                        or (PKG.parent / sub.replace(".", "/")).is_dir() else target)
    return {m for m in out if m != name}


def graph() -> dict[str, set[str]]:
    mods = {module_name(p): p for p in PKG.rglob("*.py")}
    edges = {}
    for name, path in mods.items():
        # importing a.b.c runs a/__init__ and a/b/__init__ too, but those are the package's own business:
        # an edge is what this file asks for.
        edges[name] = {m for m in imports(path) if m in mods}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_no_import_circle():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_planted_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_module_is_small(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PKG.parent)} has {lines} lines (> {MAX_LINES}): split it"


LAYERS = [   # lower layers never import higher ones (README: Layout of the code)
    {"servebench.errors", "servebench.yamlio", "servebench.poll"},
    {"servebench.spec.srt", "servebench.spec.sweep", "servebench.spec.model", "servebench.flags",
     "servebench.topology"},
    {"servebench.layering", "servebench.views"},
    {"servebench.profile"},
    {"servebench.capacity"},
    {"servebench.flag_rules", "servebench.load_rules"},
    {"servebench.rules"},
    {"servebench.catalog"},
]


def test_layers_point_one_way():
    edges = graph()
    rank = {m: i for i, layer in enumerate(LAYERS) for m in layer}
    bad = [(a, b) for a in rank for b in edges.get(a, ()) if b in rank and rank[b] > rank[a]]
    assert bad == []


def test_no_print_in_the_library():
    """Output is logging (pytest shows it) or the CLI's own stdout; tools run in other interpreters."""
    offenders = []
    for path in PKG.rglob("*.py"):
        if path.name.startswith("cli") or "tools" in path.parts or path.name == "tiny_gen.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert offenders == []


def test_one_polling_loop():
    """Waits go through servebench.poll; no other module sleeps in a loop."""
    offenders = []
    for path in PKG.rglob("*.py"):
        if path.name == "poll.py" or "tools" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.While, ast.For)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Call) and getattr(inner.func, "attr", None) == "sleep":
                        offenders.append(f"{path.relative_to(PKG.parent)}:{inner.lineno}")
    assert offenders == []

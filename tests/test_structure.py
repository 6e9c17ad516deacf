"""The package's shape: the tree is the pipeline. Every module sits in one layer folder, imports only from its own
layer or the layers before it (function-local imports included), no import circle, small modules, one polling
loop, logging instead of prints (docs/architecture.md)."""

import ast
import functools
from pathlib import Path

import pytest

from rackbench import LAYERS      # the pipeline, first to last (docs/architecture.md)

PKG = Path(__file__).resolve().parent.parent / "rackbench"
MAX_LINES = 300                   # past it only with the reason in the module's docstring, and never past HARD_CAP
HARD_CAP = 350
TOP = {"rackbench": "core", "rackbench.__main__": "cli"}     # the package itself, `python -m rackbench`


def modules() -> list[Path]:
    """rackbench's modules: every .py file but the data's (rackbench/data/standin holds a stand-in model's remote
    code, files the suite copies, never imports)."""
    return sorted(p for p in PKG.rglob("*.py") if "data" not in p.relative_to(PKG).parts[:1])


@functools.lru_cache(maxsize=None)
def tree(text: str) -> ast.Module:
    """One parse per module text for all the checks here (parsing the package ~10 times cost ~1.5 CPU-s); the
    trees are only read."""
    return ast.parse(text)


@functools.lru_cache(maxsize=None)
def nodes(text: str) -> tuple[ast.AST, ...]:
    """Every node of the module's tree (ast.walk order), walked once."""
    return tuple(ast.walk(tree(text)))


def module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """rackbench modules imported anywhere in the file (top level or inside functions)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in nodes(path.read_text()):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("rackbench")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("rackbench"):
                continue
            for alias in node.names:      # `from . import x` imports the module x
                sub = f"{target}.{alias.name}"
                out.add(sub if (PKG.parent / sub.replace(".", "/")).with_suffix(".py").exists()
                        or (PKG.parent / sub.replace(".", "/")).is_dir() else target)
    return {m for m in out if m != name}


@functools.lru_cache(maxsize=None)
def graph() -> dict[str, set[str]]:
    mods = {module_name(p): p for p in modules()}
    # importing a.b.c runs a/__init__ and a/b/__init__ too, but those are the package's own business:
    # an edge is what this file asks for.
    return {name: {m for m in imports(path) if m in mods} for name, path in mods.items()}


def layer(module: str) -> str | None:
    if module in TOP:
        return TOP[module]
    folder = module.split(".")[1]
    return folder if folder in LAYERS else None


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


def backwards(edges: dict[str, set[str]]) -> list[str]:
    """Imports that run up the pipeline (or out of tools/)."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for a, targets in edges.items():
        for b in targets:
            if layer(a) == "tools" or rank[layer(b)] > rank[layer(a)]:
                bad.append(f"{a} ({layer(a)}) imports {b} ({layer(b)})")
    return sorted(bad)


def test_no_import_circle():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_planted_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_every_module_is_in_a_layer():
    assert [m for m in graph() if layer(m) is None] == []


def test_layers_point_one_way():
    assert backwards(graph()) == []


def test_the_layer_check_finds_an_import_up_the_pipeline():
    edges = {"rackbench.recipe.profile": {"rackbench.report.files"}, "rackbench.report.files": set(),
             "rackbench.tools.x": {"rackbench.core.errors"}, "rackbench.core.errors": set()}
    assert backwards(edges) == [
        "rackbench.recipe.profile (recipe) imports rackbench.report.files (report)",
        "rackbench.tools.x (tools) imports rackbench.core.errors (core)"]


def test_the_architecture_page_names_every_folder():
    """docs/architecture.md's tree lists the layers in pipeline order, each folder once."""
    text = (PKG.parent / "docs/architecture.md").read_text()
    section = text[text.index("```\nrackbench/"):]
    section = section[:section.index("\n```", 3)]
    where = [section.index(f"  {name}/") for name in LAYERS if f"  {name}/" in section]
    assert len(where) == len(LAYERS), [n for n in LAYERS if f"  {n}/" not in section]
    pipeline = [section.index(f"  {name}/") for name in LAYERS if name != "tools"]
    assert pipeline == sorted(pipeline)
    on_disk = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert on_disk == set(LAYERS)


@pytest.mark.parametrize("path", sorted(modules()), ids=lambda p: str(p.relative_to(PKG)))
def test_module_is_small(path):
    """A module is split before it nears 300 lines; one that stays longer says why in its docstring ("Over 300
    lines: ...")."""
    text = path.read_text()
    lines = len(text.splitlines())
    assert lines <= HARD_CAP, f"{path.relative_to(PKG.parent)} has {lines} lines (> {HARD_CAP}): split it"
    why = "Over 300 lines:" in (ast.get_docstring(ast.parse(text)) or "")
    assert lines <= MAX_LINES or why, (f"{path.relative_to(PKG.parent)} has {lines} lines (> {MAX_LINES}): split it, "
                                       "or say why not in its docstring (\"Over 300 lines: ...\")")


def test_no_print_in_the_library():
    """Output is logging (pytest shows it) or the CLI's own stdout; tools run in other interpreters."""
    offenders = []
    for path in modules():
        if layer(module_name(path)) in ("cli", "tools"):
            continue
        for node in nodes(path.read_text()):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert offenders == []


def test_one_polling_loop():
    """Waits go through rackbench.core.poll; no other module sleeps in a loop."""
    offenders = []
    for path in modules():
        if path == PKG / "core" / "poll.py" or layer(module_name(path)) == "tools":
            continue
        for node in nodes(path.read_text()):
            if isinstance(node, (ast.While, ast.For)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Call) and getattr(inner.func, "attr", None) == "sleep":
                        offenders.append(f"{path.relative_to(PKG.parent)}:{inner.lineno}")
    assert offenders == []


# ---- one owner of the results folder's paths: rackbench/core/results_folder.py ----

OWNER = PKG / "core" / "results_folder.py"
REPORT_OWNER = PKG / "core" / "report_folder.py"       # what a report or an export writes, wherever --out puts it
# Joins of a literal name that are not the results folder's, and why.
NOT_RESULTS = {
    ("catalog/loader.py", "'models'"), ("catalog/loader.py", "'clusters'"),          # the recipes folder
    ("catalog/clusters.py", "'clusters'"),
    ("catalog/rankings.py", "f'{name}.yaml'"),                                        # the recipes folder
    ("cluster/request.py", "'configs'"), ("cluster/request.py", "'clusters'"),        # the recipes folder
    ("plugin/session.py", "'recipes'"), ("plugin/session.py", "'perf-changelog.yaml'"),  # the repository
    ("cli/docs.py", "'docs'"),                                                         # the repository
    ("results/baseline.py", "'baseline.json'"),                                        # a hint in an error message
}
# Modules whose literal joins are another program's layout, inside a folder the owner hands out.
OTHER_LAYOUTS = {
    "server/generated.py": "the generated models' cache (~/.cache/rackbench/models), not a results folder",
    "load/aiperf/setup.py": "AIPerf's own scratch and the HF cache layout, inside the folders the owner hands out",
    "load/aiperf/records.py": "AIPerf's own export files (its phase manifest, its log) inside its output folder",
    "core/listeners.py": "the kernel's /proc, not a results folder",
    "server/ports.py": "the host's port leases (/tmp/rackbench-ports), shared by every session, not a results folder",
    "history/measurements.py": "the checkout's records of the suite's own timings (measurements/), not a results "
                               "folder",
}
RESULT_FILES = ("history.sqlite", "summary.md", "manifest.json", "result.json", "requests.csv", "trace.jsonl",
                "report.html",
                "report.md", "points.csv", "deployment.json", "series.json", "aiperf.log", "aiperf-command.txt")


def hand_built_paths(rel: str, text: str) -> list[str]:
    """`x / "name"` (or an f-string) joins, and result file names, in one module's text."""
    found = []
    for node in nodes(text):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                literal = isinstance(side, ast.JoinedStr) or (isinstance(side, ast.Constant) and
                                                              isinstance(side.value, str))
                if literal and (rel, ast.unparse(side)) not in NOT_RESULTS and rel not in OTHER_LAYOUTS:
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(RESULT_FILES) \
                and not node.value.startswith(("http", "`")) and " " not in node.value and rel not in OTHER_LAYOUTS:
            found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_every_path_of_the_results_folder_comes_from_its_owner():
    offenders = [line for path in sorted(modules())
                 if path not in (OWNER, REPORT_OWNER) and layer(module_name(path)) != "tools"
                 for line in hand_built_paths(str(path.relative_to(PKG)), path.read_text())]
    assert offenders == []


def test_the_path_check_finds_a_hand_built_path():
    text = 'from pathlib import Path\n\n\ndef f(d):\n    return Path(d) / "points" / f"{d}.json", "x/result.json"\n'
    assert sorted(hand_built_paths("results/planted.py", text)) == [
        "results/planted.py:5: 'x/result.json'", "results/planted.py:5: Path(d) / 'points'",
        "results/planted.py:5: Path(d) / 'points' / f'{d}.json'"]


def constants(path: Path) -> dict[str, object]:
    """Module-level UPPER_CASE names bound to a literal number or string."""
    out = {}
    for node in tree(path.read_text()).body:
        target, value = (node.targets[0], node.value) if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            else (node.target, node.value) if isinstance(node, ast.AnnAssign) else (None, None)
        if isinstance(target, ast.Name) and target.id.isupper() and isinstance(value, ast.Constant) \
                and isinstance(value.value, (str, int, float)) and not isinstance(value.value, bool):
            out[target.id] = value.value
    return out


def twice_defined(modules: dict[str, dict[str, object]]) -> list[str]:
    seen: dict[tuple[str, object], str] = {}
    found = []
    for rel, consts in sorted(modules.items()):
        for name, value in consts.items():
            if (name, value) in seen:
                found.append(f"{name} = {value!r} in {seen[name, value]} and {rel}")
            seen.setdefault((name, value), rel)
    return found


def test_a_constant_has_one_owner():
    """The same name bound to the same value in two modules is one concept with two owners (SCHEMA_ID was)."""
    found = {str(p.relative_to(PKG)): constants(p) for p in modules() if layer(module_name(p)) != "tools"}
    assert twice_defined(found) == []


def test_the_constant_check_finds_a_second_owner():
    assert twice_defined({"a.py": {"SCHEMA_ID": "x", "N": 1}, "b.py": {"SCHEMA_ID": "x", "N": 2}}) == [
        "SCHEMA_ID = 'x' in a.py and b.py"]


FRONTEND_NAMES = {"dynamo", "vllm", "vllm serve", "dynamo.vllm", "dynamo.frontend"}
# The frontends themselves and the stand-alone tools may compare against a frontend's name; besides them, one reading
# of result files older than schema 3 (which did not record their frontend) and the engine's own version line.
# deploy's reported_versions reads the engine's start-up line: every frontend's engine is vLLM.
FRONTEND_BRANCHES_ALLOWED = {"report/offload.py:frontend", "server/deploy.py:reported_versions"}


def frontend_branches(rel: str, text: str) -> list[str]:
    """Comparisons against a frontend's or its entrypoint's name (``== "dynamo"``, ``in ("vllm", ...)``)."""
    found = []
    owners = {}
    for fn in nodes(text):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                owners.setdefault(id(node), fn.name)
    for node in nodes(text):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = {c.value for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant)}
            if names & FRONTEND_NAMES and f"{rel}:{owners.get(id(node))}" not in FRONTEND_BRANCHES_ALLOWED:
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_what_differs_between_frontends_is_the_frontends_own():
    """No `dynamo`/`vllm` branch outside rackbench/server/frontends: a frontend is one class a site can add."""
    offenders = [line for path in sorted(modules()) if "frontends" not in path.parts
                 and layer(module_name(path)) != "tools"
                 for line in frontend_branches(str(path.relative_to(PKG)), path.read_text())]
    assert offenders == []


def test_the_frontend_branch_check_finds_one():
    assert frontend_branches("x.py", 'kind = "vllm" if r.frontend.type == "vllm" else "dynamo"\n') == [
        "x.py:1: r.frontend.type == 'vllm'"]


NOT_AT_START = ("scipy.stats", "numpy", "prometheus_client", "httpx")


def test_a_pytest_start_imports_none_of_the_heavy_libraries():
    """Each is loaded where it is used (a point analysed, a page parsed, a server asked, a history read), not with
    the plugin and its fixtures: scipy.stats alone cost ~1.7 s of every start, the other three ~0.4 of its 0.9 CPU-s
    (docs/measurements.md)."""
    import subprocess
    import sys
    code = f"import sys, rackbench.plugin, rackbench.plugin.fixtures; print([m for m in {NOT_AT_START!r} " \
           "if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=PKG.parent)
    assert done.stdout.strip() == "[]"


def test_the_builtin_seams_are_the_entry_points_pyproject_declares():
    """#55 item 9: the registry of rackbench's own backends, load generators and frontends
    (core/entry_points.BUILTIN, what a checkout without install metadata falls back on) was written twice, there and
    in pyproject.toml, with nothing tying the two."""
    import tomllib

    from rackbench.core.entry_points import BUILTIN
    declared = tomllib.loads((PKG.parent / "pyproject.toml").read_text())["project"]["entry-points"]
    assert {group: dict(declared.get(group, {})) for group in BUILTIN} == BUILTIN


def test_the_architecture_page_names_every_marker_of_pytest_ini():
    """#55: the page said one repository marker where pytest.ini had more."""
    import configparser
    ini = configparser.ConfigParser()
    ini.read(PKG.parent / "pytest.ini")
    names = [line.split(":")[0].split("(")[0].strip() for line in ini["pytest"]["markers"].splitlines() if ":" in line]
    text = (PKG.parent / "docs/architecture.md").read_text()
    section = text[text.index("This repository adds"):][:600]
    assert names and [n for n in names if f"`{n}`" not in section] == []

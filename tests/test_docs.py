"""The docs say what the code does: the generated reference tables are current, every dotted `rackbench.*` name in
the library's docstrings and the docs resolves, the README stays a front door whose links land."""

import importlib
import re
from pathlib import Path

import pytest

from rackbench.cli import docs
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
NAME = re.compile(r"(?<![\w/.])rackbench(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
# entry-point group names, which are no modules
GROUPS = {"rackbench.backends", "rackbench.load_generators", "rackbench.frontends"}


def resolves(dotted: str) -> bool:
    """A module, or an attribute path of the longest module prefix that imports."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def dotted_names(text: str) -> set[str]:
    return {n.rstrip(".") for n in NAME.findall(text)
            if not n.startswith("rackbench.__main__") and not n.endswith((".py", ".json", ".yaml"))} - GROUPS


def test_the_generated_tables_are_current():
    assert run_cli("docs", "--check").returncode == 0


def test_a_stale_table_is_found_and_rewritten(tmp_path):
    for page in {page for page, _ in docs.TABLES.values()}:
        (tmp_path / page).write_text((REPO / "docs" / page).read_text())
    page = tmp_path / "recipes.md"
    page.write_text(page.read_text().replace("| gpu-count |", "| gpu-cuont |"))
    out = run_cli("docs", "--check", "--docs", str(tmp_path))
    assert out.returncode == 1 and f"{page} is stale" in out.stderr
    assert run_cli("docs", "--write", "--docs", str(tmp_path)).returncode == 0
    assert "| gpu-count |" in page.read_text() and run_cli("docs", "--check", "--docs", str(tmp_path)).returncode == 0


def test_a_page_without_its_markers_is_one_line_naming_the_fix(tmp_path):
    for page in {page for page, _ in docs.TABLES.values()}:
        (tmp_path / page).write_text("# nothing generated here\n")
    out = run_cli("docs", "--check", "--docs", str(tmp_path))
    assert out.returncode == 2 and "no `rackbench docs` markers" in out.stderr and "Traceback" not in out.stderr


def test_every_rule_has_a_line_in_the_table():
    from rackbench.catalog.rules import RULES
    table = docs.rules_table()
    for name in RULES:
        row = next(r for r in table.splitlines() if r.startswith(f"| {name} |"))
        assert len(row) > len(name) + 20, f"rule {name} has no description (its docstring's first paragraph)"


@pytest.mark.parametrize("path", sorted([*(REPO / "rackbench").rglob("*.py"), *(REPO / "docs").glob("*.md"),
                                         REPO / "README.md"]), ids=lambda p: str(p.relative_to(REPO)))
def test_every_dotted_name_resolves(path):
    bad = sorted(n for n in dotted_names(path.read_text()) if not resolves(n))
    assert not bad, f"{path.relative_to(REPO)} names what does not exist: {bad}"


def test_the_name_check_finds_a_moved_module():
    assert not resolves("rackbench.rules.RULES") and resolves("rackbench.catalog.rules.RULES")


def test_the_readme_is_a_front_door_whose_links_land():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert text.count("```bash") >= 2 and "scripts/bench" in text and "scripts/test" in text
    for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", text):
        assert (REPO / target).is_file(), target
    for page in (REPO / "docs").glob("*.md"):
        assert f"docs/{page.name}" in text, f"the README does not point to {page.name}"


def test_docs_without_a_docs_folder_says_so_in_one_line(tmp_path):
    """#55 item 7: `rackbench docs --check` from an installed package (no docs/ beside it) ended in a traceback."""
    res = run_cli("docs", "--check", "--docs", tmp_path / "none")
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert f"no docs folder at {tmp_path / 'none'}" in res.stderr
    shown = run_cli("docs", "--docs", tmp_path / "none")          # the tables alone need no folder
    assert shown.returncode == 0 and "| cache-mounts |" in shown.stdout, shown.stderr


def slugs(page: Path) -> set[str]:
    """The anchors of a page's headings (GitHub's slugs: lower case, punctuation dropped)."""
    heads = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_every_pointer_to_the_docs_in_what_the_suite_prints_lands():
    """#55: reports, verdicts, errors and help pointed at README sections that no longer exist ("README: GPU-hours").
    Every pointer in the code is a `docs/<page>.md#<anchor>` whose page and heading exist, and none names a README
    section."""
    files = [*(REPO / "rackbench").rglob("*.py"), *(REPO / "scripts").iterdir()]
    found = 0
    for path in (f for f in files if f.is_file() and "data" not in f.relative_to(REPO).parts):
        text = path.read_text(errors="replace")
        assert not re.search(r"README[:,] [A-Z]", text), f"{path.relative_to(REPO)} points at a README section"
        for page, anchor in re.findall(r"docs/([\w-]+\.md)#([\w-]+)", text):
            found += 1
            assert (REPO / "docs" / page).is_file(), f"{path.relative_to(REPO)}: docs/{page} does not exist"
            assert anchor in slugs(REPO / "docs" / page), f"{path.relative_to(REPO)}: docs/{page}#{anchor}"
    assert found >= 10


def test_every_anchor_of_the_docs_lands():
    """A link `page.md#anchor` names a heading of that page (GitHub's slugs: lower case, punctuation dropped)."""
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*\.md)#([^)]+)\)", page.read_text()):
            dest = (page.parent / target).resolve()
            assert anchor in slugs(dest), f"{page.name}: {target}#{anchor}"


def test_every_check_of_the_verdict_has_a_line_in_the_table_and_carries_its_registry_name(catalog):
    """#55 item 1: the verdict is a registry of checks; each has its docstring's line in docs/results.md, and each
    Check it makes on the recorded points carries its own name in the registry's order."""
    from rackbench.results.checks import CHECKS
    from rackbench.results.model import PointResult
    from rackbench.results.verdict import judge
    from tests.conftest import by_id
    table = docs.checks_table()
    for name in CHECKS:
        row = next(r for r in table.splitlines() if r.startswith(f"| {name} |"))
        assert len(row) > len(name) + 30, f"check {name} has no docstring"
    order = list(CHECKS)
    seen = set()
    for path in sorted((REPO / "tests/data/h200-7b/points").glob("*.json")):
        r = PointResult.model_validate_json(path.read_text())
        names = [c.name for c in judge(r, by_id(catalog, r.identity.profile)).checks]
        assert set(names) <= set(order) and names == sorted(names, key=order.index), (path.name, names)
        seen |= set(names)
    assert len(seen) >= 10


@pytest.mark.parametrize("table", ["cluster_keys_table", "profile_keys_table"])
def test_every_key_of_a_cluster_file_and_a_profile_is_documented(table):
    """#55 item 6: cluster and profile keys were documented nowhere; every key now has its line, from the schema's
    own description (a section's from its model's docstring)."""
    rows = [r for r in getattr(docs, table)().splitlines()[2:]]
    assert len(rows) > 50
    bare = [r.split("|")[1].strip() for r in rows if not r.rstrip("| ").split("|")[-1].strip()]
    assert bare == [], f"keys without a description: {bare}"

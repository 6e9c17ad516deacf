"""perf-changelog.yaml rules, in-process and through `rackbench changelog check` against a real git history."""

import subprocess

import pytest

from rackbench.history.changelog import check
from tests.conftest import run_cli

IDS = ["kimi-k3-gb200-tp", "kimi-k3-gb200-dep", "kimi-k3-gb200-dep_offload"]
E1 = ("- config-keys:\n    - kimi-k3-gb200-*\n  description:\n    - first\n"
      "  pr-link: https://github.com/o/r/pull/1\n")
E2 = ("- config-keys:\n    - kimi-k3-gb200-dep_offload\n  description:\n    - second\n"
      "  pr-link: https://github.com/o/r/pull/XXX\n")
GOOD = "# header\n" + E1 + "\n" + E2


def messages(text, base=None, ids=IDS):
    data = text.encode() if isinstance(text, str) else text
    return [p.message for p in check(data, "perf-changelog.yaml", ids, base=base)]


def test_valid_file_passes():
    assert messages(GOOD) == []


def test_shipped_changelog_is_valid(repo):
    from rackbench.catalog.loader import Catalog
    ids = [p.id for p in Catalog.load(repo / "recipes").profiles]
    assert check((repo / "perf-changelog.yaml").read_bytes(), "perf-changelog.yaml", ids) == []


@pytest.mark.parametrize("text,fragment", [
    (GOOD.replace("    - first\n", "    - first\n  description:\n    - again\n"), "duplicate key"),
    (GOOD.rstrip("\n"), "does not end with a newline"),
    (GOOD + "\n", "ends with a blank line"),
    (GOOD.replace("\n- config-keys:\n    - kimi-k3-gb200-dep_off", "- config-keys:\n    - kimi-k3-gb200-dep_off"),
     "exactly one blank line"),
    (GOOD.replace("\n- config-keys:\n    - kimi-k3-gb200-dep_off", "\n\n- config-keys:\n    - kimi-k3-gb200-dep_off"),
     "exactly one blank line"),
    (GOOD.replace("kimi-k3-gb200-dep_offload", "kimi-k3-h100-*"), "matches no profile"),
    (GOOD.replace("pull/1\n", "pull/1\n  owner: me\n"), "unknown key"),
    (GOOD.replace("  pr-link: https://github.com/o/r/pull/1\n", ""), "required key is missing"),
    (GOOD.replace("https://github.com/o/r/pull/1", "see slack"), "not a pull request link"),
    (GOOD.replace("    - first\n", "    - fi\trst\n"), "contains a tab"),
    (GOOD.replace("\n", "\r\n"), "contains a carriage return"),
    (GOOD.replace("  description:\n    - first\n", "  description: []\n"), "non-empty list"),
    (GOOD.encode().replace(b"first", b"fir\xffst"), "not UTF-8"),
])
def test_broken_changelog(text, fragment):
    found = messages(text)
    assert any(fragment in m for m in found), found


def test_history_only_appends():
    base = ("# header\n" + E1).encode()
    assert messages(GOOD, base=base) == []
    edited = GOOD.replace("    - first\n", "    - first, reworded\n")
    assert any("append-only" in m for m in messages(edited, base=base))
    glued = "# header\n" + E1 + E2  # appended without the blank separator
    assert any("one blank line" in m for m in messages(glued, base=base))


def run(args, cwd):
    return run_cli(*args, cwd=cwd)


def test_cli_against_git_base(tmp_path, repo):
    import shutil
    shutil.copytree(repo / "recipes", tmp_path / "recipes")
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "root")
    (tmp_path / "perf-changelog.yaml").write_text("# header\n" + E1)
    git("add", "-A")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "first entry")
    (tmp_path / "perf-changelog.yaml").write_text(GOOD)
    ok = run(["changelog", "check", "--base", "HEAD"], tmp_path)
    assert ok.returncode == 0, ok.stderr
    (tmp_path / "perf-changelog.yaml").write_text(GOOD.replace("first", "rewritten"))
    bad = run(["changelog", "check", "--base", "HEAD"], tmp_path)
    assert bad.returncode == 1 and "append-only" in bad.stderr and "perf-changelog.yaml:5" in bad.stderr
    unknown = run(["changelog", "check", "--base", "no-such-ref"], tmp_path)
    assert unknown.returncode == 1 and "unknown git ref" in unknown.stderr

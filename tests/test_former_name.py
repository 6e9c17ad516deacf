"""The suite was renamed from ``servebench`` (#55): what was written under the former name still reads, and what
a user types or reads carries only the new one."""

import logging
import re
import shutil
import subprocess

from tests.conftest import REPO, run_cli
from rackbench.core.former_name import FORMER, stale_environment

DATA = REPO / "tests/data"


def test_a_history_written_under_the_former_name_reads_as_one_written_now(tmp_path):
    old = tmp_path / "old.sqlite"
    shutil.copy(DATA / "former-name/history.sqlite", old)
    new = tmp_path / "new.sqlite"
    for run in ("run-1", "run-2", "run-3"):
        added = run_cli("history", "add", DATA / "noise-local" / run, "--history", new, "--commit", "56b8ce0")
        assert added.returncode == 0, added.stderr
    said = [run_cli("history", "noise", "--history", db) for db in (old, new)]
    assert [s.returncode for s in said] == [0, 0], [s.stderr for s in said]
    assert said[0].stdout == said[1].stdout
    assert "12 repeats" in said[0].stdout and said[0].stdout.count("tiny-llama-cpu-") == 4
    listed = run_cli("history", "list", "--history", old)
    assert listed.returncode == 0 and listed.stdout.count("56b8ce0") == 3, listed.stdout + listed.stderr


def test_results_written_under_the_former_name_are_read_and_reported(tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(DATA / "noise-local/run-1", folder)
    assert any(FORMER in p.read_text() for p in (folder / "points").glob("*.json"))   # written under the old name
    made = run_cli("report", folder, "--out", tmp_path / "report")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "report/report.md").read_text().count("tiny-llama-cpu-") >= 4


def test_a_variable_of_the_former_prefix_is_named_with_the_one_read_in_its_place(caplog, monkeypatch):
    assert stale_environment({"PATH": "/bin", "RACKBENCH_COMMIT": "x"}) == []
    [line] = stale_environment({"SERVEBENCH_COMMIT": "abc"})
    assert "SERVEBENCH_COMMIT" in line and "RACKBENCH_COMMIT" in line
    monkeypatch.setenv("SERVEBENCH_CACHE", "/nowhere")
    with caplog.at_level(logging.WARNING, logger="rackbench"):
        assert run_cli("schema", "--check").returncode == 0
    assert any("RACKBENCH_CACHE" in r.getMessage() for r in caplog.records)


def test_nothing_a_user_types_or_reads_carries_the_former_name():
    """README, docs, recipes, scripts, the package and its metadata: the former name appears only where a line says
    it is the former name (the recorded data in tests/data keeps what it was written with)."""
    tracked = subprocess.run(["git", "ls-files", "README.md", "docs", "recipes", "scripts", "rackbench", "dev",
                              "pyproject.toml", ".ci", "benchmarks"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    found = []
    for name in tracked:
        path = REPO / name
        if path.suffix in {".gz", ".sqlite", ".png"} or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(FORMER, line, re.I) and "former name" not in line and "former_name" not in line:
                found.append(f"{name}:{n}: {line.strip()[:100]}")
    assert found == []


def test_a_generated_model_under_either_name_is_one_model_to_a_ranking():
    """The generated models' ids carry the suite's name (servebench/llama-7b-random then, rackbench/... now): a
    ranking of a new search against one recorded before the rename is not refused for its model."""
    import json

    from rackbench.report.rank import Arm, pair, traits
    from rackbench.results.model import parse
    data = json.loads((DATA / "h100-7b-search/points/llama-7b-h200-vllm_search-c20.json").read_text())
    old = parse(data)
    assert old.identity.model_repo.startswith(FORMER + "/")
    data["identity"]["model_repo"] = old.identity.model_repo.replace(FORMER, "rackbench")
    arms = [Arm(name, "t", "g", 20, 880.0, 816.0, 889.0, tuple(sorted(traits(r, "deployment").items())))
            for name, r in (("new", parse(data)), ("old", old))]
    assert dict(arms[0].traits)["model"].startswith("rackbench/")      # shown as each point says it
    assert pair(*arms)["verdict"] == "within noise", pair(*arms)
    data["identity"]["model_repo"] = "rackbench/llama-70b-random"
    other = Arm("70b", "t", "g", 20, 880.0, 816.0, 889.0, tuple(sorted(traits(parse(data), "deployment").items())))
    assert pair(arms[1], other)["why"] == [f"model differs ({old.identity.model_repo} against "
                                           "rackbench/llama-70b-random)"]

"""A property-based fuzzer over the real recipe catalog: every mutant is either refused with problems that each
name their file and key (or line), on one line, or accepted and then renders a job script and process lines in
which no recipe value starts a command. Never a traceback, never a hang.

Mutations follow the classes of hostile input: wrong types, unknown keys, bad JSON flags, shell metacharacters,
control characters, unicode, huge numbers, NaN, broken or escaping ``extends:``, duplicate keys, alias bombs,
merge keys, truncated files. The quick run is part of the offline suite; ``pytest -m fuzz tests/test_fuzz.py``
runs ``RACKBENCH_FUZZ_EXAMPLES`` (default 2000) mutants.
"""

from __future__ import annotations

import os
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rackbench.catalog.loader import Catalog
from rackbench.cluster.slurm import sbatch_script
from rackbench.core.errors import ConfigError, Problem
from rackbench.core.results_folder import ResultsFolder
from rackbench.server.assembly import Assembly
from tests.conftest import REPO, SHARED, catalog_copy

FILES = sorted(str(p.relative_to(REPO / "recipes")) for p in (REPO / "recipes").rglob("*.yaml"))
CONTROL = re.compile(r"[\x00-\x1f\x7f]")

HOSTILE_TEXT = st.sampled_from([
    "", " ", "x\ny", "x\r\nid", "a\x00b", "$(id)", "`id`", "; rm -rf /", "&& id", "| id", "${HOME}", "{job_id}",
    "{'a': 1}", '{"a": [1,', "[1, 2", "--trust-remote-code", "-1", "0", "1e309", "nan", "\u202e\u0627", "ÿ" * 3,
    "../../../etc/passwd", "/etc/passwd", "#SBATCH --x", "\n#SBATCH --wrap=id", "a" * 300, "\t", "'", '"'])
SCALARS = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70), st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), HOSTILE_TEXT,
    st.text(max_size=12))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.one_of(HOSTILE_TEXT, st.text(max_size=6)), SCALARS, max_size=2))


def _paths(data, prefix=()):
    """Every key path of a parsed document (mapping keys and list indexes)."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _set(data, path, value, delete=False):
    node = data
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value


@st.composite
def mutants(draw) -> tuple[str, str, str]:
    """(file, new text, what was done)."""
    name = draw(st.sampled_from(FILES))
    text = (REPO / "recipes" / name).read_text()
    kind = draw(st.sampled_from(["set", "set", "set", "delete", "add", "dup-line", "extends", "bomb", "merge",
                                 "truncate", "insert"]))
    data = yaml.safe_load(text)
    paths = list(_paths(data))
    if kind in ("set", "delete", "add") and paths:
        path = draw(st.sampled_from(paths))
        if kind == "add":
            parent = path[:-1]
            node = data
            for k in parent:
                node = node[k]
            if not isinstance(node, dict):
                kind = "set"
            else:
                path = (*parent, draw(st.one_of(HOSTILE_TEXT, st.text(min_size=1, max_size=8))))
        value = draw(VALUES)
        _set(data, path, value, delete=kind == "delete")
        return name, yaml.safe_dump(data, allow_unicode=draw(st.booleans())), f"{kind} {path!r} = {value!r}"
    lines = text.splitlines(keepends=True)
    if kind == "dup-line":
        i = draw(st.integers(0, len(lines) - 1))
        return name, "".join(lines[:i + 1] + lines[i:]), f"duplicate line {i + 1}"
    if kind == "extends":
        target = draw(st.one_of(HOSTILE_TEXT, st.sampled_from(
            ["base.yaml", "tp.yaml", "../gb200/tp.yaml", "./_agentx.yaml", "dep.yaml", "vllm.yaml", "/tmp/x.yaml",
             "../../models/kimi-k3.yaml", "../../../../etc/hostname"])))
        body = re.sub(r"(?m)^extends:.*\n", "", text)
        return name, f"extends: {yaml.safe_dump(target).splitlines()[0]}\n" + body, f"extends {target!r}"
    if kind == "bomb":
        bomb = "x-a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
            f"x-{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8))
        return name, bomb + text, "alias bomb"
    if kind == "merge":
        return name, "x-defaults: &d {name: merged}\n" + text.replace("\nprofile:\n", "\nprofile:\n  <<: *d\n", 1), "merge"
    if kind == "truncate":
        cut = draw(st.integers(0, len(text)))
        return name, text[:cut], f"truncate at {cut}"
    at = draw(st.integers(0, len(text)))
    junk = draw(st.one_of(HOSTILE_TEXT, st.text(max_size=8)))
    return name, text[:at] + junk + text[at:], f"insert {junk!r} at {at}"


def _check_refusal(problems: list[Problem], root: Path) -> None:
    assert problems, "a ConfigError without problems"
    for p in problems:
        line = str(p)
        assert "\n" not in line and "\r" not in line, f"problem spans lines: {line!r}"
        assert p.file and Path(p.file).resolve().is_relative_to(root.resolve()), f"names no catalog file: {line}"
        assert p.key or p.line or line.startswith(f"{p.file}: <top level>: "), f"names neither key nor line: {line}"
        assert "Traceback" not in line


def _check_accepted(cat: Catalog, shim: Path, tmp: Path) -> None:
    """What an accepted catalog renders: job scripts bash parses and runs with nothing but `sleep` on PATH (a
    recipe value that started a command would call something else) up to the holder's own first check, which ends
    it with exit 4 (no session heartbeat here), process lines free of control characters."""
    scripts = []
    for prof in cat.profiles:
        req, alloc, sp = Assembly(prof, ResultsFolder.at(tmp / "results"), "RUN", dry=True).render()
        for argv in [proc.command for proc in alloc.processes]:     # what would start on this host (srun ... -- argv)
            bad = [a for a in argv if CONTROL.search(str(a))]
            assert not bad, f"{prof.id}: control characters in argv {bad!r}"
        for pr in sp.processes:
            for k, v in pr.env.items():
                assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and not CONTROL.search(str(v)), (prof.id, k, v)
        if prof.cluster.backend == "slurm":
            path = tmp / f"{prof.id}.sbatch"
            path.write_text(sbatch_script(req))
            scripts.append(str(path))
    if scripts:
        run = subprocess.run(
            ["bash", "-c", 'for f; do bash -n "$f" || exit 1; env -i PATH="$SHIM" "$BASH" "$f" > /dev/null; '
             '[ $? = 4 ] || exit 1; done', "_", *scripts],
            env={"SHIM": str(shim), "PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=30)
        assert run.returncode == 0 and not run.stderr, f"a job script ran more than `sleep`: {run.stderr}"


# The shipped profiles extend only files of their own folder and presets/ (the arena checks it): a mutant of a profile
# folder's file can change only that folder's profiles, a mutant of a shared file (a cluster, a model, a preset) any.
FOLDERS = sorted({name.split("/")[0] for name in FILES if "/" in name} - set(SHARED))


def _extends(name: str) -> list[str]:
    """Where the shipped file ``name`` extends, as paths under recipes/."""
    doc = yaml.safe_load((REPO / "recipes" / name).read_text())
    ext = doc.get("extends") if isinstance(doc, dict) else None
    return [os.path.normpath(os.path.join(os.path.dirname(name), e)) for e in ([ext] if isinstance(ext, str)
                                                                             else ext or [])]


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    """A shim folder with `sleep`, a whole copy of the catalog (``all``) and one per profile folder with the shared
    parts (``<folder>``)."""
    leaving = [(name, to) for name in FILES for to in _extends(name)
               if to.split("/")[0] not in (name.split("/")[0], "presets")]
    assert not leaving, f"a profile folder extends another's file, so its mutants need the whole catalog: {leaving}"
    root = tmp_path_factory.mktemp("fuzz")
    for folder in (*FOLDERS, "all"):
        catalog_copy(root / folder / "recipes", *(() if folder == "all" else (folder,)))
    shim = root / "shim"
    shim.mkdir()
    (shim / "sleep").write_text("#!/bin/sh\nexit 0\n")
    (shim / "sleep").chmod(0o755)
    return root


def fuzz_one(arena: Path, mutant, whole: bool = True) -> None:
    """Load the catalog with the mutant in place and check what comes out; ``whole=False`` loads only the folder
    the mutant can change (each load builds that folder's profiles and renders their jobs, not all 22)."""
    name, text, what = mutant
    folder = name.split("/")[0]
    place = arena / (folder if not whole and folder in FOLDERS else "all")
    root = place / "recipes"
    target = root / name
    original = target.read_text()
    target.write_text(text)
    try:
        try:
            cat = Catalog.load(root)
        except ConfigError as err:
            _check_refusal(err.problems, root)
            return
        _check_accepted(cat, arena / "shim", place)
    except AssertionError as err:
        raise AssertionError(f"{name}: {what}: {err}") from None
    finally:
        target.write_text(original)


COMMON = dict(deadline=timedelta(seconds=5), database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])


@settings(max_examples=60, derandomize=True, **COMMON)      # the same mutants every run: CI is not a lottery
@given(mutant=mutants())
def test_fuzz_recipes_quick(arena, mutant):
    fuzz_one(arena, mutant, whole=False)


EXAMPLES = int(os.environ.get("RACKBENCH_FUZZ_EXAMPLES", "2000"))


@pytest.mark.fuzz
@settings(max_examples=EXAMPLES, derandomize=False, **COMMON)
@given(mutant=mutants())
def test_fuzz_recipes_large(arena, mutant, request):
    if "fuzz" not in (request.config.getoption("-m") or ""):
        pytest.skip("opt-in: pytest -m fuzz tests/test_fuzz.py (RACKBENCH_FUZZ_EXAMPLES mutants, default 2000)")
    fuzz_one(arena, mutant)

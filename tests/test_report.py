"""Reports, baseline gate, reuse of prior results, and the CI workflow files.

Real inputs: result files of a local sweep (tests/data/results-local: real vLLM/Dynamo + AIPerf on this kind
of machine) and results built from the H200 AIPerf recordings; synthetic ones only for edge cases."""

import copy
import csv
import itertools
import json
import re
import shutil
from pathlib import Path

import pytest

from rackbench.results import baseline
from rackbench.report import files as report
from rackbench.report import offload
from rackbench.results import files
from rackbench.results import model as result
from rackbench.catalog.points import Point
from rackbench.server import counters as metrics
from rackbench.results.verdict import judge
from tests.conftest import REPO, by_id, copy_suite, recorded, run_cli

DATA = Path(__file__).parent / "data"
LOCAL = DATA / "results-local"
H200 = DATA / "h200"


def h200_result(profile, conc, run="ctx16k/offload-c8", judged=True) -> dict:
    """A result from the H200 recordings, judged by its profile's gates (as the pytest case stores it)."""
    r = recorded(Point(profile, conc), H200 / run, run_id="h200", idle_wait_s=0.0,
                 before=metrics.parse((H200 / f"{run}-before.prom").read_text()),
                 after=metrics.parse((H200 / f"{run}-after.prom").read_text()))
    return (r.model_copy(update={"verdict": judge(r, profile)}) if judged else r).dump()


def failures(data: dict, profile, base=None) -> list[str]:
    return judge(result.parse(data), profile, base).failures


def results_dir(tmp_path, items):
    d = tmp_path / "results"
    (d / "points").mkdir(parents=True)
    for r in items:
        (d / "points" / f"{r['identity']['case_id']}.json").write_text(json.dumps(r))
    return d


def test_report_from_a_real_local_sweep(tmp_path, catalog):
    d = tmp_path / "results"
    shutil.copytree(LOCAL, d)
    rep = report.write(d)
    names = sorted(f.name for f in rep.files)
    assert names == ["pareto-tiny-llama-local-cpu.png", "points.csv", "report.md"]
    md = (d / "report" / "report.md").read_text()
    assert md.count("| tiny-llama-cpu-") == 4 and "No offload A/B" in md
    rows = list(csv.DictReader(open(d / "report" / "points.csv")))
    assert [r["case_id"] for r in rows] == sorted(p.stem for p in (LOCAL / "points").glob("*.json"))
    assert all(float(r["output_tps_per_gpu"]) > 0 and r["gpus"] == "1" for r in rows)


def test_offload_ab_at_shared_concurrencies(tmp_path, catalog):
    base = [h200_result(by_id(catalog, "kimi-k3-gb200-dep"), c, "ctx16k/base-c8") for c in (64, 128, 192, 256)]
    off = [h200_result(by_id(catalog, "kimi-k3-gb200-dep_offload"), c) for c in (128, 192, 256, 384)]
    rep = report.write(results_dir(tmp_path, base + off))
    assert offload.pairs(rep.points) == [offload.Pair("kimi-k3-gb200-dep", "kimi-k3-gb200-dep_offload", (128, 192, 256))]
    md = (tmp_path / "results/report/report.md").read_text()
    assert "### Offload A/B: `kimi-k3-gb200-dep_offload` vs `kimi-k3-gb200-dep`" in md
    ab = [ln for ln in md.splitlines() if ln.startswith("| 128 |") or ln.startswith("| 192 |") or ln.startswith("| 256 |")]
    assert len(ab) == 3 and "| 384 |" not in md.split("### Offload")[1]
    assert (tmp_path / "results/report/offload-ab-kimi-k3-gb200-dep_offload-vs-kimi-k3-gb200-dep.png").is_file()
    assert (tmp_path / "results/report/pareto-kimi-k3-gb200-nv.png").is_file()


def test_missing_arm_single_point_and_failed_point_are_nan_free(tmp_path, catalog):
    p = by_id(catalog, "kimi-k3-gb200-dep_offload")
    ok = h200_result(p, 128)
    failed = copy.deepcopy(ok)
    failed["identity"]["case_id"] = "kimi-k3-gb200-dep_offload-c192"
    failed["identity"]["concurrency"] = 192
    for key in failed["throughput"]:
        if key != "gpus":
            failed["throughput"][key] = None
    failed["requests"].update(successful=0.0, error_rate=1.0, errors=96.0)
    failed["interactivity"]["output_tps_per_user"] = dict.fromkeys(("avg", "p50", "p90", "p99"))
    failed["verdict"] = judge(result.parse({**failed, "verdict": None}), p).model_dump(mode="json")
    rep = report.write(results_dir(tmp_path, [ok, failed]))
    out = tmp_path / "results/report"
    text = (out / "report.md").read_text() + (out / "points.csv").read_text()
    assert "nan" not in text.lower() and "inf" not in text.replace("info", "")
    assert "No concurrency measured in both arms" not in text and "No offload A/B" in text   # no base arm at all
    assert rep.verdicts["kimi-k3-gb200-dep_offload-c192"].startswith("failed: 0 successful requests")
    single = report.write(results_dir(tmp_path / "one", [ok]))
    assert len(single.points) == 1 and any(f.suffix == ".png" for f in single.files)


def test_invalid_result_files_are_listed_not_plotted(tmp_path, catalog):
    bad = h200_result(by_id(catalog, "kimi-k3-gb200-dep"), 64)
    del bad["throughput"]
    d = results_dir(tmp_path, [bad])
    (d / "points" / "torn.json").write_text("{")
    res = run_cli("report", d)
    assert res.returncode == 1                            # nothing valid to report
    assert "kimi-k3-gb200-dep-c64.json: skipped: not a rackbench result (throughput: Field required)" in res.stderr
    assert "torn.json: skipped: not JSON" in res.stderr


def bad_files(tmp_path) -> Path:
    """A results folder with one good point and every kind of bad file next to it."""
    d = tmp_path / "bad"
    shutil.copytree(LOCAL, d)
    pts = d / "points"
    good = (pts / "tiny-llama-cpu-vllm-c1.json").read_text()
    for name in ("tiny-llama-cpu-vllm-c4", "tiny-llama-cpu-dynamo-c2", "tiny-llama-cpu-dynamo-c4"):
        (pts / f"{name}.json").unlink()
    (pts / "torn.json").write_text("{")
    (pts / "nan.json").write_text(good.replace('"output_tps_per_gpu": ', '"output_tps_per_gpu": NaN, "x": ', 1))
    (pts / "inf.json").write_text(good.replace('"output_tps_per_gpu": ', '"output_tps_per_gpu": Infinity, "x": ', 1))
    (pts / "schema.json").write_text('{"schema_version": 2}')
    (pts / "loop1.json").symlink_to("loop2.json")
    (pts / "loop2.json").symlink_to("loop1.json")
    (pts / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    (pts / "dir.json").mkdir()
    (pts / "latin1.json").write_bytes(b'{"a": "\xe9"}')
    return d


WHY = {"torn.json": "not JSON", "nan.json": "NaN is not a JSON number", "inf.json": "Infinity is not a JSON number",
       "schema.json": "not a rackbench result", "loop1.json": "symlink loop", "loop2.json": "symlink loop",
       "dangling.json": "a dangling symlink", "dir.json": "a folder, not a file", "latin1.json": "cannot read it"}


def test_report_and_baseline_skip_each_bad_file_with_one_line(tmp_path):
    d = bad_files(tmp_path)
    rep = run_cli("report", d, "--out", tmp_path / "rep")
    base = run_cli("baseline", d, "--out", tmp_path / "b.json")
    assert rep.returncode == 0 and base.returncode == 0, rep.stderr + base.stderr
    for res, verb in ((rep, "skipped"), (base, "dropped")):
        assert "Traceback" not in res.stderr
        lines = res.stderr.splitlines()
        for name, why in WHY.items():
            assert [ln for ln in lines if f"points/{name}: {verb}: " in ln and why in ln], (name, res.stderr)
    assert "1 point(s) of cluster local-cpu, 9 file(s) dropped" in base.stdout
    assert list(json.loads((tmp_path / "b.json").read_text())["points"]) == ["tiny-llama-cpu-vllm-c1"]


@pytest.mark.parametrize("args, message", [
    (["report", "{tmp}/missing"], "missing: no such folder"),
    (["report", "{tmp}/empty"], "empty: no points/ folder in it"),
    (["report", "{tmp}/afile"], "afile: a file, not a results folder"),
    (["report", "{local}", "--out", "{tmp}/afile"], "--out {tmp}/afile: a file; the report is a folder"),
    (["baseline", "{local}", "--out", "{tmp}"], "--out {tmp}: a folder; give the baseline file's name"),
    (["baseline", "{tmp}/empty", "--out", "{tmp}/b.json"], "empty: no points/ folder in it"),
])
def test_folders_that_are_not_results_stop_with_one_line(tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("x")
    fill = {"tmp": str(tmp_path), "local": str(LOCAL)}
    res = run_cli(*[a.format(**fill) for a in args])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [l for l in res.stderr.strip().splitlines() if message.format(**fill) in l]


def test_empty_points_folder_reports_nothing_valid(tmp_path):
    (tmp_path / "r" / "points").mkdir(parents=True)
    res = run_cli("report", tmp_path / "r")
    assert res.returncode == 1 and "no valid result file in it" in res.stderr


@pytest.mark.parametrize("text, message", [
    ('{"schema_version": 1, "points": NaN}', "NaN is not a JSON number"),
    ("[", "not JSON"),
    (None, "a folder, not a file"),
])
def test_bad_baseline_files_stop_the_run_with_one_line(tmp_path, text, message):
    path = tmp_path / "b.json"
    path.mkdir() if text is None else path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        baseline.load(path)
    assert len(str(err.value).splitlines()) == 1


def test_reuse_from_a_folder_that_is_not_results_stops_before_anything_runs(pytester):
    copy_suite(pytester.path)
    res = pytester.runpytest("--import-mode=importlib", "benchmarks", "-m", "local", "--reuse-results",
                             str(pytester.path / "nowhere"))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--reuse-results *nowhere: no such folder*"])


def test_report_shows_the_stored_verdict_never_a_new_one(tmp_path, catalog):
    """report.md (posted on PRs) says what pytest decided, baseline gate included: a point that passes its
    gates but failed the baseline in the run is reported failed; one never judged says so."""
    p = by_id(catalog, "tiny-llama-cpu-vllm")
    r = files.read(LOCAL / "points/tiny-llama-cpu-vllm-c4.json")
    base = {"points": {r.identity.case_id: {"output_tps_per_gpu": r.throughput.output_tps_per_gpu * 10,
                                            "recipe_fingerprint": r.identity.recipe_fingerprint, "run_id": "b"}}}
    gates_only, with_baseline = judge(r, p), judge(r, p, base, "base.json")
    assert gates_only.passed      # what a re-judging report without the baseline would have said
    assert [c.name for c in with_baseline.checks if not c.ok] == ["baseline"]
    judged = r.model_copy(update={"verdict": with_baseline}).dump()
    unjudged = {**r.dump(), "identity": {**r.dump()["identity"], "case_id": "tiny-llama-cpu-vllm-c9",
                                         "concurrency": 9}}
    rep = report.write(results_dir(tmp_path, [judged, unjudged]))
    assert rep.verdicts["tiny-llama-cpu-vllm-c4"] == with_baseline.summary()
    assert rep.verdicts["tiny-llama-cpu-vllm-c4"].startswith("failed: regression")
    assert rep.verdicts["tiny-llama-cpu-vllm-c9"] == "not judged"
    md = (tmp_path / "results/report/report.md").read_text()
    assert "| tiny-llama-cpu-vllm-c4 | failed: regression" in md
    csv_rows = {row["case_id"]: row for row in csv.DictReader(open(tmp_path / "results/report/points.csv"))}
    assert csv_rows["tiny-llama-cpu-vllm-c4"]["verdict"].startswith("failed: regression")


# ---- baseline gate ----

def test_baseline_gate_fails_a_regression_beyond_the_tolerance(tmp_path, catalog):
    d = tmp_path / "results"
    shutil.copytree(LOCAL, d)
    path = tmp_path / "base.json"
    assert run_cli("baseline", d, "--out", path).returncode == 0
    base = baseline.load(path)
    r = json.loads((LOCAL / "points/tiny-llama-cpu-vllm-c4.json").read_text())
    p = by_id(catalog, "tiny-llama-cpu-vllm")
    tol = p.spec.gates.baseline_tolerance
    assert not any(m.startswith("regression") for m in failures(r, p, base))
    slow = copy.deepcopy(r)
    slow["throughput"]["output_tps_per_gpu"] *= (1 - tol) * 0.95
    msgs = [m for m in failures(slow, p, base) if m.startswith("regression")]
    assert len(msgs) == 1 and f"(1 - {tol:.1%})" in msgs[0]
    within = copy.deepcopy(r)
    within["throughput"]["output_tps_per_gpu"] *= (1 - tol) * 1.01
    assert not any(m.startswith("regression") for m in failures(within, p, base))


def test_bad_baseline_file_names_the_problem(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema_version": 1, "cluster": "x", "created_at": "t", "source": "s",
                                "points": {"a-c1": {"output_tps_per_gpu": -1, "recipe_fingerprint": "f", "run_id": "r"}}}))
    with pytest.raises(ValueError, match=r"b.json: -1 is less than or equal to the minimum of 0 at points/a-c1"):
        baseline.load(path)


# ---- reuse of prior results ----

def test_reuse_skips_matching_points_and_reruns_the_rest(pytester, catalog):
    copy_suite(pytester.path)
    # no serving venv in this copy: a point that must really run skips with that reason instead
    prior = pytester.path / "prior" / "points"
    prior.mkdir(parents=True)
    vllm = by_id(catalog, "tiny-llama-cpu-vllm")
    for c in (1, 4):
        r = json.loads((LOCAL / f"points/tiny-llama-cpu-vllm-c{c}.json").read_text())
        r["identity"]["recipe_fingerprint"] = vllm.fingerprint if c == 1 else "0" * 64   # c4: another recipe
        (prior / f"tiny-llama-cpu-vllm-c{c}.json").write_text(json.dumps(r))
    res = pytester.runpytest("--import-mode=importlib", "benchmarks", "-m", "local and not slurm", "-k", "vllm and not search", "-rs", "--reuse-results",
                                        str(prior.parent), "--junitxml", "junit.xml", "--results-dir", "out")
    res.assert_outcomes(passed=1, skipped=1)
    res.stdout.fnmatch_lines(["*SKIPPED*tiny-llama-cpu-vllm: the serving venv is missing*"])
    junit = (pytester.path / "junit.xml").read_text()
    assert 'name="reused"' in junit and "measured with another recipe (fingerprint 000000000000" in junit
    assert json.loads((pytester.path / "out/latest/points/tiny-llama-cpu-vllm-c1.json").read_text())["identity"][
        "recipe_fingerprint"] == vllm.fingerprint
    assert "reused" in (pytester.path / "out/latest/summary.md").read_text()


# ---- CI workflows ----

def test_workflow_files_match_the_github_schema():
    """check-jsonschema's command, in this process (its click runner) rather than an interpreter of its own."""
    from check_jsonschema import main
    from click.testing import CliRunner
    files = sorted(str(p) for p in (REPO / ".github/workflows").glob("*.yml"))
    assert len(files) == 2
    res = CliRunner().invoke(main, ["--builtin-schema", "vendor.github-workflows", *files])
    assert res.exit_code == 0 and "validation done" in res.output, res.output


def test_ci_workflow_runs_the_readme_test_command():
    ci = (REPO / ".github/workflows/ci.yml").read_text()
    assert ".ci/run" in ci and "results/junit-ci*.xml" in ci and "report.md" in ci
    run = " ".join((REPO / ".ci/run").read_text().replace("\\\n", " ").split())
    found = re.findall(r'scripts/test -m (\S+|"[^"]+")((?: [\w=/.-]+)*) -p no:cacheprovider '
                       r'--junitxml=results/junit-ci[\w-]*\.xml', run)
    assert len(found) == 6, run
    # a selection split by path (`--ignore=P ...` in one part, `P ...` in the other) counts once: the same paths
    by_expr: dict[str, list[list[str]]] = {}
    for expr, extra in found:
        by_expr.setdefault(expr, []).append(extra.split())
    for expr, extras in by_expr.items():
        if len(extras) == 2:
            ignored, named = sorted(extras, key=lambda e: not e[0].startswith("--ignore="))
            assert sorted(i.removeprefix("--ignore=") for i in ignored) == sorted(named), extras
        else:
            assert extras == [[]], (expr, extras)
    parts = list(by_expr)
    assert len(parts) == 5, found
    # together they select what `scripts/test` alone does (-m "not hardware"), each test once: checked over every
    # combination of the markers a test can carry (offline is set exactly where none of the others is)
    from _pytest.mark.expression import Expression
    from tests.conftest import NEEDS_MORE
    parts = [Expression.compile(p.strip('"')) for p in parts]
    whole = Expression.compile("not hardware")
    for bits in itertools.product((False, True), repeat=len(NEEDS_MORE)):
        marks = {m for m, on in zip(NEEDS_MORE, bits) if on} | (set() if any(bits) else {"offline"})
        chosen = [p.evaluate(lambda name, **_: name in marks) for p in parts]
        assert sum(chosen) == whole.evaluate(lambda name, **_: name in marks), (marks, chosen)


def test_junit_properties_and_summary_under_xdist(pytester, catalog):
    """Every case's metrics reach the controller's junit XML and summary table from an xdist worker (one worker is
    enough to cross the worker -> controller transport; two only cost a third interpreter)."""
    copy_suite(pytester.path)
    prior = pytester.path / "prior" / "points"
    prior.mkdir(parents=True)
    for src in (LOCAL / "points").glob("*.json"):        # real results, re-keyed to today's recipes
        r = json.loads(src.read_text())
        r["identity"]["recipe_fingerprint"] = by_id(catalog, r["identity"]["profile"]).fingerprint
        (prior / src.name).write_text(json.dumps(r))
    res = pytester.runpytest_inprocess("benchmarks", "-m", "local and not offload and not slurm", "-k", "not search", "-n", "1", "--dist", "loadgroup",
                                        "--reuse-results", str(prior.parent), "--junitxml", "junit.xml",
                                        "--results-dir", "out")
    res.assert_outcomes(passed=4)
    import xml.etree.ElementTree as ET
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    assert len(props) == 4
    for name, prop in props.items():
        assert float(prop["output_tps_per_gpu"]) > 0 and prop["error_rate"] == "0.0" and prop["reused"], name
    summary_md = (pytester.path / "out/latest/summary.md").read_text()
    assert summary_md.count("passed (reused)") == 4
    assert (pytester.path / "out/latest/report/report.md").is_file()


def test_rackbench_report_writes_report_html_without_a_history_and_adds_to_none(tmp_path):
    d = tmp_path / "results"
    shutil.copytree(LOCAL, d)
    res = run_cli("report", d)
    assert res.returncode == 0, res.stderr
    page = d / "report" / "report.html"
    assert str(page) in res.stdout.splitlines()
    assert page.read_text().count('"case": "tiny-llama-cpu-') == 4
    assert not (d / "history.sqlite").exists()                        # a report never writes a history
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database " * 50)
    res = run_cli("report", d, "--history", junk)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().endswith("report.html not written: " + f"{junk}: not a rackbench history (file is not a database)")
    assert (d / "report" / "report.md").is_file()


def test_the_four_h200_profiles_give_exactly_two_offload_pairs(tmp_path):
    """vllm, vllm_offload, dynamo and dynamo_offload in one folder (the run of the issue, where each offload arm was
    paired with both base arms and one plot overwrote the other): the real H200 points of the first three, and a
    dynamo_offload arm at c8 (the vllm_offload-c8 point served as Dynamo 1.4.0 would report it; no real one is
    recorded). Each offload arm pairs with the base arm of its own frontend only, one plot per pair named after both."""
    d = tmp_path / "results"
    shutil.copytree(REPO / "tests/data/h200-gpu-run/points", d / "points")
    arm = json.loads((d / "points/llama-770m-h200-vllm_offload-c8.json").read_text())
    arm["identity"].update(profile="llama-770m-h200-dynamo_offload", case_id="llama-770m-h200-dynamo_offload-c8",
                           versions={**arm["identity"]["versions"], "dynamo": "1.4.0"})
    (d / "points/llama-770m-h200-dynamo_offload-c8.json").write_text(json.dumps(arm))
    rep = report.write(d)
    assert offload.pairs(rep.points) == [
        offload.Pair("llama-770m-h200-dynamo", "llama-770m-h200-dynamo_offload", (8,)),
        offload.Pair("llama-770m-h200-vllm", "llama-770m-h200-vllm_offload", (8, 32))]
    plots = sorted(p.name for p in (d / "report").glob("offload-ab-*.png"))
    assert plots == ["offload-ab-llama-770m-h200-dynamo_offload-vs-llama-770m-h200-dynamo.png",
                     "offload-ab-llama-770m-h200-vllm_offload-vs-llama-770m-h200-vllm.png"]
    md = (d / "report/report.md").read_text()
    assert md.count("### Offload A/B: ") == 2
    assert "`llama-770m-h200-dynamo_offload` vs `llama-770m-h200-dynamo`" in md
    assert "`llama-770m-h200-vllm_offload` vs `llama-770m-h200-vllm`" in md

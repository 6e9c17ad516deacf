"""report.html: one self-contained page over the results history (plotly.js embedded), tested in a real headless
browser (Debian's chromium; .ci/run installs it) on two real H200 runs of the same point."""

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rackbench.core.format import number
from rackbench.history import store as history
from rackbench.report import html as html_report
from tests.test_history import DATA, results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_skip_without = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium (.ci/run does)")


def needs_browser(test):
    """A test in headless chromium: marker `browser` (a system package, like Slurm: not part of `-m offline`)."""
    return pytest.mark.browser(_skip_without(test))
OLD, NEW = "20261201-002632-930", "20261201-055706-822"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    old = results(tmp, "old", DATA / "h200-suite-run/vllm-c8/result-as-judged-then.json", DATA / "h200-suite-run/vllm-c8")
    new = results(tmp, "new", DATA / "h200-gpu-run/points/llama-770m-h200-vllm-c8.json", DATA / "h200-gpu-run/aiperf/vllm-c8")
    db = tmp / "history.sqlite"
    history.add(db, old, commit="9e0aca9")
    history.add(db, new, commit="2fb02d3")
    return html_report.write(db, new / "report" / "report.html")


class Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []

    def handle_starttag(self, tag, attrs):
        self.refs += [(tag, k, v) for k, v in attrs if k in ("src", "href") or (tag == "link")]


def test_the_page_needs_no_network_and_embeds_every_point(page):
    text = page.read_text()
    refs = Refs()
    refs.feed(text)
    assert refs.refs == [] and "@import" not in text                  # nothing to fetch (links are made by the script)
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S).group(1))
    assert [r["run_id"] for r in data["runs"]] == [OLD, NEW]
    assert [c["case"] for c in data["comparisons"]] == ["llama-770m-h200-vllm-c8"]
    assert data["comparisons"][0]["changes"][0]["verdict"] == "better"
    assert data["runs"][1]["points"][0]["links"] == {"JSON": "../points/llama-770m-h200-vllm-c8.json"}


def browse(page, fragment="", extra=()):
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                          "--virtual-time-budget=5000", *extra, f"file://{page}{fragment}"],
                         capture_output=True, text=True, timeout=120)
    console = [ln for ln in out.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    return out.stdout, console


def points_drawn(dom: str) -> int:
    """Markers plotly drew (one per point of the selected runs)."""
    return len(re.findall(r'<path class="point[ "]', dom))


def legend(dom: str) -> list[str]:
    return re.findall(r'class="legendtext"[^>]*data-unformatted="([^"]*)"', dom)


@needs_browser
def test_it_renders_without_console_errors_and_selecting_a_run_changes_what_is_shown(page):
    dom, console = browse(page, extra=["--dump-dom"])
    assert console == [], console
    assert points_drawn(dom) == 2                                         # the last two runs, one point each
    assert legend(dom) == [f"{OLD} llama-770m-h200-vllm", f"{NEW} llama-770m-h200-vllm"]
    assert len(re.findall(r'class="xtick"', dom)) > 2 and len(re.findall(r'class="ytick"', dom)) > 2   # real axes
    assert "better" in dom and "[+" in dom                                  # the comparison, with its interval
    dom, console = browse(page, f"#runs={OLD}", ["--dump-dom"])
    assert console == [] and points_drawn(dom) == 1 and legend(dom) == [f"{OLD} llama-770m-h200-vllm"]
    assert "<td>" + NEW not in dom
    # a section with nothing to show says why
    assert '<p class="empty">select two runs to compare them' in dom
    assert '<p class="empty">no offload arm with a base arm that differs from it only in the offload' in dom


@needs_browser
def test_a_script_error_in_the_page_is_caught(page, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text().replace("(function init() {", "(function init() { undefinedThing();"))
    _, console = browse(broken, extra=["--dump-dom"])
    assert any("undefinedThing" in ln for ln in console), console


@needs_browser
def test_screenshot(page, tmp_path):
    shot = tmp_path / "report.png"
    browse(page, extra=[f"--screenshot={shot}", "--window-size=1100,1400", "--hide-scrollbars"])
    from PIL import Image
    img = Image.open(shot).convert("RGB")
    assert img.size == (1100, 1400)
    colors = img.crop((0, 150, 600, 600)).getcolors(maxcolors=100000)
    assert len(colors) > 20                                                 # a plot, not a blank page


def offload_page(tmp_path) -> Path:
    db = tmp_path / "history.sqlite"
    history.add(db, DATA / "h200-gpu-run")
    return html_report.write(db, tmp_path / "report" / "report.html")


def test_offload_ab_pairs_each_offload_arm_with_its_base_arm(tmp_path):
    """The real H200 run (vllm and vllm_offload at c8 and c32): one row per shared concurrency, the ratio of the
    arms' output tok/s per GPU and the offload arm's CPU-tier share, read from the stored results."""
    run = DATA / "h200-gpu-run"
    page = offload_page(tmp_path)
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page.read_text(), re.S)[1])
    rows = data["runs"][0]["offload_ab"]
    assert [(x["offload"], x["base"], x["concurrency"]) for x in rows] == [
        ("llama-770m-h200-vllm_offload", "llama-770m-h200-vllm", 8), ("llama-770m-h200-vllm_offload", "llama-770m-h200-vllm", 32)]
    for x in rows:
        base = json.loads((run / f"points/llama-770m-h200-vllm-c{x['concurrency']}.json").read_text())
        off = json.loads((run / f"points/llama-770m-h200-vllm_offload-c{x['concurrency']}.json").read_text())
        ratio = off["throughput"]["output_tps_per_gpu"] / base["throughput"]["output_tps_per_gpu"]
        assert x["ratio"] == number(ratio, "ratio")                           # written by the one formatter
        assert x["cpu_tier"] == number(off["server"]["prompt_token_shares"]["cpu_tier"], "share") != "0.0%"
    links = data["runs"][0]["points"][0]["links"]
    assert links["JSON"] == os.path.relpath(run / "points" / f"{data['runs'][0]['points'][0]['case']}.json", page.parent)


@needs_browser
def test_the_browser_shows_one_offload_row_per_shared_concurrency(tmp_path):
    dom, console = browse(offload_page(tmp_path), extra=["--dump-dom"])
    assert console == [] and dom.count("<td>llama-770m-h200-vllm_offload</td>") == 2

"""#56: a point's GPU figures and its bound are the measured window's, not the whole sampling span's (the server's
and the load generator's start-up, the warm-up and the grace): over a 120 s window the GPU drew 668 W while the
stored mean said 519 W, and a point running at 82% utilisation in its window was judged at 63%."""

from types import SimpleNamespace

from rackbench.results.bound import queue
from rackbench.results.window import telemetry_block
from rackbench.server.machine import summarize

T0 = 1_800_000_000.0


def rows(spans):
    """nvidia-smi rows, one a second: (seconds, watts, utilisation %) stretches."""
    out, t = [], 0
    for seconds, watts, util in spans:
        for _ in range(seconds):
            out.append([f"2026/12/06 10:{t // 60:02d}:{t % 60:02d}.000", "0", "GPU-abc", "1980", "2619", f"{watts}",
                        "60", f"{util}", "70000"])
            t += 1
    return out


def test_the_gpu_figures_are_the_windows_and_the_span_is_kept_beside_them():
    sampled = {"n1": rows([(30, 150, 5), (120, 668, 82), (30, 200, 10)])}     # start-up, window, grace
    span = summarize(sampled, 1.0)
    m = SimpleNamespace(telemetry=span, telemetry_rows=sampled, telemetry_started=T0,
                        records=SimpleNamespace(window=(T0 + 30, T0 + 149)))
    block = telemetry_block(m)
    (gpu,) = block["gpus"]
    assert block["over"] == "window" and gpu["samples"] == 120
    assert gpu["power_w"]["mean"] == 668 and gpu["utilization_pct"]["mean"] == 82
    assert block["span_gpus"][0]["power_w"]["mean"] < 600 and block["span_gpus"][0]["samples"] == 180
    m.records.window, m.records.profiled = None, []          # not known: the span, said so
    assert telemetry_block(m)["gpus"][0]["samples"] == 180 and "over" not in telemetry_block(m)


def test_a_point_stopped_early_takes_its_window_from_its_requests():
    """A probe its rule stopped early has no window from the generator (AIPerf was cancelled before its summary):
    on the H100 search (tests/data/h100-7b-search) five of six probes kept their GPU figures over the whole span. The
    requests' span stands in for it."""
    from rackbench.load.records import Request
    sampled = {"n1": rows([(30, 150, 5), (45, 668, 82), (10, 200, 10)])}
    sent = [Request(phase="profiling", ok=True, start_s=T0 + 30 + i, end_s=T0 + 31 + i) for i in range(44)]
    m = SimpleNamespace(telemetry=summarize(sampled, 1.0), telemetry_rows=sampled, telemetry_started=T0,
                        records=SimpleNamespace(window=None, profiled=sent))
    block = telemetry_block(m)
    assert block["over"] == "window" and block["gpus"][0]["power_w"]["mean"] == 668


def test_the_queue_that_judges_the_bound_is_the_windows():
    series = SimpleNamespace(t=[10.0, 20.0, 30.0, 40.0], running=[1, 4, 4, 1], waiting=[0, 3, 3, 0],
                             output_tps=[5.0, 50.0, 50.0, 5.0], kv_usage=[0.1, 0.9, 0.9, 0.1])
    whole, inside = queue(series), queue(series, SimpleNamespace(start_s=15.0, end_s=30.0))
    assert whole["waiting_share"] == 0.5 and inside["waiting_share"] == 1.0 and inside["active_slices"] == 2


def test_a_machine_record_that_contradicts_the_cluster_file_is_said_and_labels_the_point(tmp_path):
    """#56: the lent machine was an H100; the case ids, gpu_type and every label said h200, and nothing flagged the
    difference the point's own machine record showed. The contradiction is found from the record (model, count,
    memory) and the report labels the point with the card it ran on; an H200 record contradicts nothing."""
    import json
    import shutil

    from rackbench.report.files import write
    from rackbench.results.card import contradictions
    from rackbench.results.model import parse
    from tests.conftest import REPO
    src = REPO / "tests/data/h200-7b/points/llama-7b-h200-vllm-c32.json"
    r = parse(json.loads(src.read_text()))
    assert contradictions("h200", 1, 139.0, r.machine.nodes) == []
    data = json.loads(src.read_text())
    for g in data["machine"]["nodes"][0]["gpus"]:
        g.update(name="NVIDIA H100 80GB HBM3", memory_mib=81559.0)
    h100 = parse(data)
    found = contradictions("h200", 1, 139.0, h100.machine.nodes)
    assert any("NVIDIA H100 80GB HBM3, not the cluster file's gpu_type h200" in f for f in found), found
    assert any("80 GiB per GPU, the cluster file says 139" in f for f in found), found
    assert contradictions("h200", 2, 139.0, r.machine.nodes)[0].endswith("1 GPU(s), the cluster file says 2 per node")
    data["identity"].update(card="NVIDIA H100 80GB HBM3", card_differs=found)
    (tmp_path / "points").mkdir()
    (tmp_path / "points" / src.name).write_text(json.dumps(data))
    write(tmp_path)
    md = (tmp_path / "report/report.md").read_text()
    assert "ran on NVIDIA H100 80GB HBM3 (not the cluster file's h200)" in md, md
    from rackbench.report.summary import markdown, properties, terminal_lines
    row = properties(parse(data))
    assert row["ran_on"] == "NVIDIA H100 80GB HBM3 (not the cluster file's h200)"        # a junit property too
    assert "(ran on NVIDIA H100 80GB HBM3" in markdown([row], []) and "(ran on" in terminal_lines([row])[1]
    assert "ran_on" not in properties(r)


CAP = 8 * 2**20     # the growing log's most, in bytes


def test_a_poll_keeps_a_log_that_grows_while_it_packs_and_leaves_the_dataset_copies(tmp_path):
    """#56: a whole 9-minute poll was thrown away when a log grew while tar packed it ("file changed as we read
    it", exit 1), and most of each reply was AIPerf's dataset copies, which no result needs."""
    import subprocess
    import tarfile
    import threading

    from tests.conftest import REPO
    runs = tmp_path / "sb7b"
    (runs / "r-1/points").mkdir(parents=True)
    (runs / "r-1/points/p.json").write_text("{}")
    for junk in ("r-1/.hf-cache/aiperf-mmap/dataset.dat", "r-1/prof/case/aiperf-work/x.bin", "r-1/case/dataset.dat"):
        (runs / junk).parent.mkdir(parents=True, exist_ok=True)
        (runs / junk).write_bytes(b"x" * 1000)
    (runs / "runs.log").write_text("== done\n")
    growing = runs / "point.log"
    growing.write_text("start\n")
    stop = threading.Event()

    def grow():      # as fast as it can, but never past CAP: unbounded, a slow poll once filled 13 GB of tmpfs
        with open(growing, "a") as fh:
            while not stop.is_set():
                if fh.tell() > CAP:
                    fh.truncate(0)
                    fh.seek(0)
                fh.write("x" * 4096 + "\n")
                fh.flush()
    writer = threading.Thread(target=grow, daemon=True)
    writer.start()
    out = tmp_path / "out"
    out.mkdir()
    try:
        done = subprocess.run([str(REPO / "dev/gpu-lease"), "poll", str(out), "0"], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "GPU_LEASE_DIR": str(tmp_path)}, timeout=120)
    finally:
        stop.set()
        writer.join()
    assert done.returncode == 0, done.stderr
    parts = sorted(out.glob("r.tgz.*"))
    (tmp_path / "r.tgz").write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(tmp_path / "r.tgz") as tar:
        names = tar.getnames()
    assert "./r-1/points/p.json" in names and "./point.log" in names, names
    assert not [n for n in names if "dataset.dat" in n or "aiperf-work" in n or ".hf-cache" in n], names

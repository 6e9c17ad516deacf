"""Server layer, offline: per-node layouts (golden), flag checks, offload config, metrics parsing on real
H200 recordings. The real servers are exercised in tests/test_live.py and by the local benchmark cases."""

import json
from pathlib import Path

import pytest

from rackbench.catalog import parser_tables as flag_tables
from rackbench.catalog.loader import Catalog
from rackbench.catalog.flag_rules import entrypoint_flags
from rackbench.catalog.rules import offload_dram_budget
from rackbench.server import counters as metrics
from rackbench.server.assembly import dry_placement
from rackbench.server.placement import DETECT_INTERFACES, placement_for
from rackbench.server.plan import cli_args, plan
from tests.conftest import REPO, by_id, copy_suite, edit

H200 = Path(__file__).parent / "data" / "h200"




def workers(sp):
    return [p for p in sp.processes if p.role in ("worker", "headless")]


@pytest.mark.parametrize("name", ["kimi-k3-gb200-tp", "kimi-k3-gb200-tep"])
def test_tp16_one_process_per_node_three_headless_followers(catalog, name):
    sp = plan(by_id(catalog, name), dry_placement(by_id(catalog, name)))
    ws = workers(sp)
    assert [w.rank for w in ws] == [0, 1, 2, 3]
    assert [w.role for w in ws] == ["worker", "headless", "headless", "headless"]
    for w in ws:
        argv = list(w.argv)
        i = argv.index("--node-rank")
        assert argv[i + 1] == str(w.rank) and argv[argv.index("--nnodes") + 1] == "4"
        assert argv[argv.index("--master-addr") + 1] == "node0"
        assert argv[argv.index("--tensor-parallel-size") + 1] == "16"
        assert ("--headless" in argv) is (w.rank > 0)
    assert len(sp.engines) == 1 and sp.metrics_urls == ["http://node0:18081/metrics"]
    assert sp.expected_instances == 1
    assert [p.name for p in sp.processes][:3] == ["etcd", "nats", "frontend"]


@pytest.mark.parametrize("name", ["kimi-k3-gb200-dep", "kimi-k3-gb200-dep_offload"])
def test_dep16_four_engines_four_metrics_urls(catalog, name):
    prof = by_id(catalog, name)
    sp = plan(prof, dry_placement(prof))
    ws = workers(sp)
    assert len(ws) == 4 and all(w.role == "worker" for w in ws)
    for w in ws:
        argv = list(w.argv)
        assert argv[argv.index("--data-parallel-size-local") + 1] == "1"
        assert argv[argv.index("--data-parallel-start-rank") + 1] == str(w.rank)
        assert argv[argv.index("--data-parallel-address") + 1] == "node0"
        assert argv[argv.index("--data-parallel-rpc-port") + 1] == "13345"
        assert "--data-parallel-hybrid-lb" in argv and "--headless" not in argv
        assert argv[argv.index("--data-parallel-size") + 1] == "4" and "--enable-expert-parallel" in argv
        assert w.env["DYN_SYSTEM_PORT"] == "18081"          # one per node, each on its own host (per-host ports)
    assert [e.dp_rank for e in sp.engines] == [0, 1, 2, 3]
    assert len(sp.metrics_urls) == 4 and sp.expected_instances == 4
    offload = [json.loads(w.argv[w.argv.index("--kv-transfer-config") + 1]) for w in ws
               if "--kv-transfer-config" in w.argv]
    if prof.offload:
        assert len(offload) == 4
        assert all(o["kv_connector"] == "SimpleCPUOffloadConnector" and
                   o["kv_connector_extra_config"]["cpu_bytes_to_use_per_rank"] == 128 * 2**30 for o in offload)
        assert all(w.env["PYTHONHASHSEED"] == "42" for w in ws)
    else:
        assert offload == []


def test_frontend_on_head_with_router_args_and_no_backend_env(catalog):
    sp = plan(by_id(catalog, "kimi-k3-gb200-dep"), dry_placement(by_id(catalog, "kimi-k3-gb200-dep")))
    fe = sp.proc("frontend")
    assert fe.rank == 0 and list(fe.argv[:3]) == ["python3", "-m", "dynamo.frontend"]
    assert "--router-mode" in fe.argv and fe.argv[fe.argv.index("--router-mode") + 1] == "kv"
    assert "--router-kv-events" in fe.argv
    assert "NCCL_IB_HCA" not in fe.env and fe.env["ETCD_ENDPOINTS"] == "http://node0:2379"
    kv = [json.loads(w.argv[w.argv.index("--kv-events-config") + 1]) for w in workers(sp)]
    # wildcard binds; vLLM adds the engine's global DP rank to the port, so each node's publisher is on 20080
    assert [k["endpoint"] for k in kv] == [f"tcp://*:{20080 - r}" for r in range(4)]


def test_processes_sharing_a_host_never_share_a_port(catalog):
    """Every port of every process, as it will bind it (a KV-events endpoint + its engines' DP ranks), is unique per
    host: for two workers on one node as for every node of a host that stands in for several."""
    from rackbench.recipe.profile import Profile
    from rackbench.recipe.schema.srt import SrtRecipe
    dp2 = by_id(catalog, "moe-mini-h200-dp2_hybrid")        # one host, two DP ranks behind Dynamo
    tp = by_id(catalog, "kimi-k3-gb200-tp")
    data = tp.recipe.model_dump()
    data["resources"].update(gpus_per_node=8, agg_nodes=2, agg_workers=8, gpus_per_agg=2)
    data["backend"]["vllm_config"]["aggregated"]["tensor-parallel-size"] = 2
    packed = Profile(tp.file, tp.spec, SrtRecipe.model_validate(data), tp.cluster.model_copy(update={"gpus_per_node": 8}),
                     tp.layers, tp.model)                   # four workers on each of two nodes
    for prof in (dp2, packed, by_id(catalog, "kimi-k3-gb200-dep")):
        sp = plan(prof, dry_placement(prof))
        where = dry_placement(prof)
        bound = []
        for w, role in zip(workers(sp), prof.topology.roles):
            host = where.addresses[w.rank]
            if "DYN_SYSTEM_PORT" in w.env:
                bound.append((host, int(w.env["DYN_SYSTEM_PORT"])))
            if "--kv-events-config" in w.argv:
                base = int(json.loads(w.argv[w.argv.index("--kv-events-config") + 1])["endpoint"].rsplit(":", 1)[1])
                bound += [(host, base + dp) for dp in role.dp_ranks]
        assert len(bound) == len(set(bound)) and bound, (prof.id, bound)


def test_interfaces_detected_on_the_node_unless_the_cluster_names_them(catalog):
    prof = by_id(catalog, "kimi-k3-gb200-dep")
    detected = workers(plan(prof, dry_placement(prof)))[0]
    assert tuple(detected.argv[:len(DETECT_INTERFACES)]) == DETECT_INTERFACES
    assert "NCCL_SOCKET_IFNAME" not in detected.env
    named = placement_for(prof, ["a", "b", "c", "d"], ["a", "b", "c", "d"], "/w")
    named = named.__class__(**{**named.__dict__, "interfaces": ("ib0", "eth0")})
    w = workers(plan(prof, named))[0]
    assert w.argv[0] == "python3" and w.env["NCCL_SOCKET_IFNAME"] == "ib0" and w.env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_local_profiles_render_for_this_machine(catalog):
    sp = plan(by_id(catalog, "tiny-llama-cpu-vllm"), dry_placement(by_id(catalog, "tiny-llama-cpu-vllm")))
    (w,) = sp.processes
    assert w.argv[:3] == ("./.venvs/serve/bin/python", "-m", "vllm.entrypoints.openai.api_server")
    assert w.env["VLLM_CPU_KVCACHE_SPACE"] is None          # unset, never empty
    assert sp.health_urls == ("http://127.0.0.1:8000/health",)
    dyn = plan(by_id(catalog, "tiny-llama-cpu-dynamo"), dry_placement(by_id(catalog, "tiny-llama-cpu-dynamo")))
    assert [p.name for p in dyn.processes] == ["frontend", "worker0"]          # file discovery: no etcd/nats
    assert dyn.proc("worker0").env["DYN_DISCOVERY_BACKEND"] == "file"


@pytest.mark.catalog("local")
def test_argv_is_a_list_and_hostile_values_stay_literal(catalog, recipes):
    edit(recipes / "local/base.yaml", "served-model-name: tiny", "served-model-name: 'x; rm -rf ~ $(id)'")
    prof = by_id(Catalog.load(recipes), "tiny-llama-cpu-vllm")
    w = plan(prof, dry_placement(prof)).processes[0]
    assert "x; rm -rf ~ $(id)" in w.argv


def test_cli_args_spelling():
    assert cli_args({"enforce-eager": True, "enable_prefix_caching": False, "x": None, "max-num-seqs": 8,
                     "compilation-config": {"a": [1, 2]}, "cudagraph-capture-sizes": [1, 2]}) == [
        "--enforce-eager", "--no-enable-prefix-caching", "--max-num-seqs", "8", "--compilation-config",
        '{"a":[1,2]}', "--cudagraph-capture-sizes", "1", "2"]


# ---- flags checked offline against the pinned tables (rackbench/tools/flag_table.py) ----

def test_shipped_recipes_pass_the_flag_tables(catalog):
    for prof in catalog.profiles:
        assert list(entrypoint_flags(prof)) == [], prof.id


def test_vllm_serve_flag_on_dynamo_worker_is_rejected_at_collection(pytester, repo):
    copy_suite(pytester.path)
    edit(pytester.path / "recipes/kimi-k3/gb200/dep.yaml", "        max-num-seqs: 64\n",
         "        max-num-seqs: 64\n        tool-call-parser: kimi_k2\n")
    res = pytester.runpytest("--import-mode=importlib", "benchmarks", "--collect-only", "-q")
    assert res.ret != 0
    res.stdout.fnmatch_lines(["*dep.yaml:*: recipe.backend.vllm_config.aggregated.tool-call-parser: --tool-call-parser is "
                              "not accepted by Dynamo's vLLM worker (python -m dynamo.vllm)*use dyn-tool-call-parser*"])
    assert "Traceback" not in res.stdout.str()


@pytest.mark.parametrize("flag, why", [
    ("max-num-seq: 8", "abbreviations are not allowed, did you mean --max-num-seqs"),
    ("enable-auto-tool-choice: true", "it is a `vllm serve` flag: drop it"),
    ("headless: true", "derived from the layout"),
    ("no-such-flag: 1", "--no-such-flag is not accepted"),
])
@pytest.mark.catalog("kimi-k3")
def test_bad_worker_flags_name_flag_and_entrypoint(recipes, flag, why):
    edit(recipes / "kimi-k3/gb200/tep.yaml", "        max-num-seqs: 32\n", f"        max-num-seqs: 32\n        {flag}\n")
    from rackbench.core.errors import ConfigError
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    assert why in str(err.value) and "tep.yaml" in str(err.value)


def test_flag_table_holds_both_entrypoints():
    t = flag_tables.load("dynamo-1.6.1_vllm-0.31.0")
    assert "--tool-call-parser" in t.entrypoints["vllm serve"]
    assert "--tool-call-parser" not in t.entrypoints["dynamo.vllm"]
    assert "--dyn-tool-call-parser" in t.entrypoints["dynamo.vllm"] and "--router-mode" in t.entrypoints["dynamo.frontend"]
    with pytest.raises(KeyError, match="rackbench/tools/flag_table.py"):
        flag_tables.load("no-such-image")


# ---- CPU KV offload: config and DRAM budget (the connector itself only runs on a GPU) ----

def test_local_offload_arm_renders_the_connector(catalog):
    prof = by_id(catalog, "tiny-llama-cpu-dynamo_offload")
    w = plan(prof, dry_placement(prof)).proc("worker0")
    cfg = json.loads(w.argv[w.argv.index("--kv-transfer-config") + 1])
    assert cfg == {"kv_connector": "SimpleCPUOffloadConnector", "kv_role": "kv_both",
                   "kv_connector_extra_config": {"cpu_bytes_to_use": 1073741824, "lazy_offload": False}}
    assert list(offload_dram_budget(prof)) == []


@pytest.mark.catalog("local")
def test_offload_pool_above_the_dram_budget_is_caught(recipes):
    edit(recipes / "local/dynamo_offload.yaml", '"cpu_bytes_to_use":1073741824', '"cpu_bytes_to_use":21474836480')
    from rackbench.core.errors import ConfigError
    with pytest.raises(ConfigError, match="DRAM"):
        Catalog.load(recipes)


# ---- metrics: prometheus_client parsing of real vLLM 0.26.0 /metrics from an H200 ----

def snap(name):
    return metrics.parse((H200 / name).read_text())


def test_offload_counters_from_real_recording():
    d = snap("ctx16k/offload-c8-after.prom") - snap("ctx16k/offload-c8-before.prom")
    assert d.generation_tokens > 0 and d.prompt_tokens > 0 and d.prefix_cache_queries >= d.prefix_cache_hits
    assert d.external_prefix_cache_hits > 0 and d.external_prefix_cache_queries >= d.external_prefix_cache_hits
    assert d.prompt_tokens_external == d.external_prefix_cache_hits
    base = snap("ctx16k/base-c8-after.prom") - snap("ctx16k/base-c8-before.prom")
    assert base.external_prefix_cache_hits == 0 and base.external_prefix_cache_queries == 0


def test_probe_counters_match_the_recorded_deltas():
    after = snap("vllm-metrics-offload-after-probe.prom")
    probe = json.loads((H200 / "prefix-revisit-offload.json").read_text())["metric_deltas"]
    key = 'vllm:external_prefix_cache_hits_total{engine="0",model_name="m"}'
    assert after.external_prefix_cache_hits == probe[key] == 95984
    assert after.idle and after.engines == 1


def test_engines_are_summed_and_counted():
    text = (H200 / "ctx16k/offload-c8-after.prom").read_text()
    lines = []
    for line in text.splitlines():      # a second engine's series, right after the first's (as vLLM writes them)
        lines.append(line)
        if line.startswith(("vllm:generation_tokens_total", "vllm:num_requests_running")):
            lines.append(line.replace('engine="0"', 'engine="1"'))
    two = "\n".join(lines) + "\n"
    assert metrics.parse(two).generation_tokens == 2 * metrics.parse(text).generation_tokens
    assert metrics.parse(two).engines == 2


@pytest.mark.parametrize("page", sorted(str(p.relative_to(REPO)) for p in (REPO / "tests/data").rglob("*.prom")))
def test_the_pages_families_only_are_parsed_and_give_what_the_whole_page_gives(page, monkeypatch):
    """parse() hands prometheus_client only the families a Snapshot reads (13.7 -> 1.0 ms a scrape of a real
    vLLM page); on every recorded page that is the Snapshot of the whole page."""
    text = (REPO / page).read_text()
    fast = metrics.parse(text)
    assert len(metrics._wanted(text).splitlines()) < len(text.splitlines()) / 4
    monkeypatch.setattr(metrics, "_wanted", lambda whole: whole)
    assert fast == metrics.parse(text) and fast.engines >= 1


def test_running_versions_must_match_the_recipe_identity(catalog):
    from rackbench.server.deploy import ServerError, check_identity
    prof = by_id(catalog, "tiny-llama-cpu-dynamo")
    check_identity(prof, {"vllm": "0.31.0+cpu", "dynamo": "1.6.1"})          # local build suffix is fine
    with pytest.raises(ServerError, match=r"dynamo: server reports 1\.6\.0, recipe identity\.frameworks\.dynamo says 1\.6\.1"):
        check_identity(prof, {"vllm": "0.31.0", "dynamo": "1.6.0"})


@pytest.mark.catalog("kimi-k3")
def test_per_rank_dp_launch_and_per_node_environment(catalog, recipes):
    edit(recipes / "kimi-k3/gb200/dep.yaml", "  backend:\n", "  backend:\n    dp_launch_mode: per_rank\n")
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-dep")
    ws = workers(plan(prof, dry_placement(prof)))
    for w in ws:
        argv = list(w.argv)
        assert argv[argv.index("--data-parallel-rank") + 1] == str(w.rank)
        assert "--data-parallel-hybrid-lb" not in argv and "--data-parallel-size-local" not in argv
    local = by_id(catalog, "tiny-llama-cpu-vllm")
    (w,) = plan(local, dry_placement(local)).processes
    assert w.env["VLLM_CPU_OMP_THREADS_BIND"] == "0"            # cluster runtime.node_environment[0]


def test_a_port_taken_by_one_kind_is_never_given_to_another():
    """etcd's client range starts at 2379 and its peer range at 2380: with 2379 in use here, the client port moved to
    2380 and the peer port was 2380 too (etcd then failed: address already in use). A listener here is skipped, a
    port given to any kind is not given again, and a TIME_WAIT left by a check's connection is no listener."""
    import socket

    from rackbench.server.ports import PortAllocator, port_free
    base = next(p for p in range(41000, 42000, 10) if all(port_free(q) for q in range(p, p + 4)))
    with socket.socket() as held:
        held.bind(("127.0.0.1", base))
        held.listen()
        ports = PortAllocator(probe=True, offset=base - 2379)          # etcd's range at base, its peer's at base + 1
        client, peer = ports.take("etcd", "n1"), ports.take("etcd_peer", "n1")
        assert (client, peer) == (base + 1, base + 2)
        # the same rule without probing: two kinds whose ranges meet on one node never share a port
        off = PortAllocator()
        assert [off.take("etcd", "a"), off.take("etcd", "a"), off.take("etcd_peer", "a")] == [2379, 2380, 2381]
    # a connection closed by the server leaves TIME_WAIT on the server's port: free for a port the recipe pins (its
    # server binds with SO_REUSEADDR), skipped by the search (a bound, not listening socket looks the same to a bind)
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", base + 3))
        server.listen()
        client_sock = socket.create_connection(("127.0.0.1", base + 3))
        conn, _ = server.accept()
        conn.close()
        client_sock.close()
    assert port_free(base + 3, strict=False) and not port_free(base + 3)
    assert PortAllocator(probe=True, bases={"master": base + 3}).take("master", "h") == base + 3


@pytest.mark.parametrize("flag, hint", [
    ("dyn-tool-call-parser: kimi_k2", "; it is a `dynamo.vllm` flag: drop it"),   # another frontend's worker takes it
    ("router-mode: kv", None),                 # only the Dynamo frontend's own process takes it: not a worker flag
])
@pytest.mark.catalog("local")
def test_a_flag_of_another_frontends_worker_is_named_on_vllm_serve(recipes, flag, hint):
    from rackbench.core.errors import ConfigError
    edit(recipes / "local/vllm.yaml", "  frontend:\n    type: vllm\n",
         f"  frontend:\n    type: vllm\n  backend:\n    vllm_config:\n      aggregated:\n        {flag}\n")
    with pytest.raises(ConfigError) as err:
        Catalog.load(recipes)
    line = next(ln for ln in str(err.value).splitlines() if "is not accepted by vLLM's OpenAI server" in ln)
    assert (hint in line) if hint else "; it is a `" not in line, line


def _free_block(n: int) -> int:
    from rackbench.server.ports import port_free
    return next(p for p in range(43000, 44000, 10) if all(port_free(q) for q in range(p, p + n)))


def test_a_port_bound_but_not_listening_is_taken():
    """vLLM binds its API port (SO_REUSEADDR) about a minute before it listens: a second session's probe bound the
    same port beside it, and both servers then fought over it."""
    import socket

    from rackbench.server.ports import PortAllocator, port_free
    base = _free_block(2)
    with socket.socket() as early:
        early.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        early.bind(("127.0.0.1", base))                 # bound, not listening yet
        assert not port_free(base)
        assert PortAllocator(probe=True, offset=base - 8000).take("frontend", "h") == base + 1
    assert port_free(base)


def test_two_sessions_planning_at_once_never_share_a_port(tmp_path):
    """Nothing is bound yet (both only planned): the first session's lease holds its ports until it closes, the
    second is given others, and the holder is named by the lease's own words."""
    from rackbench.server.ports import PortAllocator, PortLease
    base = _free_block(4)
    first, second = PortLease("pid 1: run A", tmp_path), PortLease("pid 2: run B", tmp_path)
    a = PortAllocator(probe=True, offset=base - 8000, lease=first)
    b = PortAllocator(probe=True, offset=base - 8000, lease=second)
    pa, pb = a.take("frontend", "h"), b.take("frontend", "h")
    assert pa == base and pb == base + 1 and first.ports == [base] and second.ports == [base + 1]
    assert second.holder_of(base) == "pid 1: run A" and first.holder_of(base + 1) == "pid 2: run B"
    first.close()
    assert second.holder_of(base) is None
    c = PortAllocator(probe=True, offset=base - 8000, lease=PortLease("pid 3: run C", tmp_path))
    assert c.take("frontend", "h") == base                  # let go: free again


def test_a_pinned_port_in_use_is_refused_naming_its_holder():
    import os
    import socket

    from rackbench.core.listeners import holder
    from rackbench.server.ports import PortAllocator, PortTaken
    base = _free_block(1)
    with socket.socket() as held:
        held.bind(("127.0.0.1", base))
        held.listen()
        ports = PortAllocator(probe=True, bases={"master": base}, describe=holder)
        with pytest.raises(PortTaken) as err:
            ports.take("master", "h")
    assert str(err.value).startswith(f"port {base} (master, pinned by the recipe) is taken on this machine by "
                                     f"pid {os.getpid()} (")
    assert f"listening on 127.0.0.1:{base}: stop it, or pin another port" in str(err.value)
    # on a cluster's nodes (no probe) a pinned port is used as it is, without an offset
    assert PortAllocator(offset=700, bases={"master": base}).take("master", "n1") == base


def test_no_port_a_session_hands_out_is_one_a_shipped_recipe_pins(catalog):
    """A GB200 recipe pins vLLM's default DP RPC port (13345). The allocator's own range for that kind started at
    13345, so a local session beside a rehearsal took the port the rehearsal's recipe pins and the rehearsal found
    it taken (CI, with the Slurm tests beside the server tests). No allocated range holds a pinned port now."""
    from rackbench.server.ports import BASES, JOB_BLOCK, JOB_BLOCKS, SPAN, XDIST_BLOCK
    pinned = {int(v) for p in catalog.profiles for k, v in p.recipe.aggregated_flags.items()
              if k.endswith("port") and str(v).isdigit()}
    assert 13345 in pinned
    # this machine: a block per xdist worker (8 here at most); a cluster's nodes: a block per job id (offset_for)
    shifts = {*range(0, 8 * XDIST_BLOCK, XDIST_BLOCK), *range(0, JOB_BLOCKS * JOB_BLOCK, JOB_BLOCK)}
    handed = {base + shift + i for base in BASES.values() for shift in shifts for i in range(SPAN)}
    assert not pinned & handed, sorted(pinned & handed)


def test_a_cluster_jobs_ports_start_at_a_block_of_its_id():
    from rackbench.server.ports import JOB_BLOCK, PortAllocator, offset_for
    assert offset_for(False, None, "4242") == JOB_BLOCK * (4242 % 16) and offset_for(False, None, None) == 0
    assert offset_for(True, "gw2", "4242") == 2000             # this machine: the lease keeps sessions apart
    assert PortAllocator(offset=offset_for(False, None, "17")).take("frontend", "n1") == 8100


@pytest.mark.parametrize("said, port", [
    ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', PORT): address already in use",
     True),
    ("OSError: [Errno 98] Address already in use", False),       # no port in the line: the argv's --port
    ("INFO 12-02 16:30:00 zmq.error.ZMQError: Address already in use (addr='tcp://*:PORT')", True),
])
def test_a_server_whose_port_was_taken_fails_in_one_line_naming_it_and_its_holder(tmp_path, said, port):
    """vllm_slurm-c2 failed with `OSError: [Errno 98] Address already in use` as a traceback in the point's error."""
    import os
    import socket
    import subprocess

    from rackbench.cluster.base import NodeProcess, ProcessDied
    base = _free_block(1)
    with socket.socket() as held:
        held.bind(("127.0.0.1", base))
        held.listen()
        log = tmp_path / "frontend.log"
        log.write_text("Traceback (most recent call last):\n  File ...\n" + said.replace("PORT", str(base)) + "\n")
        dead = subprocess.Popen(["true"])
        dead.wait()
        proc = NodeProcess(0, "n1", "frontend", ["vllm", "serve", "--port", str(base)], log, dead, "frontend", False,
                           "frontend", [], {})
        message = str(ProcessDied(proc, here=True))
    assert "\n" not in message and "Traceback" not in message, message
    assert message.startswith(f"frontend on node n1 (rank 0) exited with code 0: port {base} is taken on node n1 by "
                              f"pid {os.getpid()} (")
    assert message.endswith(f"listening on 127.0.0.1:{base}: a process outside rackbench's port leases bound it "
                            "before the server did; stop it and run again (where the recipe pins this port, removing "
                            f"the pin lets rackbench lease a free one) (the whole log: {log})")
    assert "let rackbench choose the port" not in message           # it did choose it (#54)


def test_answering_names_the_deployment_whose_process_listens(tmp_path):
    """Where the nodes are this machine, the process on the API port must carry this deployment's token."""
    import os
    import subprocess
    import sys

    from rackbench.server.identity import TOKEN_ENV, answering
    base = _free_block(1)
    url = f"http://127.0.0.1:{base}"
    assert answering(url, "mine") == f"nothing listens on port {base} here"
    code = f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{base})); s.listen(); print('up',flush=True); time.sleep(60)"
    other = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, TOKEN_ENV: "theirs"},
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "up"
        assert answering(url, "theirs") is None
        said = answering(url, "mine")
        assert said.startswith(f"port {base} is answered by pid {other.pid} (") and \
            said.endswith(f"listening on 127.0.0.1:{base}, of deployment theirs: not this deployment's server (mine)")
    finally:
        other.kill()
        other.wait()

"""`rackbench recipe` and `rackbench matrix`: the offline views of the sweep."""

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO, edit, run_cli


def rackbench(*args, cwd):
    return run_cli(*args, cwd=cwd)


def test_the_console_entry_point_runs_and_loads_no_history_for_a_recipe_command(repo):
    """`python -m rackbench matrix` runs; the results history's modules (numpy, the comparisons) load only for the
    commands that read a history (`-X importtime` lists every module the command imported)."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "rackbench", "matrix", "tp"], cwd=repo,
                         capture_output=True, text=True)
    assert res.returncode == 0 and "kimi-k3-gb200-tp-c8" in res.stdout, res.stderr
    loaded = {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    assert "rackbench.catalog.loader" in loaded                           # the listing sees what it reads
    assert not {m for m in loaded if m == "numpy" or m.startswith("rackbench.history")}, sorted(loaded)


def test_recipe_prints_the_merged_overlay(repo):
    res = rackbench("recipe", "dep_offload", cwd=repo)
    assert res.returncode == 0, res.stderr
    doc = yaml.safe_load(res.stdout)
    flags = doc["recipe"]["backend"]["vllm_config"]["aggregated"]
    assert flags["max-num-seqs"] == 96                                    # dep_offload.yaml
    assert flags["tensor-parallel-size"] == 4 and flags["data-parallel-size"] == 4  # dep.yaml
    assert flags["served-model-name"] == "moonshotai/Kimi-K3"             # base.yaml
    assert doc["recipe"]["slurm"]["time_limit"] == "12:00:00"
    assert doc["profile"]["gates"] == {"error_rate": 0.1, "live_error_rate": None, "min_output_tps_per_gpu": {},
                                       "min_concurrency_ratio": 0.9, "max_issue_latency_ms": 50.0, "allow_client_bound": False,
                                       "require_steady": False, "token_ratio_tolerance": 0.1, "max_stall_s": 30.0, "slo": None, "bound": None,
                                       "baseline_tolerance": 0.45}
    assert res.stdout.startswith("# kimi-k3-gb200-dep_offload: effective recipe of recipes/kimi-k3/gb200/dep_offload.yaml")


def test_recipe_srt_only_is_a_plain_srt_slurm_recipe(repo):
    res = rackbench("recipe", "kimi-k3-gb200-tp", "--srt", cwd=repo)
    doc = yaml.safe_load(res.stdout)
    assert "profile" not in doc and doc["name"] == "kimi-k3-gb200-tp16-latency-agentic"


def test_unknown_profile_names_the_known_ones(repo):
    res = rackbench("recipe", "dep_ofload", cwd=repo)
    assert res.returncode != 0 and "kimi-k3-gb200-dep_offload" in res.stderr


def test_matrix_json(repo):
    res = rackbench("matrix", "--json", cwd=repo)
    rows = json.loads(res.stdout)
    assert len([r for r in rows if r["cluster"] == "gb200-nv"]) == 18
    assert [r["id"] for r in rows if r["cluster"] == "local-cpu"] == [
        "tiny-llama-cpu-dynamo-c2", "tiny-llama-cpu-dynamo-c4", "tiny-llama-cpu-dynamo_offload-c2",
        "tiny-llama-cpu-dynamo_offload-c4", "tiny-llama-cpu-vllm-c1", "tiny-llama-cpu-vllm-c4"]
    off = [r for r in rows if r["profile"] == "kimi-k3-gb200-dep_offload"]
    assert [r["concurrency"] for r in off] == [128, 192, 256, 384]
    assert all(r["markers"] == ["hardware", "gb200", "offload"] and r["gpus"] == 16 for r in off)


@pytest.mark.catalog("kimi-k3")
def test_broken_catalog_exits_1_with_the_problem(recipes, repo):
    from tests.conftest import edit
    edit(recipes / "kimi-k3/gb200/tp.yaml", "[1, 2, 4, 8]", "[1, 2, 2, 8]")
    res = rackbench("--recipes", str(recipes), "matrix", cwd=repo)
    assert res.returncode == 1
    assert "tp.yaml" in res.stderr and "profile.concurrency: duplicate concurrencies [2]" in res.stderr
    assert "Traceback" not in res.stderr


def test_render_shows_the_job_script_and_node_steps(repo):
    res = rackbench("render", "kimi-k3-gb200-dep-c64", cwd=repo)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "#SBATCH --nodes=4" in out and "#SBATCH --gpus-per-node=4" in out and "#SBATCH --time=12:00:00" in out
    assert "#SBATCH --partition=batch" in out and "#SBATCH --cpus-per-task=144" in out
    # etcd, nats, frontend and one worker per node: every process is an srun step in the image, model at /model and
    # the recipes' configs/ at /configs; the setup script and the Dynamo install run in each server's own step
    # and the load generator's step on the head node, in the same image
    # the image imported once to shared storage (slurm.images): no step pulls vllm/vllm-openai:kimi-k3 itself
    assert out.count("--container-image=/mnt/lustre01/users-public/sa-shared/rackbench/images/"
                     "vllm-openai+kimi-k3.sqsh") == 8 and "--container-image=vllm/" not in out
    assert out.count("--container-mounts=/mnt/numa1/models/Kimi-K3:/model,") == 8
    # read-only: setup scripts run as root in the container
    assert out.count("/recipes/configs:/configs:ro,/") == 8 and out.count(":/rackbench-tools:ro,") == 8
    assert "--job-name=rackbench-RUN-dep.client --container-image" in out
    assert out.count(" -- python3 /rackbench-tools/preamble.py ") == 6      # 5 servers and the client
    assert "4 engine(s), 4 metrics URL(s), 4 registering worker(s)" in out
    for rank in range(4):
        assert f"engine {rank} on node {rank}: http://node{rank}:18081/metrics" in out
        assert f"--data-parallel-start-rank {rank} " in out
    assert "--headless" not in out


def test_render_tp16_has_three_headless_followers(repo):
    out = rackbench("render", "tp", cwd=repo).stdout
    assert "1 engine(s), 1 metrics URL(s), 1 registering worker(s)" in out
    assert out.count("(headless) on node") == 3 and out.count("--headless") == 3
    assert "--master-addr node0 --master-port 29500 --nnodes 4 --node-rank 3" in out


@pytest.mark.catalog("kimi-k3")
def test_credentials_are_masked_in_render_and_recipe(recipes, repo):
    from tests.conftest import edit
    edit(recipes / "kimi-k3/gb200/base.yaml", '  ETCD_LEASE_TTL: "7200"',
         '  ETCD_LEASE_TTL: "7200"\n  HF_TOKEN: hf_sEcReT123\n  WANDB_API_KEY: wb-sEcReT456')
    for args in (("recipe", "tp"), ("render", "tp"), ("recipe", "tp", "--srt")):
        res = rackbench("--recipes", str(recipes), *args, cwd=repo)
        assert res.returncode == 0, res.stderr
        assert "sEcReT" not in res.stdout and "HF_TOKEN" in res.stdout and "***" in res.stdout


@pytest.mark.catalog("kimi-k3")
def test_credentials_inside_values_are_masked_wherever_they_sit(recipes, repo):
    """#54: a password and an API key inside a JSON flag value, and a password in a URL of an environment value, were
    printed whole by `render` and `recipe`. Each form is masked by key or by its shape; the rest of the value stays."""
    from tests.conftest import edit
    edit(recipes / "kimi-k3/gb200/base.yaml", '  ETCD_LEASE_TTL: "7200"',
         '  ETCD_LEASE_TTL: "7200"\n  PIP_INDEX_URL: https://deploy:pAsSwOrD1@pypi.example.com/simple')
    edit(recipes / "kimi-k3/gb200/base.yaml", "      block-size: 64",
         "      block-size: 64\n      model-loader-extra-config: '{\"remote_url\":\"s3://AKIAIOSFODNN7EXAMPLE:"
         "wJalrSeCrEt@bucket/k3\",\"api_key\":\"sk_live_SeCrEt789\",\"concurrency\":8}'")
    for args in (("recipe", "tp"), ("render", "tp"), ("recipe", "tp", "--srt")):
        res = rackbench("--recipes", str(recipes), *args, cwd=repo)
        assert res.returncode == 0, res.stderr
        out = res.stdout
        for secret in ("pAsSwOrD1", "wJalrSeCrEt", "AKIAIOSFODNN7EXAMPLE", "sk_live_SeCrEt789"):
            assert secret not in out, (args, secret)
        assert "pypi.example.com/simple" in out and "bucket/k3" in out and "concurrency" in out, args


@pytest.mark.parametrize("text, secret, kept", [
    ('{"remote_url":"s3://AKIA:xyz@h/m","api_key":"k-1","n":2}', "xyz", '"n": 2'),      # JSON by key, URL userinfo
    ('[{"token": "t0k"}]', "t0k", "token"),
    ("https://deploy:hunter2@pypi.example/simple", "hunter2", "pypi.example/simple"),
    ("(APIServer) args: api_key=abc123 max_num_batched_tokens=2048", "abc123", "max_num_batched_tokens=2048"),
    ("password: 'pw9' tokenizer=/models/x", "pw9", "tokenizer=/models/x"),
    ("key AKIAIOSFODNN7EXAMPLE in text", "AKIAIOSFODNN7EXAMPLE", "in text"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2Q", "SflKxwRJSMeKKF2Q", "Bearer"),
    ("hf_abcdefghijklmnopqrstuvwxyz12 ghp_abcdefghijklmnopqrstuvwxyz1234", "hf_abcdefghijklmn", "***"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow", "***"),
])
def test_each_form_of_credential_in_a_value_is_redacted(text, secret, kept):
    from rackbench.core.secrets import redact
    out = redact(text)
    assert secret not in out and kept in out, out
    assert redact("--max-num-batched-tokens=2048 /models/tok") == "--max-num-batched-tokens=2048 /models/tok"


def test_a_log_tail_quoted_in_a_result_is_redacted(tmp_path):
    """A server prints its arguments at start-up; its log's tail is quoted in a failed point's result and report."""
    from rackbench.cluster.base import NodeProcess
    log = tmp_path / "vllm.log"
    log.write_text("INFO non-default args: {'api_key': 'sk-live-0123456789abcdef', 'model': '/m'}\nERROR died\n")
    tail = NodeProcess(0, "node0", "vllm", [], log, None).tail()
    assert "0123456789abcdef" not in tail and "ERROR died" in tail and "'model': '/m'" in tail


def _command_paths(classes, prefix=()):
    for cls in classes:
        path = (*prefix, cls.name)
        yield path
        yield from _command_paths(cls.subcommands, path)


def test_every_subcommands_help_works():
    """`rackbench --help` and every `rackbench COMMAND [SUB] --help` print their usage (a `%` in a help string
    once crashed argparse's formatter on the first command a new user types)."""
    from rackbench.cli import COMMANDS
    paths = [(), *_command_paths(COMMANDS)]
    assert len(paths) > 15
    for path in paths:
        res = run_cli(*path, "--help")
        assert res.returncode == 0 and res.stdout.startswith("usage: rackbench"), (path, res.stderr[-500:])


@pytest.mark.parametrize("name", ["DB_PASSWD", "NGC_AUTH", "GOOGLE_APPLICATION_CREDENTIALS", "HF_TOKEN",
                                  "WANDB_API_KEY"])
def test_credential_like_names_are_masked(name):
    from rackbench.core.secrets import is_secret, masked
    assert is_secret(name) and masked({name: "s3cr3t"})[name] != "s3cr3t"
    assert not is_secret("CUDA_VISIBLE_DEVICES") and masked({"NCCL_DEBUG": "INFO"}) == {"NCCL_DEBUG": "INFO"}


def test_importing_the_cli_touches_no_file(monkeypatch):
    """Every command module is imported by every `rackbench` call: none of them may look at the disk then (the
    history command's default store was resolved at import, from whatever folder the process started in)."""
    import importlib
    import os
    from pathlib import Path

    import rackbench.cli as cli
    looked: list[str] = []
    for name in ("is_dir", "exists", "is_file", "stat"):
        real = getattr(Path, name)
        monkeypatch.setattr(Path, name, lambda self, *a, _real=real, _n=name, **k: looked.append(f"{_n} {self}")
                            or _real(self, *a, **k))
    monkeypatch.setattr(os, "listdir", lambda *a: looked.append(f"listdir {a}") or [])
    for module in ("rackbench.cli.history", "rackbench.cli.results", "rackbench.cli.recipes", "rackbench.cli.render",
                   "rackbench.cli.components", "rackbench.cli.jobs", "rackbench.cli.docs"):
        importlib.reload(importlib.import_module(module))
    importlib.reload(cli)
    assert looked == []


def test_rehearse_without_a_scheduler_is_one_line(repo, tmp_path, monkeypatch):
    """`rackbench rehearse` where no Slurm answers (a laptop, CI before slurm-local): one line with the way out,
    not sinfo's FileNotFoundError."""
    monkeypatch.setenv("PATH", "/nonexistent")                            # no sbatch, no sinfo
    res = run_cli("rehearse", "dep_offload", "--results-dir", tmp_path, cwd=repo)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert "rackbench rehearse: cannot allocate on gb200-local: no Slurm client (sbatch) on PATH" in res.stderr


@pytest.mark.catalog("local")
def test_a_credential_in_the_engines_flags_is_refused_and_never_printed(recipes):
    """#35: `api-key: sk_x` among a profile's engine flags was masked by `rackbench recipe` and printed whole by
    `rackbench render`, and the engine's own start-up log would write it into the results. Such a profile is now
    refused before anything runs, naming the file and the flag, and no command prints the key."""
    edit(recipes / "local/vllm.yaml", "  frontend:\n    type: vllm\n",
         "  frontend:\n    type: vllm\n  backend:\n    vllm_config:\n      aggregated:\n        api-key: sk_x\n")
    for argv in (("render", "tiny-llama-cpu-vllm-c1"), ("matrix",), ("recipe", "vllm")):
        res = run_cli("--recipes", recipes, *argv)
        assert "sk_x" not in res.stdout + res.stderr, (argv, res.stdout, res.stderr)
    res = run_cli("--recipes", recipes, "matrix")
    assert res.returncode != 0 and "local/vllm.yaml" in res.stderr, res.stderr
    assert "api-key is a credential: the engine writes it into its start-up log" in res.stderr
    assert "fix: remove api-key: benchmark an endpoint without authentication" in res.stderr
    assert "--tokenizer " in run_cli("render", "tiny-llama-cpu-vllm-c1").stdout     # a tokenizer is no credential
    from rackbench.core.secrets import masked_argv
    assert masked_argv(["x", "--hf-token=abc", "--max-num-batched-tokens", "8", "--auth_secret", "s",
                        "--use-server-token-count", "--api-key", "--ui", "none"]) == \
        ["x", "--hf-token=***", "--max-num-batched-tokens", "8", "--auth_secret", "***", "--use-server-token-count",
         "--api-key", "--ui", "none"]


def test_a_baseline_of_a_two_cluster_run_takes_the_cluster_its_file_is_named_after(tmp_path):
    """#54: `rackbench baseline results --out baselines/local-cpu.json`, as the README says, failed asking for
    --cluster on scripts/bench's results (local-cpu and slurm-local points in one run)."""
    import json
    import shutil
    shutil.copytree(REPO / "tests/data/noise-local/run-1/points", tmp_path / "r/points")
    for path in list((tmp_path / "r/points").glob("*vllm*.json")):
        data = json.loads(path.read_text())
        data["identity"]["cluster"] = "slurm-local"
        path.write_text(json.dumps(data))
    res = run_cli("baseline", tmp_path / "r", "--out", tmp_path / "baselines/local-cpu.json")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "baselines/local-cpu.json").read_text())["cluster"] == "local-cpu"
    res = run_cli("baseline", tmp_path / "r", "--out", tmp_path / "b.json")
    assert res.returncode == 2 and "2 clusters (local-cpu, slurm-local)" in res.stderr, res.stderr

"""What gb200-nv's containers mount or run from shared storage is staged by `rackbench stage` or looked for on each
node before etcd/NATS, with the fix named (#31 defects 2 and 5): offline, from the shipped catalog."""

import dataclasses

import pytest

from tests.conftest import by_id, edit


def test_etcd_and_nats_binaries_on_shared_storage_are_looked_for_on_each_node(catalog, tmp_path):
    """gb200-nv's vLLM image carries neither etcd nor NATS (#31 defect 5): they run from their release binaries on
    shared storage, mounted into the container, and the mount look before etcd/NATS names a missing one on a node
    with its fix (it said only that etcd did not answer)."""
    from rackbench.core.results_folder import ResultsFolder
    from rackbench.server import login_checks
    from rackbench.server.assembly import Assembly
    prof = by_id(catalog, "kimi-k3-gb200-dep_offload")
    assembly = Assembly(prof, ResultsFolder.at(tmp_path / "results"), "RUN", dry=True)
    _, alloc, _ = assembly.render()
    files = login_checks.infra_files(prof, alloc.request.container_mounts)
    shared = "/mnt/lustre01/users-public/sa-shared/rackbench/bin"
    assert files == (f"{shared}/etcd", f"{shared}/nats-server")
    assert all(not p.startswith("/rackbench-bin") for p in files)
    found = login_checks.mount_findings(prof, {"node0": [f"{shared}/etcd"]}, files)
    assert [(f.kind, f.node) for f in found] == [("infra", "node0")], found
    assert "etcd does not exist on this node" in found[0].message and "release binary" in found[0].fix


def test_the_draft_model_every_gb200_container_mounts_is_what_stage_downloads(catalog):
    """#31 defect 2: gb200-nv mounts the DSpark drafter into every container, and nothing staged it (enroot refuses a
    container whose mount source is missing). `rackbench stage` downloads it where the cluster file names it, and
    preflight's fix for that missing folder is that command."""
    from rackbench.cli.components import drafts
    from rackbench.cluster.request import container_mounts
    from rackbench.server import login_checks
    prof = by_id(catalog, "kimi-k3-gb200-dep_offload")
    (dest,) = drafts([prof]).values()
    assert drafts([prof]) == {"Inferact/Kimi-K3-DSpark": dest} and dest in container_mounts(prof, True)
    assert drafts([by_id(catalog, "tiny-llama-cpu-vllm")]) == {}
    (found,) = login_checks.mount_findings(prof, {"node0": [dest]})
    assert found.fix.startswith("rackbench stage kimi-k3-gb200-dep_offload (it downloads the draft model there")


@pytest.mark.slurm
def test_stage_imports_each_missing_image_once_in_a_one_node_step(slurm, recipes, tmp_path, capfd):
    """#31 defect 3: the one import every step runs (slurm.images) was a command preflight named; `rackbench stage
    --images` runs it where it is missing, in a one-node srun step with the node's enroot, under a lock, into a file
    of its own renamed into place, and leaves an imported one alone. The local nodes run real enroot (#52), which
    reaches no registry from here: the import fails saying so (without enroot the step says that, naming the
    node), and nothing is left behind."""
    import shutil
    from rackbench.catalog.loader import Catalog
    from rackbench.cli.components import import_images
    images = tmp_path / "images"
    images.mkdir()
    cluster = recipes / "clusters/gb200-nv.yaml"
    edit(cluster, "  partition: batch\n  account: benchmark\n", "  partition: debug\n")
    edit(cluster, "/mnt/lustre01/users-public/sa-shared/rackbench/images/vllm-openai+kimi-k3.sqsh",
         str(images / "kimi.sqsh"))
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-dep")
    assert import_images([prof]) == 1
    said = capfd.readouterr()
    if shutil.which("enroot"):
        assert "image_import: enroot import of vllm/vllm-openai:kimi-k3 failed with exit code" in said.err, said.err
    else:
        assert "image_import: enroot is not on n" in said.err and "'s PATH: run it where pyxis runs the steps" in \
            said.err
    assert sorted(p.name for p in images.iterdir()) == ["kimi.sqsh.lock"]                 # no partial file
    (images / "kimi.sqsh").write_bytes(b"hsqs")
    assert import_images([prof]) == 0
    assert "rackbench stage: vllm/vllm-openai:kimi-k3: imported already" in capfd.readouterr().out


@pytest.mark.catalog("kimi-k3")
def test_an_hf_model_runs_its_setup_script_and_stages_its_tokenizer_by_repo_id(recipes, tmp_path):
    """#31 defect 6: an `hf:` model (the engine downloads it; no node has its directory) skipped the recipe's setup
    script (it waited for a directory named after the repo id) and nothing staged its tokenizer for the offline
    client. srtctl runs the script all the same; `rackbench stage` fetches the tokenizer into the shared cache by
    repo id, where AIPerf, given that id, finds it offline."""
    import json

    from rackbench.catalog.loader import Catalog
    from rackbench.load.generator import generator_for
    from tests.conftest import run_cli
    edit(recipes / "kimi-k3/gb200/base.yaml", "  path: kimi-k3 ", "  path: hf:moonshotai/Kimi-K3 ")
    out = run_cli("--recipes", recipes, "render", "kimi-k3-gb200-dep-c32").stdout
    assert "setup: bash /configs/kimik3-dspark-config-compat.sh" in out and "(only if moonshotai/Kimi-K3" not in out
    assert "--tokenizer moonshotai/Kimi-K3 " in out and "tokenizer_cache.py" not in out
    prof = by_id(Catalog.load(recipes), "kimi-k3-gb200-dep")
    argv, _ = generator_for("aiperf", str(tmp_path / "venv/bin/aiperf")).stage([prof], tmp_path / "cache", {}, {})
    assert json.loads(argv[2])["hub_tokenizers"] == ["moonshotai/Kimi-K3"]


def test_etcd_and_nats_keep_their_data_in_the_containers_own_tmp_not_on_shared_storage(catalog, tmp_path):
    """#52 item 7: gb200-nv's etcd and NATS wrote their data into the results folder, on Lustre (srtctl keeps it on
    the node's /tmp). In a container they now write to its own /tmp (enroot's per-container tmpfs, gone with the
    step); a profile whose steps run outside containers keeps a fresh folder of the allocation."""
    from rackbench.core.results_folder import ResultsFolder
    from rackbench.server.assembly import Assembly

    def data_dirs(profile_id: str) -> tuple[str, str]:
        assembly = Assembly(by_id(catalog, profile_id), ResultsFolder.at(tmp_path / "results"), "RUN", dry=True)
        _, _, sp = assembly.render()
        etcd, nats = sp.proc("etcd").argv, sp.proc("nats").argv
        return etcd[etcd.index("--data-dir") + 1], nats[nats.index("-sd") + 1]

    etcd, nats = data_dirs("kimi-k3-gb200-dep_offload")
    assert (etcd, nats) == ("/tmp/rackbench-infra/etcd", "/tmp/rackbench-infra/nats")
    assert not any(d.startswith(str(tmp_path)) for d in (etcd, nats))
    outside = data_dirs("tiny-llama-cpu-dynamo_slurm")
    assert all(d.startswith(str(tmp_path / "results")) for d in outside), outside


def test_what_the_login_node_sees_missing_is_said_before_sbatch(catalog, tmp_path, monkeypatch):
    """#52 item 5: the image file, the draft model, the etcd/NATS binaries and the Hub cache on gb200-nv's Lustre
    were looked for only after the queue wait for 4 GB200 nodes. The login node sees that storage
    (slurm.login_sees): `rackbench preflight` now says each missing one, with its fix, and queues no job."""
    from rackbench.cluster.slurm import SlurmBackend
    from rackbench.core.results_folder import ResultsFolder
    from rackbench.server import login_checks, preflight
    prof = by_id(catalog, "kimi-k3-gb200-dep_offload")
    lustre = "/mnt/lustre01/users-public/sa-shared/rackbench"
    monkeypatch.setattr(SlurmBackend, "unavailable", lambda self: None)
    monkeypatch.setattr(SlurmBackend, "allocate", lambda self, req, timeout=600.0: pytest.fail("sbatch was called"))
    report = preflight.allocate_and_check(prof, ResultsFolder.at(tmp_path / "results"), tmp_path)
    (build,) = [f for f in report.findings if f.check == "build from source"]      # #52 item 1: said before sbatch too
    assert build.message.startswith("Dynamo from source (git+https://github.com/ai-dynamo/dynamo.git@ba83080")
    assert build.fix.startswith("build it once before the job: rackbench stage kimi-k3-gb200-dep_offload --dynamo")
    said = {f.message.split(",")[0].split(" does not exist")[0]: f for f in report.findings if f is not build}
    assert set(said) == {f"{lustre}/images/vllm-openai+kimi-k3.sqsh", f"{lustre}/models/Kimi-K3-DSpark",
                         f"{lustre}/bin/etcd", f"{lustre}/bin/nats-server", f"{lustre}/hf_hub_cache",
                         f"{lustre}/cache"}, sorted(said)
    assert all(f.node == "login" and f.fix for f in report.findings)
    assert said[f"{lustre}/bin/etcd"].kind == "infra" and "release binary" in said[f"{lustre}/bin/etcd"].fix
    assert said[f"{lustre}/models/Kimi-K3-DSpark"].fix.startswith("rackbench stage kimi-k3-gb200-dep_offload")
    assert said[f"{lustre}/cache"].fix.startswith("rackbench stage kimi-k3-gb200-dep_offload (it makes the client's")
    assert said[f"{lustre}/hf_hub_cache"].fix.startswith(f"make the cache folder once: mkdir -p {lustre}/hf_hub_cache")
    assert "not allocated" in report.lines()[-1]
    # what the login node does not share with the nodes (the model on each node's NVMe) is left to the node look
    assert not any("/mnt/numa1" in f.message for f in report.findings)
    bare = dataclasses.replace(prof, cluster=prof.cluster.model_copy(
        update={"slurm": prof.cluster.slurm.model_copy(update={"login_sees": []})}))
    from rackbench.server.assembly import Assembly
    req = Assembly(bare, ResultsFolder.at(tmp_path / "results"), "RUN", dry=True).request()
    assert [f.check for f in login_checks.before_sbatch(bare, req)] == ["imported image"]
    (house,) = {p.preamble[1]["argv"][2] for p in Assembly(prof, ResultsFolder.at(tmp_path / "results"), "RUN",
                                                          dry=True).render()[2].processes if p.preamble}
    assert build.message.endswith(f"({house}): the job's first step would build it on a node, which needs GitHub, "
                                  "git and a Rust toolchain (cargo) in the image, while every node of the job waits")

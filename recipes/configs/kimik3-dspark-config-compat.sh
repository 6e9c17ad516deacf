#!/usr/bin/env bash
# Setup script (srt-slurm's setup_script): rackbench runs it first in each worker's and the frontend's own step, in
# that process's environment and container, so the view it builds in /tmp is there for the process (an unnamed pyxis
# container and its /tmp vanish with the step). It builds the Kimi-K3 DSpark draft-model view that
# speculative-config names (/tmp/Kimi-K3-DSpark).
# The DSpark checkpoint calls its parallel-drafting token `mask_token_id`; vLLM's parallel drafter reads
# `pard_token`. The view links every file of the staged checkpoint and writes its own config.json with
# pard_token = mask_token_id, leaving the staged copy untouched.
#   DSPARK_SRC   the staged checkpoint as this process sees it (the cluster file sets it: inside a container that is
#                the mount's destination, never a path derived from the model's, which is /model there)
#   DSPARK_VIEW  where the view goes (default: /tmp/Kimi-K3-DSpark)
set -euo pipefail
model=${RACKBENCH_MODEL:?rackbench sets RACKBENCH_MODEL to the model directory}
src=${DSPARK_SRC:?"set DSPARK_SRC to the staged Kimi-K3-DSpark checkpoint as the process sees it (runtime.environment of the cluster file; with containers, a runtime.container_mounts destination)"}
view=${DSPARK_VIEW:-/tmp/Kimi-K3-DSpark}
if [ ! -f "$src/config.json" ]; then
  echo "kimik3-dspark-config-compat: no DSpark checkpoint at $src (model $model; stage it on the node and point DSPARK_SRC at it as this process sees it)" >&2
  exit 2
fi
# Steps that share /tmp (no container, or one named container) run this at once: one builds the view at a time,
# in a folder of its own, and the view is replaced whole
exec 9> "$view.lock"
flock 9
tmp=$(mktemp -d "$view.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ln -s "$src"/* "$tmp/"          # every file of the checkpoint, one process (a checkpoint has hundreds of shards)
rm "$tmp/config.json"
pard=$(python3 - "$src/config.json" "$tmp/config.json" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
if "mask_token_id" not in cfg:
    sys.exit(f"{sys.argv[1]}: no mask_token_id to map to pard_token")
cfg.setdefault("pard_token", cfg["mask_token_id"])
json.dump(cfg, open(sys.argv[2], "w"), indent=1)
print(cfg["pard_token"])
PY
)
chmod 755 "$tmp"
rm -rf "$view"
mv "$tmp" "$view"
echo "kimik3-dspark-config-compat: $view -> $src (pard_token $pard)"

"""Interpreter-startup hook for the embedded default's serving venv (installed by scripts/install-servers).

PyPI's torchvision is a CUDA build: beside the CPU torch its compiled ops fail to load, and importing it dies
in ``torchvision/_meta_registrations.py`` with ``operator torchvision::nms does not exist``. Dynamo's vLLM worker
imports torchvision (through transformers' Qwen2-VL image processor), so the worker would not start. When, and
only when, torchvision is imported and its ``_C`` extension cannot load, this registers the two operator schemas
that module needs (no kernels: text serving never calls them).
"""

import importlib.abc
import importlib.util
import sys


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torchvision")
        if spec is not None and spec.submodule_search_locations:
            _register_schemas_if_ops_missing(list(spec.submodule_search_locations)[0])
        return spec


def _register_schemas_if_ops_missing(package_dir: str) -> None:
    import glob

    import torch

    libs = glob.glob(f"{package_dir}/_C*.so")
    try:
        if not libs:
            raise OSError("no compiled ops")
        torch.ops.load_library(libs[0])
        return
    except (OSError, RuntimeError):
        pass
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor")
    _KEEP.append(lib)


_KEEP: list = []
sys.meta_path.insert(0, _Finder())

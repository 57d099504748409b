"""Config resolution in dependency order, and the run mapping (`{{run.*}}`).

The existing engine resolves config in up to four passes and leaves what is left as literal
text. We resolve each key after the keys it references, and report a reference cycle by
name. Config values may use `config.*` and `run.*` tokens only (`state.*`, `loop.*` and `params.*` belong to a state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import Any

from npa_workflow.errors import Problem
from npa_workflow.spec.graph import find_cycle
from npa_workflow.spec.hints import did_you_mean
from npa_workflow.spec.paths import join
from npa_workflow.spec.tokens import (
    TokenContext,
    TokenError,
    find_suspicious,
    references,
    render_scalar,
    resolve_text,
)

VALIDATE_RUN_ID = "validate-run"
# `{{run.bucket}}`: the bucket of the deployment that runs the spec (the stack's bucket in the cloud, the
# embedded engine bucket `npa-workflow-local` locally). Where no deployment is known yet (validate, plan,
# compile) it is the local one, so a spec writing under `{{run.bucket}}` never names a bucket it does not own.
DEFAULT_RUN_BUCKET = "npa-workflow-local"


@dataclass(frozen=True)
class RunContext:
    config: dict[str, Any]
    run: dict[str, Any]


def default_prefix(workflow: str, run_id: str) -> str:
    return f"{workflow}/{run_id}"


def base_run_mapping(workflow: str, run_id: str, run_block: Mapping[str, Any],
                     bucket: str | None = None) -> dict[str, Any]:
    run = {"id": run_id, "prefix": default_prefix(workflow, run_id), "bucket": DEFAULT_RUN_BUCKET}
    run.update(run_block)
    run["id"] = run_id
    if bucket:  # the deployment's bucket wins, as the run id does
        run["bucket"] = bucket
    return run


def _references(config: Mapping[str, Any], problems: list[Problem]) -> tuple[dict[str, list[str]], set[str]]:
    """Config keys each value references, and the keys whose tokens are wrong (reported)."""
    deps: dict[str, list[str]] = {}
    bad: set[str] = set()
    for key, value in config.items():
        deps[key] = []
        if not isinstance(value, str):
            continue
        path = join("config", key)
        for text, hint in find_suspicious(value):
            problems.append(Problem(path, f"unrecognised token {text}", hint))
            bad.add(key)
        for scope, ref in references(value):
            if scope in ("state", "loop", "params"):
                problems.append(Problem(path, f"{scope}.* tokens are not allowed in config ({scope}.{ref})",
                                        "move the value into the state's params or command"))
                bad.add(key)
            elif scope == "config" and ref not in config:
                problems.append(Problem(path, f"unknown config token: config.{ref}",
                                        did_you_mean(ref, config, prefix="config.") or f"add '{ref}' to config"))
                bad.add(key)
            elif scope == "config":
                deps[key].append(ref)
    return deps, bad


def resolve_config(
    config: Mapping[str, Any], workflow: str, run_id: str, run_block: Mapping[str, Any], bucket: str | None = None
) -> tuple[RunContext, list[Problem]]:
    """Resolve config against itself and the run mapping. Returns the context and problems.

    `{{run.prefix}}` inside config is the default `<workflow>/<run id>` (or `run.prefix` of the
    top-level `run:` block); a set `config.prefix` replaces it only afterwards."""
    problems: list[Problem] = []
    run = base_run_mapping(workflow, run_id, run_block, bucket)
    deps, bad = _references(config, problems)
    graph = {key: list(refs) for key, refs in deps.items()}
    while cycle := find_cycle(graph):
        problems.append(Problem(join("config", cycle[0]),
                                "config values reference each other in a cycle: " + " -> ".join(cycle),
                                "make one of them a literal value"))
        bad.update(cycle)
        for key in cycle:
            graph[key] = []
    resolved: dict[str, Any] = dict(config)
    for key in TopologicalSorter(graph).static_order():  # a key's references come before it
        if not isinstance(config[key], str):
            continue
        if key in bad or any(ref in bad for ref in deps[key]):
            bad.add(key)  # the root cause is reported where it is
            continue
        try:
            resolved[key] = resolve_text(config[key], TokenContext(config=resolved, run=run))
        except TokenError as exc:
            problems.append(Problem(join("config", key), exc.message, exc.hint))
            bad.add(key)
    prefix = resolved.get("prefix")
    if prefix and "prefix" not in bad:
        try:
            run["prefix"] = render_scalar(prefix, "config.prefix")
        except TokenError as exc:
            problems.append(Problem("config.prefix", exc.message, exc.hint))
    position = {join("config", key): i for i, key in enumerate(config)}
    problems.sort(key=lambda p: position.get(p.path, len(position)))  # in the order the keys are written
    return RunContext(config=resolved, run=run), problems

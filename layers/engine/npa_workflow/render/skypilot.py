"""SkyPilot task documents (docs/operating.md, `render`): one step, a pipeline, a JobGroup, a wave.

Pure functions: no I/O and no `import sky`. Secrets are rendered as NAMES with a placeholder
value. What launch submits is a `JobDocument`, data until it is written: its executor writes it as YAML once,
with the secrets' values, right before it sends it (`JobDocument.text`); `with_secret_values` fills the text of
the other shapes (a pipeline, a JobGroup) the same way.
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from npa_workflow.plan.model import PlanStep, Wave
from npa_workflow.protocol.environment import JOB_CODE_URI, JOB_IMAGE, attempt_id, job_identity
from npa_workflow.render.code import CODE_DIR
from npa_workflow.render.names import (
    RenderError,
    is_env_name,
    is_safe_name,
    job_name,
    launch_job_name,
    safe_name,
    wave_identity,
    wave_key,
)
from npa_workflow.render.task import step_image

__all__ = [
    "K8S_DISK_KEY",
    "attempt_id",
    "SECRET_PLACEHOLDER",
    "RenderError",
    "JobDocument",
    "job_name",
    "launch_document",
    "launch_job",
    "render_batch",
    "render_pipeline",
    "render_wave",
    "skypilot_task",
    "wave_key",
    "with_secret_values",
]

SECRET_PLACEHOLDER = "<resolved at launch>"
# The existing engine renames `disk_size` to `ephemeral_storage` on Kubernetes, but SkyPilot
# 0.14.1 discards `ephemeral_storage` and reads `disk_size` as the pod's ephemeral-storage
# request, so we keep `disk_size` and the request is honoured.
K8S_DISK_KEY = "disk_size"
_K8S_CLOUDS = {"kubernetes", "k8s"}
_COPIED_RESOURCE_KEYS = ("cloud", "accelerators", "cpus", "memory", "disk_size", "use_spot", "region")
# --- one task ---------------------------------------------------------------------------------


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (dict, list, tuple)):
        return not value
    return False


def _at_least(value: Any) -> str:
    text = str(value).strip()
    return text if text.endswith("+") else f"{text}+"


def _k8s_memory(value: Any) -> str:
    text = str(value).strip().removesuffix("+").strip()
    for unit in ("Gi", "G"):
        if text.endswith(unit):
            text = text[: -len(unit)].strip()
            break
    return f"{text}+"


def is_kubernetes(profile: Mapping[str, Any]) -> bool:
    cloud = profile.get("cloud")
    return isinstance(cloud, str) and cloud.strip().lower() in _K8S_CLOUDS


def skypilot_resources(profile: Mapping[str, Any], image: str) -> dict[str, Any]:
    """The normalized `resources` block of a task (copied keys only; k8s-specific rewrites)."""
    k8s = is_kubernetes(profile)
    out: dict[str, Any] = {}
    for key in _COPIED_RESOURCE_KEYS:
        value = profile.get(key)
        if _is_empty(value):
            continue
        if key == "cloud":
            # SkyPilot's schema knows only `kubernetes`, not the `k8s` alias.
            out["cloud"] = "kubernetes" if k8s else value
        elif key == "cpus" and k8s:
            out["cpus"] = _at_least(value)
        elif key == "memory" and k8s:
            out["memory"] = _k8s_memory(value)
        elif key == "disk_size":
            if k8s:
                out[K8S_DISK_KEY] = value
        else:
            out[key] = copy.deepcopy(value)
    if image:
        out["image_id"] = f"docker:{image}"
    return out


def _kubernetes_config(profile: Mapping[str, Any]) -> dict[str, Any]:
    k8s = profile.get("kubernetes")
    if not isinstance(k8s, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key in ("pod_config", "provision_timeout"):
        if not _is_empty(k8s.get(key)):
            out[key] = copy.deepcopy(k8s[key])
    return out


def _check_env_names(names: Iterable[str], what: str, state: str) -> None:
    for name in names:
        if not is_env_name(name):
            raise RenderError(f"state '{state}': {what} name {name!r} is not a valid environment variable name")


def skypilot_task(
    step: PlanStep,
    *,
    workflow: str,
    run_id: str,
    fence_sequence: int,
    attempt: int,
    secret_names: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    identity: str = "",
    code_uri: str = "",
) -> dict[str, Any]:
    """One SkyPilot task document for `step`. `identity` (the wave's launch key, default the
    task name) makes NPA_WORKFLOW_ATTEMPT_ID unique per wave and attempt, loop rounds included.
    `code_uri` (the run's staged step code, `render.code`) is mounted at CODE_DIR, where `run` starts.

    Env precedence: the step's (tool) env < the engine's identity variables < `extra_env`
    (the caller's word is final). Secrets carry only names; values are `SECRET_PLACEHOLDER`.
    """
    name = step.task_name
    command = step.command
    if not command:
        raise RenderError(f"state '{name}' has no command to render")
    image = step_image(step)
    profile = step.resources_profile or {}

    doc: dict[str, Any] = {"name": name}
    resources = skypilot_resources(profile, image)
    if resources:
        doc["resources"] = resources
    if step.num_nodes > 1:
        doc["num_nodes"] = step.num_nodes

    extra = dict(extra_env or {})
    _check_env_names(step.env, "tool env", name)
    _check_env_names(extra, "env", name)
    envs = job_identity(workflow=workflow, run_id=run_id, task_name=name, identity=identity or name,
                        wave_key=wave_identity(step.state, step.loops), fence_sequence=fence_sequence, attempt=attempt)
    if image:
        envs[JOB_IMAGE] = image
    if code_uri:
        envs[JOB_CODE_URI] = code_uri
    merged = {k: str(v) for k, v in step.env.items() if k not in envs}
    merged.update(envs)
    merged.update({k: str(v) for k, v in extra.items()})
    # Identity variables first, in a fixed order, so documents read the same every time.
    doc["envs"] = {**{k: merged[k] for k in envs}, **{k: v for k, v in merged.items() if k not in envs}}

    secrets = list(dict.fromkeys(secret_names))
    if secrets:
        _check_env_names(secrets, "secret", name)
        clash = sorted(set(secrets) & set(doc["envs"]))
        if clash:
            raise RenderError(f"state '{name}': {', '.join(clash)} set both as env and as secret")
        doc["secrets"] = {s: SECRET_PLACEHOLDER for s in secrets}

    if code_uri:
        # SkyPilot copies the S3 prefix onto every node before setup; setup and run start in it.
        doc["file_mounts"] = {CODE_DIR: code_uri}
    cd = f"cd {CODE_DIR}\n" if code_uri else ""
    if step.setup.strip():
        doc["setup"] = f"{cd}{step.setup}" if cd else step.setup
    doc["run"] = f"set -euo pipefail\n{cd}{shlex.join(command)}\n"

    k8s_config = _kubernetes_config(profile)
    if k8s_config:
        doc["config"] = {"kubernetes": k8s_config}
    return doc


# --- secrets ----------------------------------------------------------------------------------


def _filled(secrets: Mapping[str, Any], values: Mapping[str, str], task: str) -> dict[str, Any]:
    filled: dict[str, Any] = {}
    for name, current in secrets.items():
        if name in values:
            filled[name] = str(values[name])
        elif current == SECRET_PLACEHOLDER:
            raise RenderError(f"task '{task}': no value for secret '{name}'")
        else:
            filled[name] = current
    return filled


def _fill_secrets(doc: Any, values: Mapping[str, str]) -> Any:
    if not isinstance(doc, Mapping):
        return doc
    out = copy.deepcopy(dict(doc))
    secrets = out.get("secrets")
    if not isinstance(secrets, Mapping):
        return out
    out["secrets"] = _filled(secrets, values, out.get("name", ""))
    return out


def with_secret_values(doc: str | Mapping[str, Any], values: Mapping[str, str]) -> str | dict[str, Any]:
    """Replace secret placeholders with real values, right before submitting.

    `doc` is one task dict, or a (multi-document) YAML string as returned by the render
    functions; the result has the same form. Every placeholder must get a value (RenderError
    names the secret, never a value); values for names a task does not declare are ignored.
    """
    if isinstance(doc, str):
        docs = [_fill_secrets(d, values) for d in yaml.safe_load_all(doc)]
        return _dump_all(docs)
    return _fill_secrets(doc, values)


# --- documents --------------------------------------------------------------------------------


# libyaml's emitter (PyYAML's C binding, in its wheels) where the install has it: the same text as PyYAML's Python
# emitter, which is a port of it, for a quarter of the CPU — and every launch renders its job's document.
# `tests/unit/test_render_skypilot.py` renders every example with both and compares.
_SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SAFE_DUMPER):  # type: ignore[misc,valid-type]
    """Multi-line strings (run and setup scripts) as `|` blocks, so a person can read them."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str_representer)


def _dump_all(docs: list[Any]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _tasks(
    steps: Sequence[PlanStep],
    *,
    workflow: str,
    run_id: str,
    fence_sequence: int,
    attempt: int,
    secret_names: Sequence[str],
    extra_env: Mapping[str, str] | None,
) -> list[dict[str, Any]]:
    return [
        skypilot_task(
            s,
            workflow=workflow,
            run_id=run_id,
            fence_sequence=fence_sequence,
            attempt=attempt,
            secret_names=secret_names,
            extra_env=extra_env,
        )
        for s in steps
    ]


def render_pipeline(
    steps: Sequence[PlanStep],
    *,
    name: str,
    workflow: str,
    run_id: str,
    fence_sequence: int,
    attempt: int,
    secret_names: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> str:
    """Header `{name, execution: serial}` then one task per step, in order (names may repeat)."""
    if not steps:
        raise RenderError(f"pipeline '{name}' has no steps to render")
    if not name.strip():
        raise RenderError("a pipeline needs a non-empty name")
    tasks = _tasks(
        steps, workflow=workflow, run_id=run_id, fence_sequence=fence_sequence, attempt=attempt,
        secret_names=secret_names, extra_env=extra_env,
    )
    return _dump_all([{"name": name, "execution": "serial"}, *tasks])


def render_batch(
    steps: Sequence[PlanStep],
    *,
    name: str,
    workflow: str,
    run_id: str,
    fence_sequence: int,
    attempt: int,
    secret_names: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> str:
    """One batch of a parallel group: a JobGroup for ≥2 steps, a serial single-task document for 1.

    JobGroup task names are the step task names with characters outside `[A-Za-z0-9_-]`
    replaced by `-` (the `NPA_WORKFLOW_STATE` env keeps the real name); they must be unique.
    """
    if len(steps) < 2:
        return render_pipeline(
            steps, name=name, workflow=workflow, run_id=run_id, fence_sequence=fence_sequence,
            attempt=attempt, secret_names=secret_names, extra_env=extra_env,
        )
    if not is_safe_name(name):
        raise RenderError(f"job group name {name!r} must match [A-Za-z0-9_-]+")
    tasks = _tasks(
        steps, workflow=workflow, run_id=run_id, fence_sequence=fence_sequence, attempt=attempt,
        secret_names=secret_names, extra_env=extra_env,
    )
    seen: dict[str, str] = {}
    for task in tasks:
        original = task["name"]
        task["name"] = safe_name(original)
        if task["name"] in seen:
            first = seen[task["name"]]
            detail = f"'{original}'" if first == original else f"'{first}' and '{original}'"
            raise RenderError(f"job group '{name}': duplicate task name '{task['name']}' (from {detail})")
        seen[task["name"]] = original
    return _dump_all([{"name": name, "execution": "parallel"}, *tasks])


@dataclass(frozen=True)
class JobDocument:
    """The job launch submits for one wave, as data: rendered once (`launch_job`), handed to the executor as it
    is, and written as YAML once, where it leaves the process (`text`). Its header document names the job `name`,
    so the managed job is named exactly that (the SkyPilot client has nothing to check or prepend)."""

    name: str
    task: Mapping[str, Any]  # the one task (`skypilot_task`): secrets by name, valued SECRET_PLACEHOLDER

    @property
    def envs(self) -> dict[str, str]:
        """What the step sees on any executor: a local job is started with exactly these variables."""
        return dict(self.task["envs"])

    @property
    def secret_names(self) -> tuple[str, ...]:
        return tuple(self.task.get("secrets", ()))

    def text(self, secret_values: Mapping[str, str] | None = None) -> str:
        """The single-task serial YAML of the job. `secret_values`: every secret's value, put in right before the
        text is sent (RenderError names a secret without one, never a value); None: the placeholders (what
        `npa-workflow render` shows)."""
        task = self.task
        secrets = task.get("secrets")
        if secret_values is not None and secrets:
            # A new mapping for the values alone: the rendered document keeps its placeholders.
            task = {**task, "secrets": _filled(secrets, secret_values, task["name"])}
        return _dump_all([{"name": self.name, "execution": "serial"}, task])


def launch_job(
    step: PlanStep,
    *,
    workflow: str,
    run_id: str,
    loops: Mapping[str, int],
    attempt: int,
    fence_sequence: int,
    secret_names: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    name: str = "",
    code_uri: str = "",
) -> JobDocument:
    """What launch submits for one wave: every step is its own job (a group's members go through the state
    machine's Map, a sliding window, not batches).

    `fence_sequence` grows with each wave of the same state in the run (loop rounds, retries), so a stale
    job of an earlier round can be told from the current one; the attempt id is unique per wave and attempt.
    `name`: the job name the ledger recorded for this attempt (default: `launch_job_name`)."""
    name = name or launch_job_name(run_id, step.state, loops, attempt)
    task = skypilot_task(
        step, workflow=workflow, run_id=run_id, fence_sequence=fence_sequence, attempt=attempt,
        secret_names=secret_names, extra_env=extra_env, identity=wave_identity(step.state, loops), code_uri=code_uri,
    )
    return JobDocument(name, task)


def launch_document(step: PlanStep, **kwargs: Any) -> tuple[str, str]:
    """(job name, YAML) of `launch_job`, as `npa-workflow render` shows it."""
    job = launch_job(step, **kwargs)
    return job.name, job.text()


def render_wave(
    wave: Wave,
    *,
    run_id: str,
    workflow: str,
    counter_start: int,
    attempt: int = 1,
    secret_names: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """(job name, YAML) per submission of `wave`.

    A serial wave is one pipeline (counter `counter_start`); a parallel wave is one document
    per batch, batch i using counter `counter_start + i`. The counter doubles as the fence
    sequence of the documents it names.
    """
    if wave.kind == "parallel":
        batches = [b for b in (wave.batches or [wave.steps]) if b]
        if not batches:
            raise RenderError(f"wave '{wave.name}' has no steps to render")
        label = wave.group or wave.name
        out: list[tuple[str, str]] = []
        for i, batch in enumerate(batches):
            counter = counter_start + i
            jname = job_name(run_id, counter, label, None, attempt)
            out.append((jname, render_batch(
                batch, name=jname, workflow=workflow, run_id=run_id, fence_sequence=counter,
                attempt=attempt, secret_names=secret_names, extra_env=extra_env,
            )))
        return out
    steps = wave.steps or [s for b in wave.batches for s in b]
    if not steps:
        raise RenderError(f"wave '{wave.name}' has no steps to render")
    iteration = steps[0].iteration if len(steps) == 1 else None
    label = wave.name or steps[0].state
    jname = job_name(run_id, counter_start, label, iteration, attempt)
    return [(jname, render_pipeline(
        steps, name=jname, workflow=workflow, run_id=run_id, fence_sequence=counter_start,
        attempt=attempt, secret_names=secret_names, extra_env=extra_env,
    ))]

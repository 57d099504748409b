"""The JSON Schema of a spec document, generated from the model, for editors.

Generated from the pydantic models, then made to say what the validator says: every mapping the language
closes (the document, metadata, a state, run, loop, trigger, a transition, an artifact) has
`additionalProperties: false`, so an editor underlines `toolRf:` as `npa-workflow validate` rejects it;
both spellings of a field (`toolRef` / `tool_ref`) are listed; every field carries a description (the
reference is docs/language.md). `config`, the top-level `run` mapping and resource profiles stay open.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel

from npa_workflow.spec.model import Artifact, Loop, Metadata, RunBlock, Spec, State, Transition, Trigger

CLOSED: dict[str, type[BaseModel]] = {
    "Artifact": Artifact, "Loop": Loop, "Metadata": Metadata, "RunBlock": RunBlock, "State": State,
    "Transition": Transition, "Trigger": Trigger,
}

DESCRIPTIONS: dict[str, dict[str, str]] = {
    "Spec": {
        "apiVersion": "Language version: npa.workflow/v0.0.1 (or its -beta).",
        "kind": "Always Workflow.",
        "metadata": "Name (required when metadata is given), description, namespace, labels, executionMode.",
        "config": "Free-form values read by tokens as {{config.KEY}}; values may reference other keys.",
        "run": "Extra values read as {{run.KEY}} (run.id is always the run's id).",
        "resources": "Named resource profiles (cloud, cpus, memory, accelerators, image, disk_size, num_nodes, "
                     "kubernetes); a state picks one by name.",
        "initial": "The state the run starts at; default: the first state.",
        "states": "State name to state. At least one state is terminal.",
        "workdir": "The steps' code folder, relative to the spec file: what submit ships, where commands start; "
                   "default: the catalog's workdir, else the spec's folder.",
    },
    "Metadata": {
        "name": "The workflow's name: it names the state machine and the default run ids.",
        "description": "Free text.",
        "namespace": "Free text (kept for the existing engine's specs).",
        "labels": "Free-form labels.",
        "executionMode": "runtime: the run must follow the decisions its steps write (no --assume-decision).",
    },
    "State": {
        "description": "Free text.",
        "needs": "Ordering hint only (checked to name states, acyclic); the walk never waits on it.",
        "run": "An ad-hoc command: shell (bash -c) or argv (no shell; wins over shell).",
        "toolRef": "A tool of the catalog; its argv template is the command (wins over run).",
        "sequence": "Child states walked in order (their transitions are not followed); with loop: the loop body.",
        "parallel": "Member states run as a fan-out group, then next (a barrier).",
        "parallelCount": "Must equal the number of members (an integer or a config key).",
        "maxConcurrency": "At most this many members at once (an integer or a config key; 1..64).",
        "params": "Per-state config overlay read as {{config.KEY}}; may read config and the state's other params.",
        "trigger": "Wait for objects under an S3 prefix before the state's command runs.",
        "loop": "Repeat the state (a leaf) or its sequence up to max times, until a predicate holds.",
        "transitions": "Branches taken on the decision read after the state: the first match wins.",
        "next": "The state after this one.",
        "inputs": "Artifacts the step reads: {uri, schema}.",
        "outputs": "Artifacts the step writes: {uri, schema}; a successful step must have written each.",
        "resources": "The name of a resource profile (default: default).",
        "multiNodeMode": "forbidden (default) or sharded: every node of a num_nodes > 1 profile runs its shard.",
        "terminal": "The run ends after this state.",
        "writesDecision": "The step writes a decision artifact that loops and transitions read.",
        "timeoutSeconds": "This state's deadline per wave, over the run's --max-wait-seconds (a group: each member).",
        "retries": "This state's retries of a failed job, over the run's --retries (a group: each member).",
    },
    "RunBlock": {
        "shell": "One bash script (bash -c).",
        "argv": "A command and its arguments, run without a shell.",
    },
    "Loop": {
        "max": "The iteration budget: an integer, config.KEY or {{config.KEY}}.",
        "until": "Stop early when the decision matches: promote_checkpoint or loop_back.",
    },
    "Trigger": {
        "uri": "The s3:// prefix to watch.",
        "pollSeconds": "Seconds between counts when no event arrives (default 30).",
        "maxPolls": "Counts before the wait fails (0 = bounded by the run's deadline only).",
        "minObjects": "Objects needed under the prefix (default 1).",
    },
    "Transition": {
        "goto": "The state to go to.",
        "when": "Take it when the decision is promote_checkpoint or loop_back; absent: always.",
        "if": "config.KEY: take it only when that config value is a YAML true.",
    },
    "Artifact": {
        "uri": "Where the artifact is (tokens allowed).",
        "schema": "A free label; one containing 'decision' marks the decision artifact.",
    },
}


def _aliases(model: type[BaseModel]) -> dict[str, list[str]]:
    """Schema property name → every spelling the validator accepts."""
    out: dict[str, list[str]] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        names = [a for a in alias.choices if isinstance(a, str)] if isinstance(alias, AliasChoices) else \
            [str(info.alias or alias or name)]
        out[info.serialization_alias or names[0]] = names
    return out


def _close(schema: dict[str, Any], model: type[BaseModel], descriptions: dict[str, str]) -> None:
    schema["additionalProperties"] = False
    props = schema.get("properties", {})
    for shown, names in _aliases(model).items():
        key = next((n for n in names if n in props), shown)
        if key not in props:
            continue
        props[key].pop("title", None)
        if descriptions.get(key) or descriptions.get(shown):
            props[key]["description"] = descriptions.get(key) or descriptions[shown]
        for other in names:
            props.setdefault(other, props[key])


def spec_json_schema() -> dict[str, Any]:
    schema = Spec.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "npa.workflow/v0.0.1 spec"
    schema["description"] = "A workflow spec (docs/language.md); `npa-workflow validate` checks every rule."
    for name, model in CLOSED.items():
        if name in schema.get("$defs", {}):
            _close(schema["$defs"][name], model, DESCRIPTIONS.get(name, {}))
    _close(schema, Spec, DESCRIPTIONS["Spec"])
    return schema

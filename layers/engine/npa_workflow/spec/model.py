"""The typed spec model (pydantic v2). Field aliases accept the camelCase and snake_case forms.

The model captures *shape*; rules that span fields or states live in `validate.py`. Unknown
keys of nested mappings (run, loop, trigger, ...) are kept in `model_extra` so validation can
warn about them ("did you mean ...").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema, field_validator

# Integer fields that may also name a config key (`loop.max`, `parallelCount`, trigger ints) keep
# the raw YAML value; `ints.resolve_int` reads it, so a bool or float is reported, not coerced.
IntRef = Annotated[Any, WithJsonSchema({"type": ["integer", "string", "null"]})]

API_VERSIONS = ("npa.workflow/v0.0.1", "npa.workflow/v0.0.1-beta")
PREDICATES = ("promote_checkpoint", "loop_back")


def _alias(camel: str, snake: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(camel, snake), serialization_alias=camel)


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)


class RunBlock(_Model):
    shell: str = ""
    argv: list[str] = Field(default_factory=list)

    @field_validator("argv", mode="before")
    @classmethod
    def _argv_items_to_str(cls, value: Any) -> Any:
        # The contract coerces argv items to text; JSON-scalar rendering keeps `true` lower case.
        if isinstance(value, list):
            out = []
            for item in value:
                if isinstance(item, bool):
                    out.append("true" if item else "false")
                elif isinstance(item, int | float | str):
                    out.append(str(item))
                else:
                    out.append(item)
            return out
        return value


class Artifact(_Model):
    uri: str
    schema_: str = Field(default="", validation_alias=AliasChoices("schema"), serialization_alias="schema")

    @property
    def is_decision(self) -> bool:
        return "decision" in self.schema_.lower()


class Trigger(_Model):
    uri: str = ""
    poll_seconds: IntRef = _alias("pollSeconds", "poll_seconds")
    max_polls: IntRef = _alias("maxPolls", "max_polls")
    min_objects: IntRef = _alias("minObjects", "min_objects")


class Loop(_Model):
    max: IntRef = None
    until: str | None = None


class Transition(_Model):
    goto: str = ""
    when: str | None = None
    if_: str | None = Field(default=None, validation_alias=AliasChoices("if"), serialization_alias="if")


class State(_Model):
    description: str = ""
    needs: list[str] = Field(default_factory=list)
    run: RunBlock | None = None
    tool_ref: str = Field(default="", validation_alias=AliasChoices("toolRef", "tool_ref"))
    sequence: list[str] = Field(default_factory=list)
    parallel: list[str] = Field(default_factory=list)
    parallel_count: IntRef = _alias("parallelCount", "parallel_count")
    max_concurrency: IntRef = _alias("maxConcurrency", "max_concurrency")
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    trigger: Trigger | None = None
    loop: Loop | None = None
    transitions: list[Transition] = Field(default_factory=list)
    next: str = ""
    inputs: list[Artifact] = Field(default_factory=list)
    outputs: list[Artifact] = Field(default_factory=list)
    resources: str = "default"
    multi_node_mode: str = Field(
        default="forbidden", validation_alias=AliasChoices("multiNodeMode", "multi_node_mode")
    )
    terminal: StrictBool = False
    writes_decision: StrictBool = Field(
        default=False, validation_alias=AliasChoices("writesDecision", "writes_decision")
    )
    # Additive in v0.0.1 (as `parallel`/`trigger` were): this state's own per-wave deadline and workload retry
    # budget, over the run's (`--max-wait-seconds`, `--retries`). On a group they apply to every member.
    timeout_seconds: IntRef = _alias("timeoutSeconds", "timeout_seconds")
    retries: IntRef = None

    @property
    def is_group(self) -> bool:
        return bool(self.parallel)

    @property
    def is_sequence(self) -> bool:
        return bool(self.sequence) and not self.parallel

    @property
    def is_leaf_loop(self) -> bool:
        return self.loop is not None and not self.sequence and not self.parallel

    @property
    def has_command(self) -> bool:
        return bool(self.tool_ref) or (
            self.run is not None and (bool(self.run.argv) or bool(self.run.shell.strip()))
        )

    @property
    def decision_output(self) -> Artifact | None:
        return next((o for o in self.outputs if o.is_decision), None)


class Metadata(_Model):
    name: str
    description: str = ""
    namespace: str = ""
    labels: dict[str, Any] = Field(default_factory=dict)
    execution_mode: Literal["runtime"] | None = Field(
        default=None, validation_alias=AliasChoices("executionMode", "execution_mode")
    )


class Spec(BaseModel):
    """A validated spec. Build it with `validate.validate_document`, not directly."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    api_version: Literal["npa.workflow/v0.0.1", "npa.workflow/v0.0.1-beta"] = Field(alias="apiVersion")
    kind: Literal["Workflow"] = "Workflow"
    metadata: Metadata | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    run: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, dict[str, Any]] = Field(default_factory=dict)
    initial: str
    states: dict[str, State]
    # The folder of the steps' code, relative to the spec file: what `submit` ships and where every step's
    # command starts (locally too). Empty: the tool catalog's `workdir`, else the spec's folder.
    workdir: str = ""

    @property
    def name(self) -> str:
        return self.metadata.name if self.metadata else "unnamed"

    @property
    def runtime_only(self) -> bool:
        return bool(self.metadata and self.metadata.execution_mode == "runtime")

    @property
    def has_transitions(self) -> bool:
        return any(s.transitions for s in self.states.values())


def known_keys(model: type[BaseModel]) -> list[str]:
    """The keys a mapping of this model understands (every alias), for "did you mean" hints."""
    keys: list[str] = []
    for name, info in model.model_fields.items():
        alias = info.validation_alias or info.alias or name
        keys += [a for a in alias.choices if isinstance(a, str)] if isinstance(alias, AliasChoices) else [str(alias)]
    return keys

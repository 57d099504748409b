"""Validation of a spec document: every rule of the language (docs/language.md), all problems at once.

`validate_document(raw, file=..., catalog=..., overrides=...)` returns a `LoadedSpec` or
raises `SpecError` with every error; warnings (unknown keys, a run that can end on a
non-terminal state) ride along and become errors under `strict=True`. `raw` is what
`loader.load_yaml_*` returns (mapping keys are strings).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from npa_workflow.errors import Problem, SpecError
from npa_workflow.spec.buckets import check_bucket_names
from npa_workflow.spec.catalog import EMPTY_CATALOG, Catalog
from npa_workflow.spec.config import VALIDATE_RUN_ID, RunContext, resolve_config
from npa_workflow.spec.effective import resolve_params
from npa_workflow.spec.followed import ignored_keys, unreachable_states
from npa_workflow.spec.graph import find_cycle
from npa_workflow.spec.hints import did_you_mean
from npa_workflow.spec.ints import IntFieldError, resolve_bounded, yaml_bool
from npa_workflow.spec.job_names import job_name_collisions
from npa_workflow.spec.model import API_VERSIONS, PREDICATES, Metadata, Spec, State, known_keys
from npa_workflow.spec.paths import join, pydantic_problems, yaml_type
from npa_workflow.spec.tokens import (
    TOKEN_RE,
    TokenContext,
    TokenError,
    find_suspicious,
    output_index,
    resolve_deep,
    resolve_shell,
    resolve_text,
)

MAX_CONCURRENCY_LIMIT = 64
# The largest group a run is known to finish (2,000 members: locally in ~5 min). At 10,000 every member's launch
# re-read a 400 KB frozen spec while 64 others did, past the 10 s parse bound: the group failed, launching nothing.
MAX_GROUP_MEMBERS = 2_000
MAX_NUM_NODES = 32
TOP_LEVEL_KEYS = known_keys(Spec)
METADATA_KEYS = known_keys(Metadata)
STATE_KEYS = known_keys(State)


@dataclass(frozen=True)
class LoadedSpec:
    """A valid spec with what it was validated against."""

    spec: Spec
    catalog: Catalog
    file: str = ""
    warnings: list[Problem] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


def _did_you_mean(key: str, known: Collection[str]) -> str:
    return did_you_mean(key, known)


def _name_hint(name: Any, names: Collection[str]) -> str:
    return _did_you_mean(str(name), names) or "name one of: " + ", ".join(list(names)[:8])


class _Collector:
    def __init__(self, file: str, allow_unknown_keys: bool = False) -> None:
        self.file = file
        self.allow_unknown_keys = allow_unknown_keys
        self.items: list[Problem] = []
        self._seen: set[Problem] = set()

    def add(self, problem: Problem) -> None:
        problem = Problem(problem.path, problem.message, problem.hint, problem.severity, problem.file or self.file)
        if problem not in self._seen:  # one token used twice in a tool's argv is one problem
            self._seen.add(problem)
            self.items.append(problem)

    def error(self, path: str, message: str, hint: str = "") -> None:
        self.add(Problem(path, message, hint, "error"))

    def warn(self, path: str, message: str, hint: str = "") -> None:
        self.add(Problem(path, message, hint, "warning"))

    def unknown_key(self, path: str, what: str, key: str, known: Collection[str]) -> None:
        """An unknown key is an error (a typo must not turn a state into a no-op); a legacy spec
        may accept it with a warning (`--allow-unknown-keys`, or `allowUnknownKeys` in a run request)."""
        hint = _did_you_mean(key, known)
        if self.allow_unknown_keys:
            self.warn(path, f"{what} is ignored", hint)
        else:
            self.error(path, what, hint or "remove it (a legacy spec: --allow-unknown-keys accepts it with a "
                                           "warning)")

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "warning"]


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, str]) -> dict[str, Any]:
    """`--var KEY=VALUE`: replace/add top-level config keys (as strings) before validation."""
    if not overrides:
        return raw
    out = copy.deepcopy(raw)
    config = out.get("config")
    if config is None:
        config = out["config"] = {}
    if isinstance(config, dict):
        config.update({str(k): str(v) for k, v in overrides.items()})
    return out


# Config keys the engine itself reads (docs/language.md, "The document"): setting one is never a typo. The existing
# engine's renderer also reads `require_baked_npa` and `source_sha` (its specs are rendered with
# `--var source_sha=...`); ours accepts them and enforces nothing of them (docs/language.md says why).
ENGINE_CONFIG_KEYS = ("bucket", "prefix", "decision_uri", "plan_assume_decision", "default_decision",
                      "require_baked_npa", "source_sha")
# `{{config.KEY}}` and the bare `config.KEY` of `if:` and integer fields (`loop.max: config.rounds`).
_CONFIG_READ_RE = re.compile(r"(?<![A-Za-z0-9_.])config\.([A-Za-z0-9_.\-]+)")


def _strings_of(value: Any) -> Iterator[str]:
    """Every string value inside nested mappings and lists (mapping keys are names, not reads)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def config_keys_read(raw: Mapping[str, Any], catalog: Catalog) -> set[str]:
    """The config keys some token of the spec, or of a tool one of its states names, reads."""
    texts = list(_strings_of(raw))
    states = raw.get("states")
    for body in states.values() if isinstance(states, dict) else ():
        ref = body.get("toolRef", body.get("tool_ref")) if isinstance(body, dict) else None
        tool = catalog.get(ref) if isinstance(ref, str) else None
        if tool is not None:
            texts += [*tool.argv, *tool.env.values(), tool.setup, tool.image]
    return {m.group(1).rstrip(".") for text in texts for m in _CONFIG_READ_RE.finditer(text)}


def _check_overrides(raw: dict[str, Any], overrides: Mapping[str, str], catalog: Catalog, c: _Collector) -> None:
    """`--var tresh=0.5` where nothing reads `config.tresh` would change nothing: a typo, so an error."""
    read = config_keys_read(raw, catalog) | set(ENGINE_CONFIG_KEYS)
    config = raw.get("config") if isinstance(raw.get("config"), dict) else {}
    for key in overrides:
        if key in read:
            continue
        known = sorted((read | set(config)) - {key})  # a config key nothing reads is no answer to itself
        c.error(f"--var {key}", f"no token of the spec or its tools reads config.{key}: the override would "
                "change nothing", did_you_mean(key, known, prefix="--var ") or
                ("the keys read are: " + ", ".join(k for k in known if k not in ENGINE_CONFIG_KEYS)[:300]
                 if known else "the spec reads no config key"))


def validate_document(
    raw: Any,
    *,
    file: str = "",
    catalog: Catalog = EMPTY_CATALOG,
    overrides: Mapping[str, str] | None = None,
    strict: bool = False,
    allow_unknown_keys: bool = False,
) -> LoadedSpec:
    """`allow_unknown_keys` turns unknown keys into warnings; `strict` turns every warning into an error."""
    if not isinstance(raw, dict):
        raise SpecError.single("$", f"spec must be a mapping, got {yaml_type(raw)}", "start with 'apiVersion:'", file)
    _refuse_skypilot_task(raw, file)
    c = _Collector(file, allow_unknown_keys)
    if overrides:
        _check_overrides(raw, overrides, catalog, c)
    raw = apply_overrides(raw, overrides or {})
    _check_top_level(raw, c)
    metadata = _parse_metadata(raw, c)
    config = _mapping(raw, "config", c)
    run_block = _mapping(raw, "run", c)
    profiles = _parse_profiles(raw, c)
    names, states = _parse_states(raw, c)
    workdir = _workdir(raw, c)
    initial = raw.get("initial")
    if names:
        if initial is None:
            initial = next(iter(names))
        elif initial not in names:
            c.error("initial", f"initial state {initial!r} is not defined", _name_hint(initial, names))
            initial = None

    # Tool config defaults fill keys that config does not set (a global effect, as in the contract).
    merged_config = dict(config)
    for state in states.values():
        tool = catalog.get(state.tool_ref) if state.tool_ref else None
        for key, value in (tool.config_defaults if tool else {}).items():
            merged_config.setdefault(key, value)
    workflow = metadata.name if metadata else "unnamed"
    run_ctx, config_problems = resolve_config(merged_config, workflow, VALIDATE_RUN_ID, run_block)
    for problem in config_problems:
        c.add(problem)
    if not config_problems:
        for problem in check_bucket_names(merged_config, run_ctx.config):
            c.add(problem)

    _check_profiles(profiles, run_ctx, catalog, c)
    if names:
        _check_states(states, names, profiles, catalog, run_ctx, c)
        _check_graph(states, c)
        for problem in job_name_collisions(states):
            c.add(problem)
        _check_group_sizes(states, c)
        if len(states) == len(names):  # a state that failed to parse may be the terminal one
            _check_endings(states, initial, c)
            _check_followed(states, initial, c)

    _no_catalog_said_once(c)
    if overrides:
        _name_the_vars(c, raw, overrides)
    if strict:
        c.items = [Problem(p.path, p.message, p.hint, "error", p.file) for p in c.items]
    if c.errors:
        raise SpecError(c.errors, c.warnings)
    spec = Spec(
        api_version=raw["apiVersion"],
        kind=raw["kind"],
        metadata=metadata,
        config=merged_config,
        run=run_block,
        resources=profiles,
        initial=initial,
        states=states,
        workdir=workdir,
    )
    return LoadedSpec(spec=spec, catalog=catalog, file=file, warnings=c.warnings, raw=raw)


# --- document shape ------------------------------------------------------------------------


def _workdir(raw: dict[str, Any], c: _Collector) -> str:
    value = raw.get("workdir")
    if value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        got = "an empty string" if isinstance(value, str) else yaml_type(value)
        c.error("workdir", f"workdir must be a folder path, got {got}",
                "write 'workdir: steps' (a folder relative to the spec file), or leave it out")
        return ""
    if value.startswith(("/", "~")):
        c.error("workdir", f"workdir {value!r} is not relative to the spec file",
                "write it relative to the spec's folder (e.g. 'workdir: steps'), so the spec moves with its code")
        return ""
    return value.strip()


def _mapping(raw: dict[str, Any], key: str, c: _Collector) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        c.error(key, f"{key} must be a mapping, got {yaml_type(value)}", f"write {key} as indented key: value lines")
        return {}
    return value


def _check_top_level(raw: dict[str, Any], c: _Collector) -> None:
    api = raw.get("apiVersion")
    if api is None:
        c.error("apiVersion", "missing required field 'apiVersion'", f"add 'apiVersion: {API_VERSIONS[0]}'")
    elif api not in API_VERSIONS:
        c.error("apiVersion", f"unsupported apiVersion {api!r}", "use " + " or ".join(API_VERSIONS))
    kind = raw.get("kind")
    if kind is None:
        c.error("kind", "missing required field 'kind'", "add 'kind: Workflow'")
    elif kind != "Workflow":
        c.error("kind", f"kind must be 'Workflow', got {kind!r}", "set 'kind: Workflow'")
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            c.unknown_key(key, f"unknown top-level key '{key}'", key, TOP_LEVEL_KEYS)


def _parse_metadata(raw: dict[str, Any], c: _Collector) -> Metadata | None:
    body = raw.get("metadata")
    if body is None:
        return None
    if not isinstance(body, dict):
        c.error("metadata", f"metadata must be a mapping, got {yaml_type(body)}",
                "write 'metadata: {name: my-workflow}'")
        return None
    unknown = [k for k in body if k not in METADATA_KEYS]
    if unknown:
        c.error("metadata", "unknown field(s): " + ", ".join(unknown),
                _did_you_mean(unknown[0], METADATA_KEYS) or "allowed: name, description, namespace, labels, "
                "executionMode")
    fields = {k: v for k, v in body.items() if k not in unknown}
    for key in ("executionMode", "execution_mode"):
        if key in fields and fields[key] != "runtime":
            c.error(join("metadata", key), f"executionMode must be 'runtime' or absent, got {fields.pop(key)!r}",
                    "remove it, or set 'runtime' to allow only real decisions")
    try:
        return Metadata.model_validate(fields)
    except ValidationError as exc:
        for problem in pydantic_problems(exc, "metadata"):
            c.add(problem)
        return None


def _parse_profiles(raw: dict[str, Any], c: _Collector) -> dict[str, dict[str, Any]]:
    profiles = {}
    for name, body in _mapping(raw, "resources", c).items():
        if isinstance(body, dict):
            profiles[name] = body
        else:
            c.error(join("resources", name), f"resource profile '{name}' must be a mapping, got {yaml_type(body)}",
                    "write 'NAME: {cpus: 4, memory: 16Gi}'")
    return profiles


def _parse_states(raw: dict[str, Any], c: _Collector) -> tuple[list[str], dict[str, State]]:
    """Declared state names (for reference checks) and the states that parsed."""
    if "states" not in raw:
        c.error("states", "missing required field 'states'", "add a mapping of state name to state")
        return [], {}
    body = raw["states"]
    if isinstance(body, list):
        c.error("states", "expected object, got list", "write states as a mapping: 'states: {name: {...}}'")
        return [], {}
    if not isinstance(body, dict) or not body:
        c.error("states", "states must be a non-empty mapping of state name to state",
                "add at least one state under states:, e.g. hello: {run: {shell: 'echo hi'}, terminal: true}")
        return [], {}
    states: dict[str, State] = {}
    for name, state_raw in body.items():
        path = join("states", name)
        if not isinstance(state_raw, dict):
            c.error(path, f"state '{name}' must be a mapping, got {yaml_type(state_raw)}",
                    "give the state its keys (run, next, terminal, ...) as an indented mapping")
            continue
        for key in state_raw:
            if key not in STATE_KEYS:
                c.unknown_key(join(path, key), f"unknown state key '{key}' in state '{name}'", key, STATE_KEYS)
        fields = _without_nulls({k: v for k, v in state_raw.items() if k in STATE_KEYS})
        _precheck_state(fields, path, c)
        try:
            state = State.model_validate(fields)
        except ValidationError as exc:
            for problem in pydantic_problems(exc, path):
                c.add(problem)
            continue
        for sub_path, label, model in _parts(state):
            for key in model.model_extra or {}:
                c.unknown_key(join(path, sub_path, key), f"unknown {label} key '{key}'", key,
                              known_keys(type(model)))
        states[name] = state
    return list(body), states


def _parts(st: State) -> Iterator[tuple[str, str, Any]]:
    for key in ("run", "loop", "trigger"):
        if getattr(st, key) is not None:
            yield key, key, getattr(st, key)
    for i, t in enumerate(st.transitions):
        yield join("transitions", i), "transition", t
    for key in ("inputs", "outputs"):
        for i, artifact in enumerate(getattr(st, key)):
            yield join(key, i), key[:-1], artifact


def _without_nulls(mapping: dict[str, Any]) -> dict[str, Any]:
    """A key whose value is null counts as not set (`next:` with nothing after it)."""
    return {k: v for k, v in mapping.items() if v is not None}


def _precheck_state(fields: dict[str, Any], path: str, c: _Collector) -> None:
    """Checks whose messages are clearer than pydantic's. Offending values are dropped."""
    for key in ("run", "trigger", "loop"):
        if key in fields and not isinstance(fields[key], dict):
            c.error(join(path, key), f"{key} must be a mapping, got {yaml_type(fields.pop(key))}",
                    {"run": "write 'run: {shell: \"...\"}' or 'run: {argv: [...]}'",
                     "trigger": "write 'trigger: {uri: s3://bucket/prefix/}'",
                     "loop": "write 'loop: {max: 3}'"}[key])
        elif key in fields:
            fields[key] = _without_nulls(fields[key])
    if "parallel" in fields:
        members = fields["parallel"]
        if not isinstance(members, list):
            c.error(join(path, "parallel"), f"parallel must be a list of state names, got {yaml_type(members)}",
                    "write 'parallel: [a, b]'")
            members = []
        for i, member in enumerate(members):
            if not isinstance(member, str):
                c.error(join(path, "parallel", i), f"parallel members must be state names, got {member!r}",
                        "list the names of states defined under states:")
        fields["parallel"] = [m for m in members if isinstance(m, str)]
    if "params" in fields:
        params = fields["params"]
        if not isinstance(params, dict):
            c.error(join(path, "params"), f"params must be a mapping, got {yaml_type(params)}",
                    "write params as name: value lines")
            params = {}
        for key, value in params.items():
            if value is None or not isinstance(value, str | int | float | bool):
                c.error(join(path, "params", key), f"params.{key} must be a string, number or bool, got "
                        f"{yaml_type(value)}", "quote the value, or pass structured data through a file")
        # A bad value becomes "" so that later checks do not also report the key as missing.
        fields["params"] = {k: v if isinstance(v, str | int | float | bool) else "" for k, v in params.items()}
    if "transitions" in fields:
        items = fields["transitions"]
        if not isinstance(items, list):
            c.error(join(path, "transitions"), f"transitions must be a list, got {yaml_type(items)}",
                    "write '- {when: promote_checkpoint, goto: STATE}'")
            items = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not item.get("goto"):
                c.error(join(path, "transitions", i), "transition needs goto",
                        "write '- {when: promote_checkpoint, goto: STATE}'")
        fields["transitions"] = [_without_nulls(t) for t in items if isinstance(t, dict) and t.get("goto")]
    for key in ("inputs", "outputs"):
        if key not in fields:
            continue
        items = fields[key]
        if not isinstance(items, list):
            c.error(join(path, key), f"{key} must be a list of {{uri, schema}}, got {yaml_type(items)}",
                    f"write {key}: [{{uri: s3://bucket/key}}]")
            items = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not str(item.get("uri") or "").strip():
                c.warn(join(path, key, i), f"{key} item without a uri is ignored", "give it 'uri: s3://...'")
        fields[key] = [_without_nulls(a) for a in items if isinstance(a, dict) and str(a.get("uri") or "").strip()]


# --- per-state rules ------------------------------------------------------------------------


def _check_states(
    states: dict[str, State],
    names: list[str],
    profiles: dict[str, dict[str, Any]],
    catalog: Catalog,
    run_ctx: RunContext,
    c: _Collector,
) -> None:
    group_of: dict[str, str] = {}
    for name, st in states.items():
        for member in st.parallel:
            group_of.setdefault(member, name)
    loops = {name: 1 for name, st in states.items() if st.loop is not None}
    for name, st in states.items():
        p = join("states", name)
        if not (st.run is not None or st.tool_ref or st.sequence or st.parallel or st.transitions
                or st.next or st.terminal):
            c.error(p, "must set run, toolRef, sequence, parallel, transitions, next, or terminal",
                    "give the state a command (run/toolRef) or an edge (next/terminal)")
        if st.run is not None and not st.has_command and not st.sequence:
            c.error(join(p, "run"), "empty run block", "set run.shell or run.argv")
        if st.tool_ref and catalog.get(st.tool_ref) is None:
            c.error(join(p, "toolRef"), f"unknown toolRef '{st.tool_ref}'", _tool_hint(st.tool_ref, catalog))
        _check_references(name, st, names, run_ctx, c)
        if st.parallel:
            _check_group(name, st, states, names, run_ctx, c)
        else:
            for key, value in (("parallelCount", st.parallel_count), ("maxConcurrency", st.max_concurrency)):
                if value is not None:
                    c.error(join(p, key), f"{key} requires a parallel group", f"remove {key} or add 'parallel:'")
        if st.loop is not None:
            _check_loop(name, st, group_of, run_ctx, c)
        _check_deadline_fields(name, st, group_of, run_ctx, c)
        if st.run is not None or st.tool_ref:
            _check_executable(name, st, profiles, catalog, run_ctx, c)
        if st.writes_decision and not st.decision_output and "decision_uri" not in run_ctx.config \
                and "decision_uri" not in st.params:
            c.warn(join(p, "writesDecision"), "no decision location: the decision cannot be read",
                   "add an output with 'schema: decision' or set config.decision_uri")
        _check_tokens(name, st, states, names, catalog, run_ctx, loops, c)


def _tool_hint(tool_ref: str, catalog: Catalog) -> str:
    close = catalog.close_names(tool_ref)
    if close:
        return "did you mean " + " or ".join(f"'{n}'" for n in close) + "?"
    if catalog.tools:
        return "known: " + ", ".join(sorted(catalog.tools)[:10])
    return "no tool catalog was loaded: pass --catalog FILE or put tools.yaml next to the spec"


def _check_references(name: str, st: State, names: list[str], run_ctx: RunContext, c: _Collector) -> None:
    p = join("states", name)
    for key in ("sequence", "needs"):
        for i, ref in enumerate(getattr(st, key)):
            if ref not in names:
                c.error(join(p, key, i), f"unknown {key} '{ref}'", _name_hint(ref, names))
    if st.next and st.next not in names:
        c.error(join(p, "next"), f"next state '{st.next}' is not defined", _name_hint(st.next, names))
    for i, t in enumerate(st.transitions):
        tp = join(p, "transitions", i)
        if t.goto not in names:
            c.error(join(tp, "goto"), f"goto state '{t.goto}' is not defined", _name_hint(t.goto, names))
        if t.when is not None and t.when not in PREDICATES:
            c.error(join(tp, "when"), f"unknown transition.when '{t.when}'", "use " + " or ".join(PREDICATES))
        if t.if_ is not None:
            _check_if(t.if_, run_ctx.config, join(tp, "if"), c)


def _check_if(expr: str, config: Mapping[str, Any], path: str, c: _Collector) -> None:
    """`if: config.KEY` reads a YAML boolean: true/yes/on/1 or false/no/off/0/"" (not Python truthiness)."""
    text = expr.strip()
    key = text[len("config."):] if text.startswith("config.") else ""
    if not key:
        c.error(path, f"if must be 'config.KEY', got {expr!r}", "write 'if: config.enable_x'")
    elif key not in config:
        c.error(path, f"if names config.{key}, which is not in config", f"add '{key}' to config")
    elif yaml_bool(config[key]) is None:
        c.error(path, f"config.{key} is {config[key]!r}, which is not a boolean",
                "use true/false, yes/no, on/off or 1/0")


def _check_group_sizes(states: dict[str, State], c: _Collector) -> None:
    for name, st in states.items():
        if len(st.parallel) > MAX_GROUP_MEMBERS:
            c.error(join("states", name, "parallel"),
                    f"group '{name}' has {len(st.parallel):,} members, over the {MAX_GROUP_MEMBERS:,} a run is known "
                    "to finish", f"split it into groups of at most {MAX_GROUP_MEMBERS:,} run one after the other, "
                    "or into several runs")


def _check_group(
    name: str, st: State, states: dict[str, State], names: list[str], run_ctx: RunContext, c: _Collector
) -> None:
    p = join("states", name)
    seen: set[str] = set()
    for i, m in enumerate(st.parallel):
        mp = join(p, "parallel", i)
        if m in seen:
            c.error(mp, f"duplicate parallel member '{m}'", "list each member once")
            continue
        seen.add(m)
        if m == name:
            c.error(mp, "a parallel group cannot contain itself", "remove the group's own name from its parallel list")
            continue
        if m not in names:
            c.error(mp, f"unknown parallel member '{m}'", _name_hint(m, names))
            continue
        member = states.get(m)
        if member is None:
            continue  # reported where it is declared
        if member.sequence or member.parallel:
            c.error(mp, f"parallel member '{m}' must be a leaf state (no sequence or parallel)",
                    "make the member a single command; run multi-step work after the group")
        if member.terminal:
            c.error(mp, f"parallel member '{m}' must not be terminal", "put terminal on a state after the group")
        if member.next or member.transitions:
            c.error(mp, f"parallel member '{m}' must not declare next or transitions",
                    f"the group owns the edge: set next on '{name}'")
    for key, present in (("sequence", st.sequence), ("run", st.run is not None), ("toolRef", st.tool_ref)):
        if present:
            c.error(join(p, key), f"a parallel group may not have {key}", "move the work into a member state")
    if st.parallel_count is not None:
        try:
            n = resolve_bounded(st.parallel_count, run_ctx.config, "parallelCount", len(st.parallel), 1)
            if n != len(st.parallel):
                c.error(join(p, "parallelCount"),
                        f"parallelCount resolves to {n}, but the group declares {len(st.parallel)} members",
                        "make the count and the member list agree")
        except IntFieldError as exc:
            c.error(join(p, "parallelCount"), exc.message, exc.hint)
    if st.max_concurrency is not None:
        try:
            resolve_bounded(st.max_concurrency, run_ctx.config, "maxConcurrency", len(st.parallel), 1,
                            MAX_CONCURRENCY_LIMIT)
        except IntFieldError as exc:
            c.error(join(p, "maxConcurrency"), exc.message, exc.hint)


def _check_deadline_fields(name: str, st: State, group_of: Mapping[str, str], run_ctx: RunContext,
                           c: _Collector) -> None:
    """`timeoutSeconds` / `retries` (additive in v0.0.1): on a state that runs a wave, or on a group."""
    for key, value, low, high in (("timeoutSeconds", st.timeout_seconds, 1, 31_536_000),
                                  ("retries", st.retries, 0, 20)):
        if value is None:
            continue
        path = join("states", name, key)
        if name in group_of:
            c.error(path, f"{key} on a parallel member: members share the group's",
                    f"set {key} on the group '{group_of[name]}'")
        elif not (st.parallel or st.has_command):
            c.error(path, f"{key} applies to a state that runs a command, or to a group",
                    f"set {key} on the states that run work")
        try:
            resolve_bounded(value, run_ctx.config, key, low, low, high)
        except IntFieldError as exc:
            c.error(path, exc.message, exc.hint)


def _check_loop(name: str, st: State, group_of: Mapping[str, str], run_ctx: RunContext, c: _Collector) -> None:
    assert st.loop is not None
    lp = join("states", name, "loop")
    if st.parallel:
        c.error(lp, "loop is not allowed on a parallel group", "wrap the group in a looped sequence")
    if name in group_of:
        c.error(lp, f"loop is not allowed on a parallel member (of '{group_of[name]}')",
                "loop the whole group from a sequence instead")
    try:
        resolve_bounded(st.loop.max, run_ctx.config, "loop.max", 1, 1)
    except IntFieldError as exc:
        c.error(join(lp, "max"), exc.message, exc.hint)
    if st.loop.until is not None and st.loop.until not in PREDICATES:
        c.error(join(lp, "until"), f"unknown loop.until '{st.loop.until}'", "use " + " or ".join(PREDICATES))


def _check_executable(
    name: str, st: State, profiles: dict[str, dict[str, Any]], catalog: Catalog, run_ctx: RunContext, c: _Collector
) -> None:
    """Rules for states with run or toolRef: resource profile and multi-node mode."""
    p = join("states", name)
    if st.resources != "default" and st.resources not in profiles:
        c.error(join(p, "resources"), f"unknown resource profile '{st.resources}'",
                _did_you_mean(st.resources, profiles) or "define it under top-level 'resources'")
    if st.multi_node_mode not in ("forbidden", "sharded"):
        c.error(join(p, "multiNodeMode"), f"multiNodeMode must be 'forbidden' or 'sharded', got {st.multi_node_mode!r}",
                "use multiNodeMode: forbidden or multiNodeMode: sharded")
    profile = profiles[st.resources] if st.resources in profiles else profiles.get("default", {})
    try:
        nodes = _num_nodes(profile.get("num_nodes", 1), run_ctx)
    except (IntFieldError, TokenError):
        return  # reported by the profile check
    tool = catalog.get(st.tool_ref) if st.tool_ref else None
    mode = tool.multi_node_mode if tool else st.multi_node_mode
    if nodes > 1 and mode != "sharded":
        c.error(join(p, "resources"),
                f"profile '{st.resources}' asks for {nodes} nodes but the command is not rank-aware",
                "set multiNodeMode: sharded on the state (or the tool) if every node runs its shard")


# --- tokens ---------------------------------------------------------------------------------


def _check_text(
    text: str, path: str, ctx: TokenContext, c: _Collector, forbidden: Mapping[str, str] | None = None,
    prefix: str = "", suspicious: bool = True,
) -> bool:
    """Report token-shaped text that is not a token (unless `suspicious` is off: a tool's text, reported against
    its catalog), tokens of a `forbidden` scope (scope -> where) and every token that does not resolve. Returns
    True when the text is clean."""
    clean = True
    for raw, hint in find_suspicious(text) if suspicious else ():
        c.error(path, f"unrecognised token {raw}", hint)
        clean = False
    for match in TOKEN_RE.finditer(text):
        scope, key = match.group("scope"), match.group("key")
        if not suspicious and scope == "params":
            continue  # a tool's params.* token is the catalog's mistake (_check_tool_argv)
        if forbidden and scope in forbidden:
            c.error(path, f"{scope}.* tokens are not allowed in {forbidden[scope]} ({scope}.{key})",
                    "use config, run" + ("" if "loop" in forbidden else " or loop") + " tokens here")
            clean = False
            continue
        try:
            resolve_text(match.group(0), ctx)
        except TokenError as exc:
            c.error(path, prefix + exc.message, exc.hint)
            clean = False
    return clean


def _check_state_refs(text: str, path: str, states: dict[str, State], names: list[str], c: _Collector) -> None:
    """`{{state.NAME.uri}}` / `output_N` must name a declared state and one of its outputs."""
    for match in TOKEN_RE.finditer(text):
        if match.group("scope") != "state":
            continue
        ref = match.group("key")
        target, _, out = ref.partition(".")
        index = output_index(out)
        if target not in names:
            c.error(path, f"unknown state token: state.{ref} (no state named '{target}')", _name_hint(target, names))
        elif index is None:
            c.error(path, f"unknown state token: state.{ref}", "use state.NAME.uri or state.NAME.output_N")
        elif target in states and index >= len(states[target].outputs):
            c.error(path, f"unknown state token: state.{ref}",
                    f"state '{target}' declares {len(states[target].outputs)} output(s)")


def _check_tokens(
    name: str, st: State, states: dict[str, State], names: list[str], catalog: Catalog, run_ctx: RunContext,
    loops: dict[str, int], c: _Collector,
) -> None:
    p = join("states", name)
    # params: against the base config and the state's other params (in dependency order), run
    # and loops; never state outputs.
    for key, value in st.params.items():
        if isinstance(value, str):
            for raw, hint in find_suspicious(value):
                c.error(join(p, "params", key), f"unrecognised token {raw}", hint)
    eff, param_errors = resolve_params(st.params, run_ctx.config, run_ctx.run, loops)
    for key, exc in param_errors.items():
        c.error(join(p, "params", key), exc.message, exc.hint)
    texts: list[tuple[str, str, str]] = []  # (path, text, message prefix)
    tool = catalog.get(st.tool_ref) if st.tool_ref else None
    if tool is not None:
        texts += [(join(p, "toolRef"), t, f"tool '{st.tool_ref}': ") for t in tool.argv]
        _check_tool_argv(st.tool_ref or "", tool.argv, catalog, c)
    elif st.run is not None and not st.tool_ref:
        if st.run.argv:
            texts += [(join(p, "run", "argv", i), t, "") for i, t in enumerate(st.run.argv)]
        else:
            texts.append((join(p, "run", "shell"), st.run.shell, ""))
    for key in ("inputs", "outputs"):
        texts += [(join(p, key, i, "uri"), a.uri, "") for i, a in enumerate(getattr(st, key))]
    ctx = TokenContext(config=eff, run=run_ctx.run, loops=loops, tolerate_unknown_state=True)
    for path, text, prefix in texts:
        _check_state_refs(text, path, states, names, c)
        if _check_text(text, path, ctx, c, prefix=prefix, suspicious=not prefix) and path.endswith(".run.shell"):
            _check_shell_quoting(text, path, ctx, c)
    if st.trigger is not None:
        _check_trigger(name, st, TokenContext(config=eff, run=run_ctx.run, loops=loops), run_ctx, c)


def _check_shell_quoting(text: str, path: str, ctx: TokenContext, c: _Collector) -> None:
    """Each value this run knows goes into the script as one word at its place (spec/shell_quote.py)."""
    try:
        resolve_shell(text, ctx)
    except TokenError as exc:
        c.error(path, exc.message, exc.hint)


def _check_tool_argv(ref: str, argv: list[str], catalog: Catalog, c: _Collector) -> None:
    """Token-shaped text in a tool's argv is the catalog's mistake: said once, at its place in the catalog file,
    however many states use the tool (the collector keeps one of equal problems)."""
    for i, text in enumerate(argv):
        where = (f"tools.{ref}.argv[{i}]", catalog.source or "the tool catalog")
        for raw, hint in find_suspicious(text):
            c.add(Problem(where[0], f"unrecognised token {raw}", hint, "error", where[1]))
        for match in TOKEN_RE.finditer(text):
            if match.group("scope") == "params":
                key = match.group("key")
                c.add(Problem(where[0], f"params.* tokens are read only inside a state's params (params.{key})",
                              f"read the state's param here as {{{{config.{key}}}}}", "error", where[1]))


def _check_trigger(name: str, st: State, ctx: TokenContext, run_ctx: RunContext, c: _Collector) -> None:
    assert st.trigger is not None
    tp = join("states", name, "trigger")
    if not (st.run is not None or st.tool_ref):
        c.error(tp, "trigger requires run or toolRef on the same state", "give the state the work to do")
    for attr, key, default, low in (
        ("poll_seconds", "pollSeconds", 30, 1),
        ("max_polls", "maxPolls", 0, 0),
        ("min_objects", "minObjects", 1, 1),
    ):
        try:
            resolve_bounded(getattr(st.trigger, attr), run_ctx.config, key, default, low)
        except IntFieldError as exc:
            c.error(join(tp, key), exc.message, exc.hint)
    uri = st.trigger.uri
    if not uri.strip():
        c.error(join(tp, "uri"), "trigger.uri is required", "set the S3 prefix to watch, e.g. s3://bucket/landing/")
    elif _check_text(uri, join(tp, "uri"), ctx, c, {"state": "trigger.uri"}):
        resolved = resolve_text(uri, ctx)
        if not resolved.startswith("s3://") or len(resolved) <= len("s3://"):
            c.error(join(tp, "uri"), f"trigger.uri must be an s3:// prefix, got {resolved!r}",
                    "use an s3://bucket/prefix/ URI (ending in /)")


# --- resource profiles ----------------------------------------------------------------------


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, join(path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, join(path, key))


def _check_profiles(profiles: dict[str, dict[str, Any]], run_ctx: RunContext, catalog: Catalog,
                    c: _Collector) -> None:
    """Every profile, used or not: tokens (config and run only), accelerators, num_nodes, `tool://` images."""
    ctx = TokenContext(config=run_ctx.config, run=run_ctx.run)
    forbidden = {"state": "resource profiles", "loop": "resource profiles", "params": "resource profiles"}
    for pname, body in profiles.items():
        pp = join("resources", pname)
        clean = [_check_text(text, path, ctx, c, forbidden) for path, text in _strings(body, pp)]
        if not all(clean):
            continue
        if "accelerators" in body:
            _check_accelerators(body["accelerators"], resolve_deep(body["accelerators"], ctx),
                                join(pp, "accelerators"), c)
        if "num_nodes" in body:
            try:
                _num_nodes(body["num_nodes"], run_ctx)
            except IntFieldError as exc:
                c.error(join(pp, "num_nodes"), exc.message, exc.hint)
        image = resolve_deep(body.get("image"), ctx)
        if isinstance(image, str) and image.startswith("tool://"):
            _check_tool_image(image[len("tool://"):], join(pp, "image"), catalog, c)


def _check_tool_image(ref: str, path: str, catalog: Catalog, c: _Collector) -> None:
    """`image: tool://FAMILY` must name an image of the catalog: else the step would run in no image."""
    if catalog.tool_image(ref):
        return
    known = catalog.image_names()
    hint = did_you_mean(ref, known, prefix="tool://") or (
        f"add 'images: {{{ref}: REGISTRY/IMAGE:TAG}}' to the tool catalog, or give the image itself"
        + (f" (the catalog names: {', '.join(known[:8])})" if known else ""))
    c.error(path, f"image tool://{ref} names no image in the tool catalog", hint)


def _num_nodes(value: Any, run_ctx: RunContext) -> int:
    hint = f"set num_nodes to 1..{MAX_NUM_NODES}"
    if isinstance(value, bool):
        raise IntFieldError("num_nodes must be an integer, not a bool", hint)
    text = resolve_text(value, TokenContext(config=run_ctx.config, run=run_ctx.run)) if isinstance(value, str) \
        else value
    try:
        nodes = int(str(text).strip())
    except ValueError:
        raise IntFieldError(f"num_nodes must be an integer, got {text!r}", hint) from None
    if nodes < 1:
        raise IntFieldError(f"num_nodes must be >= 1, got {nodes}", hint)
    if nodes > MAX_NUM_NODES:
        raise IntFieldError(f"num_nodes must be <= {MAX_NUM_NODES}, got {nodes}", hint)
    return nodes


def _check_accelerators(raw: Any, resolved: Any, path: str, c: _Collector) -> None:
    if isinstance(resolved, dict):
        for acc, count in resolved.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                c.error(join(path, acc), f"accelerator count must be an integer >= 1, got {count!r}",
                        "write '{TYPE: COUNT}', e.g. {H100: 1}")
    elif not isinstance(resolved, str):
        c.error(path, f"accelerators must be 'TYPE:COUNT' or a mapping, got {yaml_type(resolved)}",
                "write 'TYPE:COUNT', e.g. H100:1")
    elif ":" in resolved:
        count = resolved.rsplit(":", 1)[1].strip()
        if not (count.isascii() and count.isdigit()) or int(count) < 1:
            c.error(path, f"accelerator count must be a positive integer, got {resolved!r}",
                    "write 'TYPE:COUNT', e.g. H100:1")
    elif isinstance(raw, str) and "{{" in raw:
        c.error(path, f"accelerators must use '<type>:<positive-count>', got {resolved!r}",
                "add the count, e.g. '{{config.gpu}}:1'")


# --- whole-workflow rules -------------------------------------------------------------------


def _check_graph(states: dict[str, State], c: _Collector) -> None:
    needs = {n: [x for x in s.needs if x in states] for n, s in states.items()}
    cycle = find_cycle(needs)
    if cycle:
        c.error(join("states", cycle[0], "needs"), "cycle detected in needs among states: " + " -> ".join(cycle),
                "needs is an ordering hint; remove one edge")
    edges = {
        n: ([s.next] if s.next in states else []) + [t.goto for t in s.transitions if t.goto in states]
        for n, s in states.items()
    }
    cycle = find_cycle(edges)
    if cycle:
        c.error(join("states", cycle[0]), "unbounded control-flow cycle detected: " + " -> ".join(cycle),
                "repeat work with 'loop: {max: N}' on a sequence instead of an edge back")
    cycle = find_cycle({n: [x for x in s.sequence if x in states] for n, s in states.items()})
    if cycle:
        c.error(join("states", cycle[0], "sequence"), "a sequence contains itself: " + " -> ".join(cycle),
                "a state cannot be inside its own body")


def _check_endings(states: dict[str, State], initial: str | None, c: _Collector) -> None:
    if not any(s.terminal for s in states.values()):
        c.error("states", "workflow must declare at least one terminal: true state",
                "mark the last state with 'terminal: true'")
        return
    # States the walk can stand on at top level: initial and every next/goto target.
    top = {initial} | {s.next for s in states.values() if s.next} | {
        t.goto for s in states.values() for t in s.transitions
    }
    for name in sorted(n for n in top if n in states):
        st = states[name]
        if st.terminal or st.next or any(t.when is None and t.if_ is None for t in st.transitions):
            continue
        c.warn(join("states", name), f"the run can end at '{name}', which is not terminal",
               "add 'next', an unconditional transition, or 'terminal: true'")


def _check_followed(states: dict[str, State], initial: str | None, c: _Collector) -> None:
    """Keys the walk never follows where they stand, and states no path runs (spec.followed): warnings."""
    for found in ignored_keys(states):
        c.warn(join("states", found.state, found.key), found.message, found.hint)
    for name in unreachable_states(states, initial):
        c.warn(join("states", name), f"no path from the initial state '{initial}' reaches '{name}': it never runs",
               "reach it with a next, a transition's goto or a sequence/parallel list (an edge that is followed), "
               "or remove it")


# SkyPilot task keys that a workflow spec never has at its top level (its `run` is a mapping, a task's a string)
_SKYPILOT_TASK_KEYS = ("setup", "file_mounts", "num_nodes", "envs", "secrets", "service")


def _refuse_skypilot_task(raw: dict[str, Any], file: str) -> None:
    """A SkyPilot task YAML given where a workflow spec goes gets one line, not one per workflow field it lacks."""
    if "apiVersion" in raw or "states" in raw:
        return
    if isinstance(raw.get("run"), str) or any(key in raw for key in _SKYPILOT_TASK_KEYS):
        raise SpecError.single("$", "this is a SkyPilot task, not a workflow spec",
                               "a workflow spec has apiVersion: npa.workflow/v0.0.1, kind: Workflow, metadata and "
                               "states (a state runs a command: `run: {shell: ...}`); `npa-workflow render SPEC` "
                               "shows the SkyPilot tasks a spec becomes", file)


_NO_CATALOG = _tool_hint("", EMPTY_CATALOG)


def _no_catalog_said_once(c: _Collector) -> None:
    """Every unknown toolRef names its state; that no catalog was loaded at all is said once, on the first."""
    said = False
    for i, p in enumerate(c.items):
        if p.hint == _NO_CATALOG:
            if said:
                c.items[i] = Problem(p.path, p.message, "(no tool catalog was loaded: see above)", p.severity, p.file)
            said = True


_CONFIG_TOKEN = re.compile(r"\{\{\s*config\.([A-Za-z0-9_]+)\s*\}\}")


def _raw_at(raw: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(raw, dict) or "[" in part:
            return None
        raw = raw.get(part)
    return raw


def _name_the_vars(c: _Collector, raw: dict[str, Any], overrides: Mapping[str, str]) -> None:
    """A field whose value a `--var` set through a config token (`maxConcurrency: "{{config.fit_concurrency}}"`
    with `--var fit_concurrency=0`) is fixed by the var, not in the spec: its error says so."""
    for i, p in enumerate(c.items):
        if p.severity != "error" or p.path.startswith("--var"):
            continue
        value = _raw_at(raw, p.path)
        keys = [k for k in _CONFIG_TOKEN.findall(value) if k in overrides] if isinstance(value, str) else []
        if keys:
            given = ", ".join(f"--var {k}={overrides[k]}" for k in keys)
            c.items[i] = Problem(p.path, f"{p.message} (from {given})",
                                 f"change {given}" + (f" ({p.hint})" if p.hint else ""), p.severity,
                                 p.file)

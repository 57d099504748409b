"""The inbox: an object uploaded under `inbox/` becomes a run, or a report saying exactly why not.

`handle_object(engine, executions, bucket=…, key=…, version_id=…, etag=…, settings=…)` reads the object (that
version) and parses it with the project's bounded YAML loader (`read_document`: size checked on the bytes before
anything is decoded, nesting/alias expansion bounded while parsing, `INBOX_LIMITS.max_seconds` of parsing at
most; every other reader of an inbox object — `serve` looking for buckets to create — goes through it too).
It is one of:

- a spec (`apiVersion: npa.workflow/v0.0.1…`): run it as it is;
- a run request::

      apiVersion: npa.workflow.run/v1
      spec: fanout                 # the metadata.name of a deployed spec, or an inline spec mapping
      vars: {shard_sleep: "5"}     # config overrides (as `--var`)
      runId: my-run                # optional; default: deterministic from the object version
      options: {retries: 1, maxConcurrency: 2, maxWaitSeconds: 600, assumeDecision: promote,
                allowUnknownKeys: false,  # true: a legacy spec's unknown keys are warnings, not errors
                codeUri: s3://<engine bucket>/code/<sha256>/}  # the staged step code (submit does it)

  (unknown keys are errors).

The spec is validated with the vars against the deployed tool catalog: `s3://<engine bucket>/catalog/tools.yaml`
when present, else an empty catalog. A deployed spec named by a run request is read from
`s3://<engine bucket>/catalog/specs/<name>.yaml` (the deploy publishes both there).

Invalid (YAML, spec, catalog or request errors; an unknown deployed spec; ad-hoc not allowed) → every problem is
written to `inbox-rejected/<key without inbox/>.json` as `{"key", "errors": [Problem.to_json()…], "rejected_at"}`,
with the same messages `npa-workflow validate` prints, and nothing starts.

Valid → the machine: the deployed machine of the spec's `metadata.name` (`settings.state_machines`) when its
definition equals this spec's compile with these vars and options (function ARNs aside); otherwise, when ad-hoc
specs are allowed, a machine named `<prefix><16 hex of the definition's sha256>`, created once and reused by every
later run of the same definition. Then `engine.start.start_run` with the run id `runId`, or
`run_id_for_object(bucket, key, version id or etag)`: a duplicate event of one object version starts nothing new.

Settings (`InboxSettings.from_environment()`):

- `NPA_WORKFLOW_STATE_MACHINES`: JSON map spec name → state machine ARN (the deployed specs); or, as the stack sets
  it, `NPA_WORKFLOW_MACHINE_ARN_PREFIX` and the map spec name → machine name in `catalog/machines.json`, which the
  deploy publishes (an environment map passes Lambda's 4 KB limit at about 34 specs): `with_deployed_machines`;
- `NPA_WORKFLOW_MAX_WAIT_SECONDS` (optional): the per-wave deadline the deployed machines were compiled with, the
  default of a run request's `options.maxWaitSeconds`;
- `NPA_WORKFLOW_ALLOW_AD_HOC`: `true` lets the inbox create machines for other specs, with
  `NPA_WORKFLOW_AD_HOC_MACHINE_PREFIX`, `NPA_WORKFLOW_AD_HOC_ROLE_ARN`, `NPA_WORKFLOW_AD_HOC_LOG_GROUP_ARN` and
  `NPA_WORKFLOW_{LAUNCH,DECIDE,TRIGGER,CLEANUP}_FUNCTION_ARN`;
- `NPA_WORKFLOW_HEARTBEAT_SECONDS` (optional, default 300): the `HeartbeatSeconds` the deployed machines were
  compiled with (the stack's `compile_options`), so the compile here is comparable.
- `NPA_WORKFLOW_WATCH_INTERVAL_SECONDS` (optional, default 0): the watch schedule the deployed machines were compiled
  with (a trigger's bound is `maxPolls` × the longer of `pollSeconds` and it), likewise.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from npa_workflow import decisions
from npa_workflow.compile.asl import CompiledMachine, compile_spec
from npa_workflow.compile.deadlines import retention_problem
from npa_workflow.compile.names import is_legal
from npa_workflow.compile.options import CompileOptions
from npa_workflow.engine.context import Engine
from npa_workflow.engine.inbox_code import is_code_bundle, raw_upload_code
from npa_workflow.engine.ports import Executions, MachineAlreadyExists
from npa_workflow.engine.runs import RunOptions
from npa_workflow.engine.start import StartedRun, run_id_for_object, start_run
from npa_workflow.errors import Problem, SpecError, WiringError
from npa_workflow.protocol import environment as env_names
from npa_workflow.protocol import functions
from npa_workflow.protocol.definitions import masked
from npa_workflow.protocol.run_ids import RUN_ID_PATTERN
from npa_workflow.spec.catalog import EMPTY_CATALOG, Catalog, load_catalog_text
from npa_workflow.spec.loader import DEFAULT_LIMITS, Limits, load_yaml_bytes
from npa_workflow.spec.paths import join, pydantic_problems
from npa_workflow.spec.validate import LoadedSpec, validate_document
from npa_workflow.timestamps import utc_now

INBOX_PREFIX = "inbox/"
REJECTED_PREFIX = "inbox-rejected/"
CATALOG_KEY = "catalog/tools.yaml"
DEPLOYED_SPECS_PREFIX = "catalog/specs/"
RUN_REQUEST_API = "npa.workflow.run/v1"

DEPLOYED_MACHINES_KEY = "catalog/machines.json"
# The compiler's placeholder → the variable holding the function's ARN (protocol.functions).
FUNCTION_ARN_ENVS = {f.placeholder: f.arn_env for f in functions.MACHINE_INVOKED}
AD_HOC_HASH_HEX = 16
# One object's parse is bounded in bytes, nodes, depth and time: a hostile upload cannot hold the inbox.
INBOX_LIMITS = Limits(max_bytes=DEFAULT_LIMITS.max_bytes, max_seconds=5.0)
_DEFAULTS = CompileOptions()


# ------------------------------------------------------------------------------------------------ settings
@dataclass(frozen=True)
class InboxSettings:
    state_machines: Mapping[str, str] = field(default_factory=dict)
    allow_ad_hoc: bool = False
    ad_hoc_prefix: str = ""
    ad_hoc_role_arn: str = ""
    ad_hoc_log_group_arn: str = ""
    function_arns: Mapping[str, str] = field(default_factory=dict)  # compiler placeholder → function ARN
    heartbeat_seconds: int = _DEFAULTS.heartbeat_seconds
    machine_arn_prefix: str = ""
    max_wait_seconds: int = _DEFAULTS.max_wait_seconds
    watch_interval_seconds: int = _DEFAULTS.watch_interval_seconds
    retention_days: int | None = None  # the stack's retentionDays: no wave may wait as long (None: kept forever)

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> InboxSettings:
        env = os.environ if env is None else env
        text = env.get(env_names.STATE_MACHINES, "").strip() or "{}"
        try:
            machines = json.loads(text)
        except ValueError:
            machines = None
        if not isinstance(machines, dict) or not all(isinstance(v, str) for v in machines.values()):
            raise WiringError(f"{env_names.STATE_MACHINES} must be a JSON object of spec name to state machine ARN")
        allow = env.get(env_names.ALLOW_AD_HOC, "").strip().lower() in ("true", "1", "yes")
        heartbeat = env.get(env_names.HEARTBEAT_SECONDS, "").strip()
        settings = cls(
            state_machines={str(k): v for k, v in machines.items()},
            allow_ad_hoc=allow,
            ad_hoc_prefix=env.get(env_names.AD_HOC_MACHINE_PREFIX, "").strip(),
            ad_hoc_role_arn=env.get(env_names.AD_HOC_ROLE_ARN, "").strip(),
            ad_hoc_log_group_arn=env.get(env_names.AD_HOC_LOG_GROUP_ARN, "").strip(),
            function_arns={p: env.get(name, "").strip() for p, name in FUNCTION_ARN_ENVS.items()},
            heartbeat_seconds=int(heartbeat) if heartbeat.isdigit() else _DEFAULTS.heartbeat_seconds,
            machine_arn_prefix=env.get(env_names.MACHINE_ARN_PREFIX, "").strip(),
            max_wait_seconds=int(max_wait) if (max_wait := env.get(env_names.MAX_WAIT_SECONDS, "").strip()).isdigit()
            else _DEFAULTS.max_wait_seconds,
            watch_interval_seconds=int(tick)
            if (tick := env.get(env_names.WATCH_INTERVAL_SECONDS, "").strip()).isdigit()
            else _DEFAULTS.watch_interval_seconds,
            retention_days=int(days) if (days := env.get(env_names.RETENTION_DAYS, "").strip()).isdigit() else None,
        )
        if allow:
            missing = [name for name, value in (
                (env_names.AD_HOC_MACHINE_PREFIX, settings.ad_hoc_prefix),
                (env_names.AD_HOC_ROLE_ARN, settings.ad_hoc_role_arn),
                *((FUNCTION_ARN_ENVS[p], settings.function_arns[p]) for p in FUNCTION_ARN_ENVS),
            ) if not value]
            if missing:
                raise WiringError(f"{env_names.ALLOW_AD_HOC}=true needs {', '.join(missing)} (the stack sets them)")
        return settings


# ------------------------------------------------------------------------------------------------ run request
class RunRequestOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    retries: int = Field(default=_DEFAULTS.retries, ge=0, le=20)
    max_concurrency: int = Field(default=_DEFAULTS.max_concurrency_cap, ge=0, le=10_000, alias="maxConcurrency")
    max_wait_seconds: int = Field(default=_DEFAULTS.max_wait_seconds, ge=0, le=31_536_000, alias="maxWaitSeconds")
    assume_decision: Literal["promote_checkpoint", "promote", "loop_back", "loop_back_to_inner_loop"] | None = Field(
        default=None, alias="assumeDecision"
    )
    # A legacy spec's unknown keys become warnings (default: errors, as `npa-workflow validate`).
    allow_unknown_keys: bool = Field(default=False, alias="allowUnknownKeys")
    # The step code `submit` staged (render.code): `s3://<bucket>/code/<sha256>/`; frozen with the run.
    code_uri: str = Field(default="", alias="codeUri", pattern=r"^(s3://[a-z0-9][a-z0-9.\-]{1,62}/code/[0-9a-f]{64}/)?$")


class RunRequest(BaseModel):
    """`apiVersion: npa.workflow.run/v1`: run a deployed spec (by name) or an inline spec, with vars and options."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    api_version: Literal["npa.workflow.run/v1"] = Field(alias="apiVersion")
    spec: Annotated[str, Field(min_length=1)] | dict[str, Any]
    vars: dict[str, str | bool | int | float] = Field(default_factory=dict)
    run_id: str | None = Field(default=None, alias="runId", pattern=RUN_ID_PATTERN.pattern)
    options: RunRequestOptions = Field(default_factory=RunRequestOptions)

    def variables(self) -> dict[str, str]:
        return {k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in self.vars.items()}


# ------------------------------------------------------------------------------------------------ results
class Rejected(Exception):  # noqa: N818 - an outcome, not a failure of the inbox
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(p.format() for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class InboxResult:
    status: Literal["started", "already_started", "rejected", "ignored"]
    key: str
    run_id: str = ""
    execution_arn: str = ""
    machine_arn: str = ""
    machine: str = ""  # "deployed" or "ad-hoc"
    already_started: bool = False
    rejected_key: str = ""
    errors: list[dict[str, str]] = field(default_factory=list)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", [], None)} | {
            "already_started": self.already_started}


@dataclass(frozen=True)
class _Prepared:
    loaded: LoadedSpec
    spec_text: str
    catalog_text: str
    variables: dict[str, str]
    request: RunRequest | None


# ------------------------------------------------------------------------------------------------ entry point
def rejected_key_for(key: str) -> str:
    return REJECTED_PREFIX + key.removeprefix(INBOX_PREFIX) + ".json"


def handle_object(
    engine: Engine,
    executions: Executions,
    *,
    bucket: str,
    key: str,
    version_id: str | None,
    etag: str | None,
    settings: InboxSettings,
) -> InboxResult:
    if not key.startswith(INBOX_PREFIX) or key.endswith("/"):
        return InboxResult("ignored", key, reason=f"not an object under {INBOX_PREFIX}")
    if is_code_bundle(key):
        return InboxResult("ignored", key, reason="a code bundle: staged when the spec beside it is uploaded")
    uri = f"s3://{bucket}/{key}"
    body = _read_object(engine, bucket, key, version_id)
    if body is None:
        return InboxResult("ignored", key, reason="the object no longer exists")
    settings = with_deployed_machines(engine, settings)
    try:
        prepared = _prepare(engine, uri, body)
        options = _options(prepared)
        _check_secrets(prepared)
        if "max_wait_seconds" not in options.model_fields_set:  # the stack's deadline, unless the request sets one
            options = options.model_copy(update={"max_wait_seconds": settings.max_wait_seconds})
        compiled = compile_spec(prepared.loaded, _compile_options(options, settings))
        _check_retention(options, compiled.definition, settings, uri)
        machine_arn, kind = _choose_machine(executions, settings, prepared.loaded, compiled)
        if prepared.request is None:  # a raw spec upload: the code bundle beside it, staged (engine.inbox_code)
            options = options.model_copy(update={"code_uri": raw_upload_code(engine.store, bucket, key,
                                                                              prepared.loaded, kind)})
        request_run_id = prepared.request.run_id if prepared.request else None
        run_id = request_run_id or run_id_for_object(bucket, key, version_id or (etag or "").strip('"'),
                                                     prepared.loaded.spec.name)
        if request_run_id:
            _check_run_id_free(engine, run_id, prepared, uri)
    except SpecError as exc:
        return _reject(engine, bucket, key, exc.problems)
    except Rejected as exc:
        return _reject(engine, bucket, key, exc.problems)
    run_options = RunOptions(
        assume_decision=decisions.normalize(options.assume_decision) if options.assume_decision else "",
        max_wait_seconds=options.max_wait_seconds,
        code_uri=options.code_uri,
        code_digest=options.code_uri.rstrip("/").rsplit("/", 1)[-1] if options.code_uri else "",
    )
    started: StartedRun = start_run(
        engine, executions, machine_arn=machine_arn, compiled=compiled, loaded=prepared.loaded,
        spec_text=prepared.spec_text, catalog_text=prepared.catalog_text, run_id=run_id,
        variables=prepared.variables, options=run_options,
        record_options={"source": uri, "version": version_id or etag or "", "machine": kind,
                        "retries": options.retries, "max_concurrency": options.max_concurrency,
                        **run_options.to_json()},
    )
    return InboxResult(
        "already_started" if started.already_started else "started", key, run_id=run_id,
        execution_arn=started.execution_arn, machine_arn=machine_arn, machine=kind,
        already_started=started.already_started,
    )


# ------------------------------------------------------------------------------------------------ reading
def with_deployed_machines(engine: Engine, settings: InboxSettings) -> InboxSettings:
    """`settings` with the deployed machines of `catalog/machines.json` (`{"machines": {spec name: machine name}}`)
    when the environment names an ARN prefix instead of a map."""
    if settings.state_machines or not settings.machine_arn_prefix:
        return settings
    body = engine.store.get(f"s3://{engine.runs.bucket}/{DEPLOYED_MACHINES_KEY}")
    names = json.loads(body).get("machines", {}) if body else {}
    return dataclasses.replace(
        settings, state_machines={str(k): settings.machine_arn_prefix + str(v) for k, v in names.items()})


def _read_object(engine: Engine, bucket: str, key: str, version_id: str | None) -> bytes | None:
    """That version of the object when the event names one (a later upload must not change this run)."""
    if version_id:
        return engine.store.get_version(f"s3://{bucket}/{key}", version_id)
    return engine.store.get(f"s3://{bucket}/{key}")


def _text(body: bytes, file: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError.single("$", f"file is not UTF-8 text (byte {exc.start})", "save it as UTF-8", file) from None


def _catalog(engine: Engine) -> tuple[str, Catalog]:
    uri = f"s3://{engine.runs.bucket}/{CATALOG_KEY}"
    body = engine.store.get(uri)
    if body is None or not body.strip():
        return "", EMPTY_CATALOG
    text = _text(body, uri)
    return text, load_catalog_text(text, uri)


def read_document(body: bytes, uri: str) -> Any:
    """An inbox object's YAML through the bounded loader (raises SpecError naming the object)."""
    return load_yaml_bytes(body, uri, INBOX_LIMITS)


def _prepare(engine: Engine, uri: str, body: bytes) -> _Prepared:
    raw = read_document(body, uri)
    if isinstance(raw, dict) and str(raw.get("apiVersion", "")).startswith("npa.workflow.run/"):
        return _prepare_request(engine, uri, raw)
    catalog_text, catalog = _catalog(engine)
    loaded = validate_document(raw, file=uri, catalog=catalog)
    return _Prepared(loaded, body.decode("utf-8"), catalog_text, {}, None)


def _prepare_request(engine: Engine, uri: str, raw: dict[str, Any]) -> _Prepared:
    try:
        request = RunRequest.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(pydantic_problems(exc, "", uri)) from None
    variables = request.variables()
    catalog_text, catalog = _catalog(engine)
    if isinstance(request.spec, dict):
        try:
            loaded = validate_document(request.spec, file=uri, catalog=catalog, overrides=variables,
                                       allow_unknown_keys=request.options.allow_unknown_keys)
        except SpecError as exc:
            raise Rejected([_under_spec(p) for p in exc.problems]) from None
        spec_text = yaml.safe_dump(request.spec, sort_keys=False, allow_unicode=True)
        return _Prepared(loaded, spec_text, catalog_text, variables, request)
    name = request.spec
    spec_uri = f"s3://{engine.runs.bucket}/{DEPLOYED_SPECS_PREFIX}{name}.yaml"
    body = engine.store.get(spec_uri) if is_legal(name) else None
    if body is None:
        raise Rejected([Problem(
            "spec", f"spec {name!r} is not deployed (no {spec_uri})",
            "name a spec deployed from specs/ (its metadata.name), or give the spec inline as a mapping", file=uri,
        )])
    spec_text = _text(body, spec_uri)
    loaded = validate_document(read_document(body, spec_uri), file=spec_uri, catalog=catalog,
                               overrides=variables, allow_unknown_keys=request.options.allow_unknown_keys)
    return _Prepared(loaded, spec_text, catalog_text, variables, request)


def _under_spec(problem: Problem) -> Problem:
    """A problem of an inline spec, at its path inside the request."""
    path = join("spec", problem.path) if problem.path not in ("", "$") else "spec"
    return Problem(path, problem.message, problem.hint, problem.severity, problem.file)


def _check_secrets(prepared: _Prepared) -> None:
    """Every step secret the plan needs is where its jobs will get it, before the execution starts
    (engine.preflight): a missing one is a rejection naming it, not a failure after the steps before it ran."""
    from npa_workflow.engine.preflight import secret_problems
    from npa_workflow.wiring import step_secret_presence

    present, where, fix = step_secret_presence()
    problems = secret_problems(prepared.loaded, present, where=where, fix=fix)
    inline = prepared.request is not None and isinstance(prepared.request.spec, dict)
    if problems:
        raise Rejected([_under_spec(p) if inline else Problem(p.path, p.message, p.hint, file=prepared.loaded.file)
                        for p in problems])


def _options(prepared: _Prepared) -> RunRequestOptions:
    options = prepared.request.options if prepared.request else RunRequestOptions()
    spec = prepared.loaded.spec
    if options.assume_decision and spec.runtime_only:
        raise Rejected([Problem(
            "options.assumeDecision",
            f"spec {spec.name!r} has metadata.executionMode: runtime: it must follow the decisions its steps write",
            "remove options.assumeDecision", file=prepared.loaded.file,
        )])
    return options


def _check_retention(options: RunRequestOptions, definition: dict[str, Any], settings: InboxSettings,
                     uri: str) -> None:
    """Refuse a run one of whose waves could wait as long as the stack keeps the run's records (see
    `compile.deadlines.retention_problem`: S3 lifecycle expiry counts from the object's creation)."""
    if settings.retention_days is None:
        return
    problem = retention_problem(options.max_wait_seconds, definition, settings.retention_days)
    if problem:
        where, what, fix = problem
        raise Rejected([Problem(where, what, fix, file=uri)])


def _compile_options(options: RunRequestOptions, settings: InboxSettings) -> CompileOptions:
    return CompileOptions(
        max_wait_seconds=options.max_wait_seconds,
        heartbeat_seconds=settings.heartbeat_seconds,
        watch_interval_seconds=settings.watch_interval_seconds,
        retries=options.retries,
        max_concurrency_cap=options.max_concurrency,
    )


def _check_run_id_free(engine: Engine, run_id: str, prepared: _Prepared, uri: str) -> None:
    """An explicit `runId` may repeat only for the same run (a duplicate delivery), never take over another."""
    existing = engine.ledger.get_run(run_id)
    if existing is None:
        return
    frozen_spec = engine.store.get(engine.runs.uri(run_id, "spec.yaml"))
    frozen_doc = engine.store.get(engine.runs.uri(run_id, "run.json"))
    same = (
        frozen_spec is not None and frozen_doc is not None
        and frozen_spec.decode("utf-8", "replace") == prepared.spec_text
        and json.loads(frozen_doc).get("vars") == prepared.variables
    )
    if not same:
        raise Rejected([Problem(
            "runId", f"run id {run_id!r} is already used by another run (workflow {existing.workflow!r}, "
            f"started {existing.started_at})", "choose another runId, or leave it out for a generated one",
            file=uri,
        )])


# ------------------------------------------------------------------------------------------------ machines
def _choose_machine(executions: Executions, settings: InboxSettings, loaded: LoadedSpec,
                    compiled: CompiledMachine) -> tuple[str, str]:
    name = loaded.spec.name
    deployed_arn = settings.state_machines.get(name)
    if deployed_arn:
        deployed = executions.definition(deployed_arn)
        if deployed is not None and masked(deployed) == masked(compiled.definition):
            return deployed_arn, "deployed"
    if not settings.allow_ad_hoc:
        if deployed_arn:
            message = (f"spec {name!r} differs from its deployed state machine (with these vars and options) and "
                       "ad-hoc specs are not allowed")
            hint = "run it as deployed, deploy the changed spec, or set allowAdHocSpecs"
        else:
            message = f"spec {name!r} is not deployed and ad-hoc specs are not allowed"
            hint = "add it to specs/ and deploy, or set allowAdHocSpecs"
        raise Rejected([Problem("metadata.name", message, hint, file=loaded.file)])
    return _ad_hoc_machine(executions, settings, compiled), "ad-hoc"


def ad_hoc_definition(settings: InboxSettings, compiled: CompiledMachine) -> str:
    text = json.dumps(compiled.definition, sort_keys=True, separators=(",", ":"))
    for placeholder, arn in settings.function_arns.items():
        text = text.replace(placeholder, arn)
    return text


def ad_hoc_machine_name(settings: InboxSettings, definition: str) -> str:
    return settings.ad_hoc_prefix + hashlib.sha256(definition.encode("utf-8")).hexdigest()[:AD_HOC_HASH_HEX]


def _ad_hoc_machine(executions: Executions, settings: InboxSettings, compiled: CompiledMachine) -> str:
    definition = ad_hoc_definition(settings, compiled)
    name = ad_hoc_machine_name(settings, definition)
    try:
        return executions.create_machine(name, definition, role_arn=settings.ad_hoc_role_arn,
                                         log_group_arn=settings.ad_hoc_log_group_arn)
    except MachineAlreadyExists:
        # Same name = same definition (content-addressed): reuse it, whatever else differs.
        return executions.machine_arn(name, settings.ad_hoc_role_arn)


# ------------------------------------------------------------------------------------------------ rejection
def _reject(engine: Engine, bucket: str, key: str, problems: list[Problem]) -> InboxResult:
    errors = [p.to_json() for p in problems if p.severity == "error"] or [p.to_json() for p in problems]
    rejected = rejected_key_for(key)
    doc = {"key": key, "errors": errors,
           "rejected_at": utc_now()}
    engine.store.put(f"s3://{bucket}/{rejected}", json.dumps(doc, indent=2).encode("utf-8"))
    return InboxResult("rejected", key, rejected_key=rejected, errors=errors)

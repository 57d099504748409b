"""The twin is the deployed stack: the synthesized template compared, resource by resource, with what `serve`
deploys on moto for the same specs (read back through boto3 from the running twin). Every difference found must
be one the twin declares on purpose (`local.embedded_stack.TWIN_DIFFERENCES`, each with its reason); an
undeclared one fails, naming the resource, the setting and both values.

Compared: each function's handler, timeout, memory, reserved concurrency and environment; each state machine's
name, type, logging (level, execution data, log group and its retention), tracing and definition; the engine
bucket's versioning, lifecycle rules and EventBridge notifications; every event rule's EventPattern and target;
the catalog's machine map."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from infra_support import REPO_ROOT, Synth

from npa_workflow.local.embedded_stack import (
    LOCAL_BUCKET,
    LOCAL_LEDGER_TABLE,
    MACHINE_ARN_PREFIX,
    TWIN_DIFFERENCES,
    function_name,
)
from npa_workflow.protocol import environment as env
from npa_workflow.protocol import functions as function_table
from npa_workflow.protocol.deployment import CATALOG_MACHINES_FILE, CATALOG_PREFIX, POWERTOOLS_SERVICE_NAME

ACCOUNT, REGION = "123456789012", "us-east-1"  # moto's
SPECS = REPO_ROOT / "specs"

# Which declared difference explains a difference of (kind, setting); `None` as the setting: any setting of kind.
EXPLAINED_BY: dict[tuple[str, str | None], str] = {
    ("env", POWERTOOLS_SERVICE_NAME): f"{POWERTOOLS_SERVICE_NAME} (functions)",
    ("env", env.EXECUTOR): "NPA_WORKFLOW_EXECUTOR",
    ("env", env.SKYPILOT_TOKEN_SECRET_ARN): "SKYPILOT_TOKEN_SECRET_ARN",
    ("env", env.SKYPILOT_ENDPOINT): "SKYPILOT_API_SERVER_ENDPOINT",
    ("env", env.WATCH_INTERVAL_SECONDS): "NPA_WORKFLOW_WATCH_INTERVAL_SECONDS / watch schedule",
    ("rule", "ScheduleExpression"): "NPA_WORKFLOW_WATCH_INTERVAL_SECONDS / watch schedule",
    ("definition", "a trigger's bound"): "NPA_WORKFLOW_WATCH_INTERVAL_SECONDS / watch schedule",
    ("env", env.ALLOW_AD_HOC): "allowAdHocSpecs (serve)",
    ("env", env.AD_HOC_MACHINE_PREFIX): "allowAdHocSpecs (serve)",
    ("env", env.AD_HOC_ROLE_ARN): "allowAdHocSpecs (serve)",
    ("env", env.AD_HOC_LOG_GROUP_ARN): "allowAdHocSpecs (serve)",
    **{("env", fn.arn_env): "allowAdHocSpecs (serve)" for fn in function_table.MACHINE_INVOKED},
    ("function log group", None): "function log groups",
}


# ------------------------------------------------------------------------------------------------ the twin
@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`serve` of the repository's specs/ (what the default synth deploys), running; boto3 clients on it."""
    import boto3

    from npa_workflow.local.serve import Serve, ServeOptions

    endpoint: list[str] = []
    serve = Serve(ServeOptions(catalog=SPECS / "tools.yaml", home=tmp_path_factory.mktemp("twin-home")),
                  on_endpoint=endpoint.append)
    thread = threading.Thread(target=serve.serve, name="twin", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not endpoint and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert endpoint, "serve did not start"
    session = boto3.session.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    clients = {name: session.client(name, endpoint_url=endpoint[0])
               for name in ("lambda", "stepfunctions", "s3", "logs", "events")}
    try:
        yield clients
    finally:
        serve.stop()
        thread.join(timeout=60)


# ------------------------------------------------------------------------------------------------ the template
class Resolver:
    """The template's values with its references replaced by what the twin names them (moto's account and region,
    the twin's table, bucket and functions): then equal values are equal settings."""

    def __init__(self, synth: Synth, twin_function_arns: dict[str, str]) -> None:
        self.resources = synth.template["Resources"]
        self.names: dict[str, str] = {}
        self.arns: dict[str, str] = {}
        for lid, resource in self.resources.items():
            kind, props = resource["Type"], resource.get("Properties", {})
            if kind == "AWS::DynamoDB::Table":
                self.names[lid] = LOCAL_LEDGER_TABLE
            elif kind == "AWS::S3::Bucket" and "NotificationConfiguration" in props:
                self.names[lid] = LOCAL_BUCKET
            elif kind == "AWS::Lambda::Function" and _handlers().get(props.get("Handler")) in twin_function_arns:
                self.arns[lid] = twin_function_arns[_handlers()[props["Handler"]]]
            elif kind == "AWS::Logs::LogGroup" and "LogGroupName" in props:
                name = props["LogGroupName"]
                self.arns[lid] = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*"

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            ref = value["Ref"]
            pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT,
                      "AWS::URLSuffix": "amazonaws.com"}
            return pseudo.get(ref) or self.names.get(ref) or f"<{self.resources[ref]['Type']}>"
        if set(value) == {"Fn::GetAtt"}:
            lid, attribute = value["Fn::GetAtt"]
            if attribute == "Arn" and lid in self.arns:
                return self.arns[lid]
            return f"<{self.resources[lid]['Type']}.{attribute}>"
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(self(p)) for p in parts)
        return {k: self(v) for k, v in value.items()}


def _handlers() -> dict[str, str]:
    return {fn.handler: fn.name for fn in function_table.FUNCTIONS}


def _of_type(synth: Synth, kind: str) -> dict[str, dict[str, Any]]:
    return {lid: r.get("Properties", {}) for lid, r in synth.template["Resources"].items() if r["Type"] == kind}


# ------------------------------------------------------------------------------------------------ differences
class Differences:
    def __init__(self) -> None:
        self.found: list[tuple[str, str, str, Any, Any]] = []  # (kind, resource, setting, template, twin)

    def compare(self, kind: str, resource: str, setting: str, template: Any, twin: Any) -> None:
        if template != twin:
            self.found.append((kind, resource, setting, template, twin))

    def undeclared(self) -> list[str]:
        lines = []
        for kind, resource, setting, template, twin in self.found:
            reason = EXPLAINED_BY.get((kind, setting)) or EXPLAINED_BY.get((kind, None))
            if reason is None or reason not in TWIN_DIFFERENCES:
                lines.append(f"{kind} {resource}: {setting}: template {template!r}, twin {twin!r}")
        return lines

    def declared(self) -> set[str]:
        return {EXPLAINED_BY.get((k, s)) or EXPLAINED_BY.get((k, None)) or "" for k, _, s, _, _ in self.found}


def _compare_functions(synth: Synth, twin: dict[str, Any], resolve: Resolver, diff: Differences) -> None:
    functions = {_handlers()[p["Handler"]]: p for p in _of_type(synth, "AWS::Lambda::Function").values()
                 if p.get("Handler") in _handlers()}
    assert sorted(functions) == sorted(function_table.NAMES)
    for name, props in functions.items():
        config = twin["lambda"].get_function_configuration(FunctionName=function_name(function_table.slot(name)))
        for setting, template_value, twin_value in (
            ("Handler", props["Handler"], config["Handler"]),
            ("Timeout", props["Timeout"], config["Timeout"]),
            ("MemorySize", props["MemorySize"], config["MemorySize"]),
        ):
            diff.compare("function", name, setting, template_value, twin_value)
        concurrency = twin["lambda"].get_function_concurrency(FunctionName=config["FunctionName"])
        diff.compare("function", name, "ReservedConcurrentExecutions", props.get("ReservedConcurrentExecutions"),
                     concurrency.get("ReservedConcurrentExecutions"))
        template_env = resolve(props.get("Environment", {}).get("Variables", {}))
        twin_env = config.get("Environment", {}).get("Variables", {})
        for key in sorted(set(template_env) | set(twin_env)):
            diff.compare("env", name, key, template_env.get(key), twin_env.get(key))
        if "LoggingConfig" in props:
            diff.compare("function log group", name, "LoggingConfig.LogGroup", "a log group", None)


def _definition_paths(template: Any, twin: Any, path: str = "") -> list[str]:
    """The paths where two definitions differ."""
    if isinstance(template, dict) and isinstance(twin, dict):
        return [p for key in sorted(set(template) | set(twin))
                for p in _definition_paths(template.get(key), twin.get(key), f"{path}.{key}")]
    return [] if template == twin else [path]


def _compare_machines(synth: Synth, twin: dict[str, Any], resolve: Resolver, diff: Differences) -> None:
    machines = _of_type(synth, "AWS::StepFunctions::StateMachine")
    log_groups = {p["LogGroupName"]: p for p in _of_type(synth, "AWS::Logs::LogGroup").values() if "LogGroupName" in p}
    listed = {m["name"]: m["stateMachineArn"] for m in twin["stepfunctions"].list_state_machines()["stateMachines"]}
    arns = {fn.name: resolve.arns[lid] for lid, fn in _function_ids(synth).items()}
    for spec_name, machine in synth.stack.workflows.machines.items():
        props = machines[synth.logical_id(machine)]
        name = props["StateMachineName"]
        assert name in listed, f"the twin has no machine {name!r} (it has {sorted(listed)})"
        described = twin["stepfunctions"].describe_state_machine(stateMachineArn=listed[name])
        diff.compare("machine", name, "StateMachineType", props["StateMachineType"], described["type"])
        logging = resolve(props["LoggingConfiguration"])
        twin_logging = described.get("loggingConfiguration", {})
        diff.compare("machine", name, "Level", logging["Level"], twin_logging.get("level"))
        diff.compare("machine", name, "IncludeExecutionData", logging["IncludeExecutionData"],
                     twin_logging.get("includeExecutionData"))
        template_group = logging["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]
        twin_group = twin_logging.get("destinations", [{}])[0].get("cloudWatchLogsLogGroup", {}).get("logGroupArn")
        diff.compare("machine", name, "LogGroupArn", template_group, twin_group)
        group_name = template_group.split(":log-group:", 1)[1].removesuffix(":*")
        found = twin["logs"].describe_log_groups(logGroupNamePrefix=group_name)["logGroups"]
        diff.compare("machine log group", group_name, "RetentionInDays", log_groups[group_name]["RetentionInDays"],
                     found[0].get("retentionInDays") if found else None)
        diff.compare("machine", name, "TracingConfiguration", props["TracingConfiguration"]["Enabled"],
                     described.get("tracingConfiguration", {}).get("enabled"))
        template_definition = synth.definition(machine)
        twin_text = described["definition"]
        for fn in function_table.MACHINE_INVOKED:
            twin_text = twin_text.replace(arns[fn.name], fn.placeholder)
        twin_definition = json.loads(twin_text)
        for path in _definition_paths(template_definition, twin_definition):
            # A trigger's bound is maxPolls × the longer of pollSeconds and the watch tick: its Task's TimeoutSeconds
            # and the deadline its cleanup is told differ, and nothing else may.
            setting = "a trigger's bound" if _in_trigger_state(template_definition, path) else path
            diff.compare("definition", spec_name, setting, _at(template_definition, path), _at(twin_definition, path))


def _at(definition: dict[str, Any], path: str) -> Any:
    node: Any = definition
    for part in path.strip(".").split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _in_trigger_state(definition: dict[str, Any], path: str) -> bool:
    """A `TimeoutSeconds` / `timeoutSeconds` under a top-level state whose Task invokes the trigger function."""
    parts = path.strip(".").split(".")
    if parts[-1].lower() != "timeoutseconds" or len(parts) < 2 or parts[0] != "States":
        return False
    return function_table.TRIGGER.placeholder in json.dumps(definition["States"].get(parts[1], {}))


def _function_ids(synth: Synth) -> dict[str, function_table.FunctionSlot]:
    return {lid: function_table.slot(_handlers()[p["Handler"]])
            for lid, p in _of_type(synth, "AWS::Lambda::Function").items() if p.get("Handler") in _handlers()}


def _lifecycle(rules: list[dict[str, Any]], cfn: bool) -> list[tuple[Any, ...]]:
    """Lifecycle rules in one shape: CloudFormation's (`ExpirationInDays`, `Prefix`) or S3's (`Expiration.Days`)."""
    shaped = []
    for r in rules:
        if cfn:
            shaped.append((r["Id"], r.get("Prefix", ""), r.get("ExpirationInDays"),
                           r.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays"),
                           bool(r.get("ExpiredObjectDeleteMarker")),
                           r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation"), r["Status"]))
        else:
            shaped.append((r["ID"], r.get("Filter", {}).get("Prefix", r.get("Prefix", "")),
                           r.get("Expiration", {}).get("Days"),
                           r.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays"),
                           bool(r.get("Expiration", {}).get("ExpiredObjectDeleteMarker")),
                           r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation"), r["Status"]))
    return sorted(shaped)


def _compare_bucket(synth: Synth, twin: dict[str, Any], diff: Differences) -> None:
    props = synth.template["Resources"][synth.logical_id(synth.stack.storage.bucket)]["Properties"]
    s3 = twin["s3"]
    diff.compare("bucket", LOCAL_BUCKET, "Versioning", props["VersioningConfiguration"]["Status"],
                 s3.get_bucket_versioning(Bucket=LOCAL_BUCKET).get("Status"))
    diff.compare("bucket", LOCAL_BUCKET, "LifecycleRules", _lifecycle(props["LifecycleConfiguration"]["Rules"], True),
                 _lifecycle(s3.get_bucket_lifecycle_configuration(Bucket=LOCAL_BUCKET)["Rules"], False))
    # moto 5's GetBucketNotificationConfiguration leaves EventBridgeConfiguration out of its answer (it keeps it,
    # and sends its own EventBridge events by it): read the bucket's configuration where moto keeps it (the twin's
    # moto runs in this process).
    from moto.backends import get_backend

    configured = get_backend("s3")[ACCOUNT]["aws"].get_bucket(LOCAL_BUCKET).notification_configuration
    diff.compare("bucket", LOCAL_BUCKET, "EventBridgeEnabled",
                 props["NotificationConfiguration"]["EventBridgeConfiguration"]["EventBridgeEnabled"],
                 configured is not None and configured.event_bridge is not None)


def _compare_rules(synth: Synth, twin: dict[str, Any], resolve: Resolver, diff: Differences) -> None:
    events = twin["events"]
    twin_rules = {r["Description"]: r for r in events.list_rules()["Rules"]}
    function_ids = _function_ids(synth)
    for lid, props in _of_type(synth, "AWS::Events::Rule").items():
        description = props["Description"]
        target = function_ids[props["Targets"][0]["Arn"]["Fn::GetAtt"][0]].name
        if "ScheduleExpression" in props:
            diff.compare("rule", lid, "ScheduleExpression", props["ScheduleExpression"], None)
            continue
        rule = twin_rules.get(description)
        diff.compare("rule", lid, "exists", True, rule is not None)
        if rule is None:
            continue
        diff.compare("rule", rule["Name"], "EventPattern", resolve(props["EventPattern"]),
                     json.loads(rule["EventPattern"]))
        targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
        diff.compare("rule", rule["Name"], "Target", resolve.arns[props["Targets"][0]["Arn"]["Fn::GetAtt"][0]],
                     targets[0]["Arn"] if targets else None)
        assert target == targets[0]["Id"]


def _compare_catalog(synth: Synth, twin: dict[str, Any], diff: Differences) -> None:
    from npa_workflow.protocol.deployment import machines_document

    body = twin["s3"].get_object(Bucket=LOCAL_BUCKET, Key=CATALOG_PREFIX + CATALOG_MACHINES_FILE)["Body"].read()
    diff.compare("catalog", CATALOG_MACHINES_FILE, "machines", machines_document(synth.stack.workflows.names),
                 body.decode())


# ------------------------------------------------------------------------------------------------ the tests
def test_the_twin_deploys_what_the_template_does_but_for_the_declared_differences(
        default_synth: Synth, twin: dict[str, Any]) -> None:
    function_arns = {fn.name: twin["lambda"].get_function_configuration(FunctionName=function_name(fn))["FunctionArn"]
                     for fn in function_table.FUNCTIONS}
    resolve = Resolver(default_synth, function_arns)
    diff = Differences()
    _compare_functions(default_synth, twin, resolve, diff)
    _compare_machines(default_synth, twin, resolve, diff)
    _compare_bucket(default_synth, twin, diff)
    _compare_rules(default_synth, twin, resolve, diff)
    _compare_catalog(default_synth, twin, diff)
    undeclared = diff.undeclared()
    assert not undeclared, "the twin differs from the template where it declares no difference:\n" + "\n".join(
        undeclared)
    # The comparison saw the differences serve does make (a declaration nothing exercises would be stale here).
    assert {"NPA_WORKFLOW_EXECUTOR", "allowAdHocSpecs (serve)",
            "NPA_WORKFLOW_WATCH_INTERVAL_SECONDS / watch schedule"} <= diff.declared()


def test_the_machine_arn_prefix_the_twin_gives_the_inbox_is_the_templates(default_synth: Synth) -> None:
    inbox = next(p for p in _of_type(default_synth, "AWS::Lambda::Function").values()
                 if p.get("Handler") == function_table.INBOX_FN.handler)
    resolve = Resolver(default_synth, {})
    assert resolve(inbox["Environment"]["Variables"][env.MACHINE_ARN_PREFIX]) == MACHINE_ARN_PREFIX


def test_every_declared_difference_has_a_reason() -> None:
    assert all(reason.strip() for reason in TWIN_DIFFERENCES.values())
    assert set(EXPLAINED_BY.values()) <= set(TWIN_DIFFERENCES), set(EXPLAINED_BY.values()) - set(TWIN_DIFFERENCES)

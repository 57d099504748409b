"""What the IAM conformance test needs: record every AWS call, say who made it, and ask a policy evaluator whether
that caller's synthesized role allows it.

- Recording: every botocore client created while `Recorder` is active gets a `provide-client-params.*.*` hook
  (botocore's event system: it fires for each API call, with the operation model and the caller's parameters).
- Attribution: the function whose handler is running on this thread (`Recorder.acting_as`, entered by the handler
  wrappers below and by the test around a handler it calls itself), carried into the work a handler hands to a
  `ThreadPoolExecutor` (the watch pass is concurrent). A call with no function on its thread is the
  state machine's own (moto's interpreter invoking a Task's Lambda) when it is `lambda:Invoke`; anything else is
  reported as unattributed, so a call from a thread a handler started is never silently skipped.
- Evaluation: moto's IAM policy evaluator (`moto.iam.access_control.IAMPolicy`) on the role's policies from the
  synthesized template, with every CloudFormation reference resolved to the names this test's moto account uses.
  The request context a condition reads is given where AWS gives it (`CONTEXT`: PassRole's `iam:PassedToService`).
  moto's evaluator answers DENIED for an Allow statement whose Condition does not hold, where IAM just does not
  apply it: `allowed` evaluates statement by statement and reads that answer as "not applicable". KMS is never
  called by the functions themselves: S3 and Secrets Manager decrypt on their behalf, so a test gives the
  `kms:Decrypt` check with the `kms:ViaService` AWS sends.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"
PSEUDO = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}
MACHINE = "state machine"  # the caller of a Task's lambda:Invoke


@dataclass(frozen=True)
class Call:
    caller: str  # a function name, MACHINE, or "" (unattributed)
    service: str  # the IAM prefix (botocore's signing name)
    operation: str
    params: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.caller or '<unattributed>'}: {self.service}:{self.operation}"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def acting_as(self, caller: str) -> Iterator[None]:
        previous = getattr(self._local, "caller", "")
        self._local.caller = caller
        try:
            yield
        finally:
            self._local.caller = previous

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        caller = getattr(self._local, "caller", "")
        if caller == "test":
            return
        service = model.service_model.signing_name
        if not caller and (service, model.name) == ("lambda", "Invoke"):
            caller = MACHINE
        with self._lock:
            self.calls.append(Call(caller, service, model.name, dict(params)))

    @contextlib.contextmanager
    def active(self) -> Iterator[Recorder]:
        from concurrent.futures import ThreadPoolExecutor

        import botocore.session

        original = botocore.session.Session.create_client
        original_submit = ThreadPoolExecutor.submit
        recorder = self
        self.calls = []  # one recording per activation

        def submit(pool: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            caller = getattr(recorder._local, "caller", "")

            def as_caller(*a: Any, **kw: Any) -> Any:
                with recorder.acting_as(caller):
                    return fn(*a, **kw)

            return original_submit(pool, as_caller, *args, **kwargs)

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            client.meta.events.register("provide-client-params.*.*", recorder._record)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]
        try:
            yield self
        finally:
            botocore.session.Session.create_client = original  # type: ignore[method-assign]
            ThreadPoolExecutor.submit = original_submit  # type: ignore[method-assign]


# ---------------------------------------------------------------------------------------------- call → (action, ARN)
def _s3(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    bucket = f"arn:aws:s3:::{p['Bucket']}"
    if op in ("ListObjectsV2", "ListObjects"):
        return [("s3:ListBucket", bucket)]
    if op == "ListObjectVersions":
        return [("s3:ListBucketVersions", bucket)]
    obj = f"{bucket}/{p['Key']}"
    if op in ("GetObject", "HeadObject"):
        return [("s3:GetObjectVersion" if p.get("VersionId") else "s3:GetObject", obj)]
    if op in ("PutObject", "DeleteObject"):
        return [(f"s3:{op}", obj)]
    raise KeyError(op)


def _dynamodb(op: str, p: dict[str, Any]) -> list[tuple[str, str]]:
    def table(name: str) -> str:
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"

    if op == "TransactWriteItems":  # IAM checks the action of each item on its table
        kinds = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                 "ConditionCheck": "ConditionCheckItem"}
        return [(f"dynamodb:{kinds[k]}", table(v["TableName"])) for item in p["TransactItems"] for k, v in item.items()]
    if op == "BatchWriteItem":
        return [("dynamodb:BatchWriteItem", table(name)) for name in p["RequestItems"]]
    arn = table(p["TableName"])
    if op == "Query" and p.get("IndexName"):
        arn += f"/index/{p['IndexName']}"
    return [(f"dynamodb:{op}", arn)]


def _states(op: str, p: dict[str, Any], token_machines: Callable[[str], str]) -> list[tuple[str, str]]:
    if op in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"):
        # AWS authorizes these against the state machine of the token's execution.
        return [(f"states:{op}", token_machines(p["taskToken"]))]
    if op in ("StartExecution", "DescribeStateMachine", "UpdateStateMachine"):
        return [(f"states:{op}", p["stateMachineArn"])]
    if op in ("DescribeExecution", "StopExecution", "GetExecutionHistory", "RedriveExecution"):
        return [(f"states:{op}", p["executionArn"])]
    if op == "CreateStateMachine":
        # CreateStateMachine also checks that the caller may pass the machine's role to Step Functions and, with a
        # logging configuration, that it holds the CloudWatch Logs log-delivery actions (which take no resource).
        checks = [(f"states:{op}", f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{p['name']}"),
                  ("iam:PassRole", p["roleArn"])]
        if p.get("loggingConfiguration"):
            checks += [(action, "*") for action in ("logs:CreateLogDelivery", "logs:GetLogDelivery",
                                                    "logs:UpdateLogDelivery", "logs:ListLogDeliveries",
                                                    "logs:PutResourcePolicy", "logs:DescribeResourcePolicies",
                                                    "logs:DescribeLogGroups")]
        return checks
    raise KeyError(op)


def authorizations(call: Call, token_machines: Callable[[str], str],
                   secret_arns: Callable[[str], str]) -> list[tuple[str, str]]:
    """The (IAM action, resource ARN) pairs AWS checks for `call`."""
    p = call.params
    if call.service == "s3":
        return _s3(call.operation, p)
    if call.service == "dynamodb":
        return _dynamodb(call.operation, p)
    if call.service == "states":
        return _states(call.operation, p, token_machines)
    if call.service == "secretsmanager" and call.operation == "GetSecretValue":
        return [("secretsmanager:GetSecretValue", secret_arns(p["SecretId"]))]
    if call.service == "lambda" and call.operation == "Invoke":
        name = p["FunctionName"]
        arn = name if name.startswith("arn:") else f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        return [("lambda:InvokeFunction", arn)]
    raise KeyError(f"{call.service}:{call.operation}")


# ---------------------------------------------------------------------------------------------- template → policies
class Resolver:
    """CloudFormation values of a synthesized template → the strings they are in this test's moto account."""

    def __init__(self, template: dict[str, Any], names: dict[str, str]) -> None:
        self.resources = template["Resources"]
        self.names = names  # logical id → physical name (Ref), for the resources the scenario created

    def _name(self, logical_id: str) -> str:
        """The scenario's name for it, else the name the template gives it, else its logical id."""
        props = self.resources[logical_id].get("Properties", {})
        given = props.get("LogGroupName") or props.get("StateMachineName")
        return self.names.get(logical_id) or (given if isinstance(given, str) else logical_id)

    def ref(self, logical_id: str) -> str:
        if logical_id in PSEUDO:
            return PSEUDO[logical_id]
        kind = self.resources[logical_id]["Type"]
        name = self._name(logical_id)
        if kind == "AWS::StepFunctions::StateMachine":
            return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
        return name  # buckets, tables, functions: their name; secrets: their ARN (given in `names`)

    def attr(self, logical_id: str, attribute: str) -> str:
        kind = self.resources[logical_id]["Type"]
        name = self._name(logical_id)
        arns = {
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
            "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
        }
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        return f"<{logical_id}.{attribute}>"

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if not isinstance(node, dict):
            return node
        if "Ref" in node:
            return self.ref(node["Ref"])
        if "Fn::GetAtt" in node:
            return self.attr(*node["Fn::GetAtt"])
        if "Fn::Join" in node:
            sep, parts = node["Fn::Join"]
            return sep.join(str(self.value(p)) for p in parts)
        if "Fn::Sub" in node and isinstance(node["Fn::Sub"], str):
            text = node["Fn::Sub"]
            for key, value in PSEUDO.items():
                text = text.replace("${" + key + "}", value)
            return text
        return {k: self.value(v) for k, v in node.items()}

    def role_policies(self, role_logical_id: str) -> list[dict[str, Any]]:
        return [
            self.value(r["Properties"]["PolicyDocument"])
            for r in self.resources.values()
            if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_logical_id} in r["Properties"]["Roles"]
        ]


# The request context AWS gives a condition key for an action (the only ones this template's conditions use).
CONTEXT = {"iam:PassRole": {"iam:PassedToService": "states.amazonaws.com"}}


def _one_character_wildcards(statement: dict[str, Any]) -> dict[str, Any]:
    """IAM's `?` matches one character (CDK grants a partial secret ARN as `<arn>-??????`); moto turns a pattern into
    a regular expression with only `*` translated, where `?` is a quantifier: give it `.`, one character."""
    resources = statement.get("Resource")
    if resources is None:
        return statement
    listed = resources if isinstance(resources, list) else [resources]
    return {**statement, "Resource": [r.replace("?", ".") if isinstance(r, str) else r for r in listed]}


def allowed(policies: list[dict[str, Any]], action: str, resource: str,
            context: dict[str, str] | None = None) -> bool:
    """moto's IAM evaluator over the role's identity policies: some statement allows, none denies. `context`: the
    request's condition keys where the call gives them (else `CONTEXT`'s for the action)."""
    from moto.iam.access_control import IAMPolicy, PermissionResult

    context = context or CONTEXT.get(action)
    results = []
    for doc in policies:
        statements = doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
        for statement in statements:
            one = {"Version": doc.get("Version", "2012-10-17"), "Statement": [_one_character_wildcards(statement)]}
            result = IAMPolicy(json.dumps(one)).is_action_permitted(action, resource,
                                                                    incoming_condition_values=context)
            if result == PermissionResult.DENIED and statement.get("Effect") == "Allow":
                # moto answers DENIED for an Allow whose Condition does not hold; IAM simply does not apply it
                # (e.g. the watch's kms:Decrypt via S3 statement, asked about a decrypt via Secrets Manager).
                result = PermissionResult.NEUTRAL
            results.append(result)
    return PermissionResult.DENIED not in results and PermissionResult.PERMITTED in results


# ---------------------------------------------------------------------------------------------- handler wrappers
# The Lambda handlers moto runs in-process for a Task (`Handler: iam_conformance.<name>`): the real handler, its
# calls attributed to its function.
RECORDER = Recorder()


def _wrapped(name: str) -> Callable[[Any, Any], Any]:
    def handler(event: Any, context: Any) -> Any:
        import importlib

        real = importlib.import_module(f"functions.{name}.handler").handler
        with RECORDER.acting_as(name):
            return real(event, context)

    return handler


launch = _wrapped("launch")
decide = _wrapped("decide")
trigger = _wrapped("trigger")
cleanup = _wrapped("cleanup")

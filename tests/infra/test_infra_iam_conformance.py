"""IAM conformance: every AWS call each function (and the state machine) makes during a run is allowed by that
caller's role in the synthesized template, action and resource, as moto's IAM policy evaluator decides.

The run is the cloud's path on a local AWS: a run request naming the deployed `fanout` spec, with a var that makes
its last step fail, is uploaded to `inbox/` of a versioned engine bucket; the inbox handler gets S3's "Object
Created" event, reads the deployed spec from `catalog/` and starts the deployed machine (the synthesized definition,
named as the stack names it, its Tasks invoking functions named by their logical ids); moto's interpreter runs it and
invokes launch and cleanup in-process; the watch handler ticks until the run ends (tokens succeed, then fail);
reap gets the execution's status change; trigger gets an S3 event. Jobs are real subprocesses (the local executor:
the SkyPilot executor's secret read is not exercised here). A missing grant fails this test before `cdk deploy`
would.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from deadlines import deadline as scaled
from iam_conformance import ACCOUNT, MACHINE, RECORDER, REGION, Resolver, allowed, authorizations
from infra_support import (
    DATA_KEY_ARN,
    REPO_ROOT,
    SECRET_ARN,
    STEP_SECRETS_ARN,
    STEP_SECRETS_KEY_ARN,
    TOKEN_KEY_ARN,
    Synth,
)

from npa_workflow import wiring
from npa_workflow.embedded_aws.moto_lambda import LambdaContext
from npa_workflow.protocol import environment
from npa_workflow.protocol import functions as function_table

SPEC = "fanout"
BUCKET = "engine-bucket"
TABLE = "ledger"
TASK_FUNCTIONS = tuple(slot.name for slot in function_table.MACHINE_INVOKED)
pytestmark = pytest.mark.e2e


def _context(name: str) -> LambdaContext:
    return LambdaContext(function_name=name, function_version="$LATEST",
                         invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
                         memory_limit_in_mb=512, timeout_seconds=120, log_group_name=f"/aws/lambda/{name}")


def _object_created(key: str, version_id: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"key": key, "size": 1, "etag": "e", "sequencer": "01"}
    if version_id:
        obj["version-id"] = version_id
    return {"version": "0", "id": f"e-{key}", "detail-type": "Object Created", "source": "aws.s3",
            "account": ACCOUNT, "time": "2026-01-01T00:00:00Z", "region": REGION,
            "resources": [f"arn:aws:s3:::{BUCKET}"],
            "detail": {"version": "0", "bucket": {"name": BUCKET}, "object": obj, "request-id": "r",
                       "requester": ACCOUNT, "reason": "PutObject"}}


def _deploy(synth: Synth, clients: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The synthesized stack's pieces this run needs, in moto, under the names the resolver gives them."""
    stack = synth.stack
    s3 = clients["s3"]
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    wiring.engine_from_environment().ledger.create_table()
    role = clients["iam"].create_role(RoleName="moto-needs-a-role", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                "Principal": {"Service": "lambda.amazonaws.com"}}]}))["Role"]["Arn"]
    arns = {}
    for name in TASK_FUNCTIONS:
        logical_id = synth.logical_id(stack.engine.functions[name])
        arns[name] = clients["lambda"].create_function(
            FunctionName=logical_id, Runtime="python3.11", Role=role, Handler=f"iam_conformance.{name}",
            Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18}, Timeout=900)["FunctionArn"]
    machine = stack.workflows.machines[SPEC]
    text = synth.definition_text(machine)
    for slot in function_table.MACHINE_INVOKED:
        text = text.replace(slot.placeholder, arns[slot.name])
    machine_arn = clients["stepfunctions"].create_state_machine(
        name=stack.workflows.names[SPEC], definition=text, roleArn=role, type="STANDARD")["stateMachineArn"]
    # What the catalog deployment publishes, from the synthesized asset.
    root = synth.outdir / stack.catalog.asset.asset_path
    for path in root.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket=BUCKET, Key="catalog/" + path.relative_to(root).as_posix(), Body=path.read_bytes())
    return machine_arn, arns


def _inbox_environment(synth: Synth) -> dict[str, str]:
    fn = synth.template["Resources"][synth.logical_id(synth.stack.engine.functions["inbox"])]
    resolver = Resolver(synth.template, {})
    keep = ("NPA_WORKFLOW_MACHINE_ARN_PREFIX", "NPA_WORKFLOW_ALLOW_AD_HOC", "NPA_WORKFLOW_HEARTBEAT_SECONDS",
            "NPA_WORKFLOW_MAX_WAIT_SECONDS", "NPA_WORKFLOW_WATCH_INTERVAL_SECONDS")
    return {k: str(resolver.value(v)) for k, v in fn["Properties"]["Environment"]["Variables"].items() if k in keep}


@pytest.mark.timeout(180)
def test_every_call_of_a_run_is_allowed_by_the_callers_synthesized_role(
    default_synth: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from functions.inbox.handler import handler as inbox_handler
    from functions.reap.handler import handler as reap_handler
    from functions.trigger.handler import handler as trigger_handler
    from functions.watch.handler import handler as watch_handler
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes
    from npa_workflow.embedded_aws.moto_lambda import in_process_lambdas
    from npa_workflow.embedded_aws.moto_server import start_moto_server

    synth = default_synth
    stack = synth.stack
    server = start_moto_server()
    try:
        env = {**server.client_env(REGION), environment.LEDGER_TABLE: TABLE, environment.BUCKET: BUCKET,
               environment.EXECUTOR: "local", environment.LOCAL_STATE_DIR: str(tmp_path / "jobs"),
               "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_TRACE_DISABLED": "true",
               **_inbox_environment(synth)}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(REPO_ROOT / "specs")  # steps of inbox-started runs run where their spec lives
        wiring.clear_cache()
        with RECORDER.active(), moto_fixes(), in_process_lambdas(apply_function_env=False):
            with RECORDER.acting_as("test"):
                session = boto3.session.Session(region_name=REGION)
                clients = {n: session.client(n) for n in ("s3", "iam", "lambda", "stepfunctions")}
                machine_arn, _ = _deploy(synth, clients)
                request = {"apiVersion": "npa.workflow.run/v1", "spec": SPEC, "vars": {"step_fail": "simulated"}}
                put = clients["s3"].put_object(Bucket=BUCKET, Key="inbox/request.yaml", Body=json.dumps(request))
            with RECORDER.acting_as("inbox"):
                started = inbox_handler(_object_created("inbox/request.yaml", put["VersionId"]), _context("inbox"))
            # The deployed machine, found through catalog/machines.json and the ARN prefix in the environment.
            assert started["status"] == "started" and started["machine"] == "deployed", started
            assert started["machine_arn"] == machine_arn
            status, deadline = "RUNNING", time.monotonic() + scaled(120)
            while status == "RUNNING" and time.monotonic() < deadline:
                with RECORDER.acting_as("watch"):
                    watch_handler({"id": "tick", "source": "aws.events"}, _context("watch"))
                with RECORDER.acting_as("test"):
                    status = clients["stepfunctions"].describe_execution(
                        executionArn=started["execution_arn"])["status"]
                time.sleep(0.3)
            assert status == "FAILED", status
            change = {"version": "0", "id": "e-end", "detail-type": "Step Functions Execution Status Change",
                      "source": "aws.states", "account": ACCOUNT, "time": "2026-01-01T00:00:00Z", "region": REGION,
                      "resources": [started["execution_arn"]],
                      "detail": {"executionArn": started["execution_arn"], "stateMachineArn": machine_arn,
                                 "name": started["run_id"], "status": status,
                                 "input": json.dumps({"run": {"run_id": started["run_id"], "bucket": BUCKET}})}}
            with RECORDER.acting_as("reap"):
                reap_handler(change, _context("reap"))
            with RECORDER.acting_as("trigger"):
                trigger_handler(_object_created("landing/a.csv"), _context("trigger"))
    finally:
        wiring.clear_cache()
        server.stop()

    names = {synth.logical_id(stack.storage.bucket): BUCKET, synth.logical_id(stack.storage.table): TABLE}
    resolver = Resolver(synth.template, names)
    roles = {name: synth.logical_id(role) for name, role in stack.engine.roles.items()}
    roles[MACHINE] = synth.logical_id(stack.workflows.roles[SPEC])
    policies = {caller: resolver.role_policies(role) for caller, role in roles.items()}

    calls = RECORDER.calls
    unattributed = [str(c) for c in calls if not c.caller]
    assert not unattributed, unattributed
    denied = []
    for call in calls:
        # Every token of this run belongs to an execution of the one machine.
        for action, resource in authorizations(call, lambda _token: machine_arn, lambda secret: secret):
            if not allowed(policies[call.caller], action, resource):
                denied.append(f"{call.caller}: {action} on {resource}")
    assert not denied, sorted(set(denied))
    # The run went through every kind of caller (else this test would prove little).
    made = {(c.caller, f"{c.service}:{c.operation}") for c in calls}
    for expected in [("inbox", "states:StartExecution"), ("inbox", "states:DescribeStateMachine"),
                     ("inbox", "s3:GetObject"), ("launch", "dynamodb:PutItem"), ("watch", "states:SendTaskSuccess"),
                     ("watch", "states:SendTaskFailure"), ("watch", "s3:HeadObject"), (MACHINE, "lambda:Invoke"),
                     ("cleanup", "dynamodb:Query"), ("reap", "dynamodb:Query"), ("trigger", "dynamodb:Query")]:
        assert expected in made, (expected, sorted(made))


def test_each_function_given_the_token_secret_may_read_it(default_synth: Synth,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The SkyPilot executor reads its token at construction (`SkyPilotApi.from_environment`) from the secret the
    stack names in the function's environment: every function the stack gives that variable must be allowed to
    read it, and the SkyPilot-free functions are given neither."""
    from moto import mock_aws

    from npa_workflow.adapters.skypilot_api import SkyPilotApi

    synth = default_synth
    stack = synth.stack
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    readers = []
    with mock_aws(), RECORDER.active():
        import boto3

        with RECORDER.acting_as("test"):
            secret_arn = boto3.client("secretsmanager").create_secret(
                Name="skypilot-token", SecretString=json.dumps({"token": "sky-abc"}))["ARN"]
        resolver = Resolver(synth.template, {synth.logical_id(stack.secret): secret_arn})
        for name, fn in stack.engine.functions.items():
            variables = synth.template["Resources"][synth.logical_id(fn)]["Properties"]["Environment"]["Variables"]
            env = {k: str(resolver.value(v)) for k, v in variables.items()}
            if environment.SKYPILOT_TOKEN_SECRET_ARN not in env:
                continue
            readers.append(name)
            with RECORDER.acting_as(name):
                SkyPilotApi.from_environment(env)
        calls = [c for c in RECORDER.calls if c.service == "secretsmanager"]
    assert sorted(readers) == ["cleanup", "launch", "reap", "watch"]
    assert sorted(c.caller for c in calls) == sorted(readers)
    for call in calls:
        [(action, resource)] = authorizations(call, lambda _t: "", lambda secret: secret)
        role = synth.logical_id(stack.engine.roles[call.caller])
        assert allowed(resolver.role_policies(role), action, resource), (call.caller, action, resource)
        others = [n for n in stack.engine.roles if n not in readers]
        for other in others:
            denied = resolver.role_policies(synth.logical_id(stack.engine.roles[other]))
            assert not allowed(denied, action, resource), other


def _steps_bundle() -> bytes:
    """The example specs' step programs as a raw upload's code bundle (`tar -czf mine.code.tar.gz -C specs steps`)."""
    import io
    import tarfile

    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        for path in sorted((REPO_ROOT / "specs" / "steps").glob("*.py")):
            tar.add(path, arcname=f"steps/{path.name}")
    return packed.getvalue()


def test_the_inbox_may_create_and_start_an_ad_hoc_machine(ad_hoc_synth: Synth,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With allowAdHocSpecs, a spec that is not deployed gets a content-addressed machine: CreateStateMachine
    (which also checks PassRole of the ad-hoc role and the log-delivery actions), then StartExecution."""
    import boto3
    from moto import mock_aws

    from functions.inbox.handler import handler as inbox_handler

    synth = ad_hoc_synth
    stack = synth.stack
    resolver = Resolver(synth.template, {synth.logical_id(stack.storage.bucket): BUCKET,
                                         synth.logical_id(stack.storage.table): TABLE})
    fn = synth.template["Resources"][synth.logical_id(stack.engine.functions["inbox"])]
    inbox_env = {k: str(resolver.value(v)) for k, v in fn["Properties"]["Environment"]["Variables"].items()
                 if k.startswith("NPA_WORKFLOW_") and k not in (environment.LEDGER_TABLE, environment.BUCKET)}
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION, environment.LEDGER_TABLE: TABLE, environment.BUCKET: BUCKET,
                       environment.EXECUTOR: "local", "POWERTOOLS_METRICS_DISABLED": "true", **inbox_env}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    wiring.clear_cache()
    try:
        with mock_aws(), RECORDER.active():
            with RECORDER.acting_as("test"):
                s3 = boto3.client("s3")
                s3.create_bucket(Bucket=BUCKET)
                wiring.engine_from_environment().ledger.create_table()
                root = synth.outdir / stack.catalog.asset.asset_path
                s3.put_object(Bucket=BUCKET, Key="catalog/tools.yaml", Body=(root / "tools.yaml").read_bytes())
                s3.put_object(Bucket=BUCKET, Key="catalog/machines.json", Body=(root / "machines.json").read_bytes())
                text = (REPO_ROOT / "specs" / f"{SPEC}.yaml").read_text(encoding="utf-8")
                # an ad-hoc spec whose steps name files of its folder travels with its code (engine.inbox_code)
                s3.put_object(Bucket=BUCKET, Key="inbox/mine.code.tar.gz", Body=_steps_bundle())
                s3.put_object(Bucket=BUCKET, Key="inbox/mine.yaml",
                              Body=text.replace(f"\n  name: {SPEC}\n", "\n  name: mine\n", 1).encode())
            with RECORDER.acting_as("inbox"):
                started = inbox_handler(_object_created("inbox/mine.yaml"), _context("inbox"))
            calls = list(RECORDER.calls)
    finally:
        wiring.clear_cache()
    assert started["status"] == "started" and started["machine"] == "ad-hoc", started
    assert started["machine_arn"].split(":")[-1].startswith("NpaWorkflow_adhoc_")
    policies = resolver.role_policies(synth.logical_id(stack.engine.roles["inbox"]))
    checked = set()
    for call in calls:
        assert call.caller == "inbox", str(call)
        for action, resource in authorizations(call, lambda _t: "", lambda secret: secret):
            assert allowed(policies, action, resource), (action, resource)
            checked.add(action)
    assert {"states:CreateStateMachine", "iam:PassRole", "logs:CreateLogDelivery", "states:StartExecution"} <= checked
    # The evaluator is not a rubber stamp: the same inbox may not pass another role, nor create another stack's.
    assert not allowed(policies, "iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/admin")
    assert not allowed(policies, "states:CreateStateMachine",
                       f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:Other_adhoc_0123456789abcdef")


SLOW_SPEC = """
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: slow}
states:
  work: {run: {argv: ["%s", "-c", "import time; time.sleep(30)"]}, terminal: true}
"""


def _aws_env(monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION, environment.LEDGER_TABLE: TABLE, environment.BUCKET: BUCKET,
                       "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_TRACE_DISABLED": "true", **extra}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


@pytest.mark.timeout(60)
def test_the_watch_may_describe_an_ended_execution_and_reap_its_jobs(
    default_synth: Synth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 item 13, the reap that reap missed: a heartbeat answered gone (moto's interpreter says InvalidToken,
    as AWS does for an ended execution) → DescribeExecution of the run's execution → it ended → cancel the run's job
    by exact id and record why. Every call of the real watch handler on that path is allowed by the watch role."""
    import sys

    import boto3
    from moto import mock_aws
    from moto.core.config import default_user_config

    from functions.watch.handler import handler as watch_handler
    from npa_workflow.engine.launch import launch
    from npa_workflow.engine.runs import RunOptions
    from npa_workflow.ledger import RunRecord, WaveStatus

    synth = default_synth
    stack = synth.stack
    monkeypatch.setitem(default_user_config, "stepfunctions", {"execute_state_machine": True})
    _aws_env(monkeypatch, **{environment.EXECUTOR: "local", environment.LOCAL_STATE_DIR: str(tmp_path / "jobs")})
    wiring.clear_cache()
    run_id, job = "lost-reap", ""
    try:
        with mock_aws(), RECORDER.active():
            with RECORDER.acting_as("test"):
                boto3.client("s3").create_bucket(Bucket=BUCKET)
                engine = wiring.engine_from_environment()
                engine.ledger.create_table()
                sfn = boto3.client("stepfunctions")
                wait = {"StartAt": "w", "States": {"w": {"Type": "Wait", "Seconds": 600, "End": True}}}
                machine_arn = sfn.create_state_machine(  # under the name the stack gives the deployed spec
                    name=stack.workflows.names[SPEC], roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
                    definition=json.dumps(wait))["stateMachineArn"]
                execution = sfn.start_execution(stateMachineArn=machine_arn, name=run_id)["executionArn"]
                # moto's StopExecution fails (AttributeError) on an execution whose worker has not started yet:
                # stop it once it waits, as a running execution would be stopped on AWS.
                deadline = time.monotonic() + scaled(10)
                while not any(e["type"] == "WaitStateEntered"
                              for e in sfn.get_execution_history(executionArn=execution)["events"]):
                    assert time.monotonic() < deadline, "moto's execution never entered its Wait state"
                    time.sleep(0.02)
                sfn.stop_execution(executionArn=execution)  # ... and its reap event never arrived
                engine.runs.freeze(run_id, SLOW_SPEC % sys.executable, "", {}, RunOptions())
                engine.ledger.put_run(RunRecord(run_id=run_id, workflow="slow", execution_arn=execution))
                job = launch(engine, {"run_id": run_id, "state": "work", "loops": {}, "token": "gone-token"})["job_id"]
            with RECORDER.acting_as("watch"):
                report = watch_handler({"id": "tick", "source": "aws.events"}, _context("watch"))
            calls = list(RECORDER.calls)
            attempt = engine.ledger.latest_attempt(run_id, "work")
    finally:
        if job:
            engine.executor.cancel([job])
        wiring.clear_cache()
    assert report["reaped"] == [run_id], report
    assert attempt.status == WaveStatus.CANCELLED and "reap event was missed" in attempt.error
    resolver = Resolver(synth.template, {synth.logical_id(stack.storage.bucket): BUCKET,
                                         synth.logical_id(stack.storage.table): TABLE})
    policies = resolver.role_policies(synth.logical_id(stack.engine.roles["watch"]))
    checked = set()
    for call in calls:
        assert call.caller == "watch", str(call)
        for action, resource in authorizations(call, lambda _token: machine_arn, lambda secret: secret):
            assert allowed(policies, action, resource), (action, resource)
            checked.add((action, resource))
    assert ("states:SendTaskHeartbeat", machine_arn) in checked
    assert ("states:DescribeExecution", execution) in checked
    assert {a for a, _ in checked} >= {"dynamodb:Query", "dynamodb:GetItem", "dynamodb:UpdateItem"}
    # Not a rubber stamp: another stack's executions stay out of reach.
    assert not allowed(policies, "states:DescribeExecution", execution.replace(":NpaWorkflow_", ":Other_"))


@pytest.mark.timeout(60)
def test_secret_reads_and_their_kms_decrypts_are_allowed_to_exactly_their_readers(
    ad_hoc_synth: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 items 15 and 16 through the real code: the SkyPilot token read (`SkyPilotApi.from_environment`, in
    every function the stack gives the token's ARN) and the step secrets read (`secretEnv`: the launch handler's
    SkyPilot submit, against the protocol double of a SkyPilot server), each a GetSecretValue of a secret encrypted
    with a customer-managed key, so AWS also checks kms:Decrypt on that key with kms:ViaService = Secrets
    Manager. Each reader's synthesized role allows both; no other function's role allows either."""
    import sys

    import boto3
    from moto import mock_aws

    from functions.launch.handler import handler as launch_handler
    from npa_workflow.adapters.skypilot_api import SkyPilotApi
    from npa_workflow.engine.runs import RunOptions
    from npa_workflow.ledger import RunRecord

    sys.path.insert(0, str(REPO_ROOT / "tests" / "integration" / "skypilot"))
    from double import SkyPilotDouble

    synth = ad_hoc_synth
    stack = synth.stack
    resolver = Resolver(synth.template, {synth.logical_id(stack.storage.bucket): BUCKET,
                                         synth.logical_id(stack.storage.table): TABLE})
    env_of = {name: {k: str(resolver.value(v)) for k, v in synth.template["Resources"][synth.logical_id(fn)][
        "Properties"]["Environment"]["Variables"].items()} for name, fn in stack.engine.functions.items()}
    steps_env = environment.STEP_SECRETS_ARN
    assert sorted(n for n, e in env_of.items() if steps_env in e) == ["inbox", "launch"]
    launch_env = env_of["launch"]
    assert (launch_env[steps_env], launch_env[environment.SKYPILOT_TOKEN_SECRET_ARN]) == (STEP_SECRETS_ARN, SECRET_ARN)
    _aws_env(monkeypatch)
    wiring.clear_cache()
    try:
        with mock_aws(), RECORDER.active(), SkyPilotDouble() as double:
            with RECORDER.acting_as("test"):
                sm = boto3.client("secretsmanager")
                token_arn = sm.create_secret(Name="npa/skypilot-token",
                                             SecretString=json.dumps({"token": "sky-abc"}))["ARN"]
                steps_arn = sm.create_secret(Name="npa/step-secrets", SecretString=json.dumps({"API_KEY": "k-123"}))[
                    "ARN"]
                # moto's ARN → (the ARN AWS authorizes: the secret's full ARN, so the partial one the stack was
                # given gets its 6-character suffix; the CMK named for it in context).
                configured = {token_arn: (SECRET_ARN, TOKEN_KEY_ARN),
                              steps_arn: (STEP_SECRETS_ARN + "-AbCdEf", STEP_SECRETS_KEY_ARN)}
                boto3.client("s3").create_bucket(Bucket=BUCKET)
                env = {**env_of["launch"], environment.LEDGER_TABLE: TABLE, environment.BUCKET: BUCKET,
                       environment.SKYPILOT_ENDPOINT: double.endpoint, environment.SKYPILOT_TOKEN_SECRET_ARN: token_arn,
                       steps_env: steps_arn}
                for key, value in env.items():
                    monkeypatch.setenv(key, value)
                engine = wiring.engine_from_environment()
                engine.ledger.create_table()
                engine.runs.freeze("r1", SLOW_SPEC % sys.executable, "", {}, RunOptions(secret_names=("API_KEY",)))
                engine.ledger.put_run(RunRecord(run_id="r1", workflow="slow"))
            with RECORDER.acting_as("launch"):
                launched = launch_handler({"run_id": "r1", "state": "work", "loops": {}, "token": "t"},
                                          _context("launch"))
            for name in ("watch", "cleanup", "reap"):
                with RECORDER.acting_as(name):
                    SkyPilotApi.from_environment({**env_of[name], environment.SKYPILOT_TOKEN_SECRET_ARN: token_arn})
            with RECORDER.acting_as("inbox"):  # its preflight of the run's secretEnv names (engine.preflight)
                present = wiring.step_secret_presence({**env_of["inbox"], steps_env: steps_arn,
                                                       "AWS_DEFAULT_REGION": REGION})
                assert present is not None and present[0](["API_KEY"]) == ([], [])
            calls = [c for c in RECORDER.calls if c.service == "secretsmanager"]
    finally:
        wiring.clear_cache()
    assert launched["wave_key"] == "work", launched
    submitted = [c for c in double.calls if c["path"].endswith("/jobs/launch")]
    assert submitted and "k-123" in json.dumps(submitted[0]["body"])  # the value reached the job, not the ledger
    read = sorted((c.caller, "token" if c.params["SecretId"] == token_arn else "steps") for c in calls)
    assert read == [("cleanup", "token"), ("inbox", "steps"), ("launch", "steps"), ("launch", "token"),
                    ("reap", "token"), ("watch", "token")], read
    via = {"kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com"}
    role_of = {name: resolver.role_policies(synth.logical_id(role)) for name, role in stack.engine.roles.items()}
    for call in calls:
        key = configured[call.params["SecretId"]][1]
        [(action, resource)] = authorizations(call, lambda _t: "", lambda sid: configured[sid][0])
        for who, policies in role_of.items():
            readers = {c.caller for c in calls if c.params["SecretId"] == call.params["SecretId"]}
            assert allowed(policies, action, resource) == (who in readers), (who, action, resource)
            assert allowed(policies, "kms:Decrypt", key, via) == (who in readers), (who, "kms:Decrypt", key)
        # Only through Secrets Manager: the key itself is no reader's to use directly.
        assert not allowed(role_of[call.caller], "kms:Decrypt", key, {"kms:ViaService": f"s3.{REGION}.amazonaws.com"})


def test_an_sse_kms_data_object_is_readable_by_exactly_the_functions_that_read_data(
    ad_hoc_synth: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 item 16, data buckets: a GetObject of an SSE-KMS object makes S3 decrypt with the object's key on
    the caller's behalf (kms:Decrypt, kms:ViaService = S3). decide reads a decision artifact and watch checks an
    output through the real store adapter; both calls and the decrypt are allowed to exactly the object readers."""
    import boto3
    from moto import mock_aws

    from npa_workflow.adapters.s3_store import S3Store

    synth = ad_hoc_synth
    stack = synth.stack
    _aws_env(monkeypatch)
    with mock_aws(), RECORDER.active():
        with RECORDER.acting_as("test"):
            s3 = boto3.client("s3")
            s3.create_bucket(Bucket="team-data")
            s3.put_object(Bucket="team-data", Key="gate/decision.json", Body=b'{"decision": "promote"}',
                          ServerSideEncryption="aws:kms", SSEKMSKeyId=DATA_KEY_ARN)
            key = s3.head_object(Bucket="team-data", Key="gate/decision.json")["SSEKMSKeyId"]
        store = S3Store(boto3.client("s3"))
        with RECORDER.acting_as("decide"):
            assert store.get("s3://team-data/gate/decision.json") == b'{"decision": "promote"}'
        with RECORDER.acting_as("watch"):
            assert store.non_empty("s3://team-data/gate/decision.json")
        calls = list(RECORDER.calls)
    assert key == DATA_KEY_ARN
    resolver = Resolver(synth.template, {})
    role_of = {name: resolver.role_policies(synth.logical_id(role)) for name, role in stack.engine.roles.items()}
    via_s3 = {"kms:ViaService": f"s3.{REGION}.amazonaws.com"}
    assert sorted((c.caller, c.operation) for c in calls) == [("decide", "GetObject"), ("watch", "HeadObject")]
    for call in calls:
        [(action, resource)] = authorizations(call, lambda _t: "", lambda s: s)
        assert allowed(role_of[call.caller], action, resource), (call.caller, action, resource)
    readers = {"decide", "watch", "cleanup", "reap"}  # the functions that read data objects (trigger only lists)
    for who, policies in role_of.items():
        assert allowed(policies, "kms:Decrypt", key, via_s3) == (who in readers), who
        assert not allowed(policies, "kms:Decrypt", key, {"kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com"})


@pytest.mark.timeout(90)
def test_cleanup_and_reap_may_read_the_outputs_they_check_through_the_skypilot_executor(
    ad_hoc_synth: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17 item 3: a job that exited 0 just before its cancel is recorded SUCCEEDED only with its declared
    outputs present (`cancel_active`), so cleanup (a wave's Catch) and reap (the execution's end) HeadObject each
    output wherever the spec put it — the engine bucket beyond runs/, a data bucket. Driven through the real
    handlers, the SkyPilot executor and client against the protocol double (the cancel, its confirmation by the
    queue, the job's real end), with moto S3 and DynamoDB: every call is allowed by the caller's synthesized role
    (moto itself allows the HeadObject, so without this check a missing grant shows only on AWS, as a 403 that
    records the finished job FAILED and makes `resume` re-run it)."""
    import sys

    import boto3
    from moto import mock_aws

    from functions.cleanup.handler import handler as cleanup_handler
    from functions.reap.handler import handler as reap_handler
    from npa_workflow.engine.runs import RunOptions
    from npa_workflow.ledger import RunRecord, WaveAttempt, WaveStatus

    sys.path.insert(0, str(REPO_ROOT / "tests" / "integration" / "skypilot"))
    from double import SkyPilotDouble

    synth = ad_hoc_synth
    stack = synth.stack
    _aws_env(monkeypatch, **{environment.EXECUTOR: "skypilot"})
    wiring.clear_cache()
    outputs = [f"s3://{BUCKET}/out/model.bin", "s3://team-data/metrics/summary.json"]
    try:
        with mock_aws(), RECORDER.active(), SkyPilotDouble() as double:
            double.request_polls = 0
            with RECORDER.acting_as("test"):
                monkeypatch.setenv("SKYPILOT_API_SERVER_ENDPOINT", double.endpoint)
                s3 = boto3.client("s3")
                for bucket in (BUCKET, "team-data"):
                    s3.create_bucket(Bucket=bucket)
                for uri in outputs:
                    bucket, key = uri[len("s3://"):].split("/", 1)
                    s3.put_object(Bucket=bucket, Key=key, Body=b"finished")
                engine = wiring.engine_from_environment()
                engine.ledger.create_table()
                for run_id in ("r-clean", "r-reap"):
                    engine.runs.freeze(run_id, SLOW_SPEC % sys.executable, "", {}, RunOptions())
                    engine.ledger.put_run(RunRecord(run_id=run_id, workflow="slow"))
                    job = double.seed_job(f"{run_id}-job", statuses=["SUCCEEDED"])  # exited 0 before the cancel
                    engine.ledger.client.put_item(TableName=TABLE, Item=WaveAttempt(
                        run_id=run_id, wave_key="work", state="work", attempt=1, job_name=f"{run_id}-job",
                        job_id=str(job), task_token=f"t-{run_id}", status=WaveStatus.RUNNING,
                        outputs=outputs).to_item())
            with RECORDER.acting_as("cleanup"):
                cleanup_handler({"run_id": "r-clean", "state": "work",
                                 "error": {"Error": "States.Timeout", "Cause": ""}}, _context("cleanup"))
            change = {"version": "0", "id": "e-end", "detail-type": "Step Functions Execution Status Change",
                      "source": "aws.states", "account": ACCOUNT, "time": "2026-01-01T00:00:00Z", "region": REGION,
                      "resources": ["arn:aws:states:us-east-1:123456789012:execution:NpaWorkflow.slow:r-reap"],
                      "detail": {"executionArn": "arn:aws:states:us-east-1:123456789012:execution:NpaWorkflow.slow:"
                                                 "r-reap", "stateMachineArn": "arn:aws:states:us-east-1:"
                                 "123456789012:stateMachine:NpaWorkflow.slow", "name": "r-reap", "status": "FAILED",
                                 "input": json.dumps({"run": {"run_id": "r-reap", "bucket": BUCKET}})}}
            with RECORDER.acting_as("reap"):
                reap_handler(change, _context("reap"))
            calls = list(RECORDER.calls)
            ends = {run_id: engine.ledger.latest_attempt(run_id, "work") for run_id in ("r-clean", "r-reap")}
            asked = {c["path"] for c in double.calls}
    finally:
        wiring.clear_cache()
    assert {"/jobs/cancel", "/jobs/queue/v2"} <= asked  # through the SkyPilot executor, by exact id
    for run_id, attempt in ends.items():
        assert attempt.status == WaveStatus.SUCCEEDED, (run_id, attempt.status, attempt.error)
        assert "already exited 0" in " ".join(e.note for e in attempt.timeline), run_id
    resolver = Resolver(synth.template, {synth.logical_id(stack.storage.bucket): BUCKET,
                                         synth.logical_id(stack.storage.table): TABLE})
    role_of = {name: resolver.role_policies(synth.logical_id(role)) for name, role in stack.engine.roles.items()}
    checked = set()
    for call in calls:
        assert call.caller in ("cleanup", "reap"), str(call)
        for action, resource in authorizations(call, lambda _t: "", lambda s: s):
            assert allowed(role_of[call.caller], action, resource), (call.caller, action, resource)
            checked.add((call.caller, action, resource))
    for who in ("cleanup", "reap"):
        for uri in outputs:
            assert (who, "s3:GetObject", "arn:aws:s3:::" + uri[len("s3://"):]) in checked, (who, uri)
    # Not a rubber stamp: a bucket that is neither the stack's nor a data bucket stays out of reach.
    assert not allowed(role_of["reap"], "s3:GetObject", "arn:aws:s3:::someone-else/out/model.bin")

"""A deploy with runs in flight (issue 17 item 4): a changed spec synthesized and deployed onto the twin while a run is
mid-wave. The machine is updated in place (same name: CloudFormation's UpdateStateMachine). AWS facts relied on:

- UpdateStateMachine: executions already running keep the definition they started with (moto's execution keeps a
  snapshot of the machine as it was at StartExecution, the same behaviour);
- StartExecution on the updated machine runs the new definition, so `resume` of a run started before the deploy must
  not start one there: the run's steps read the spec frozen at its start, not the new one.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from deadlines import deadline as scaled
from iam_conformance import REGION
from infra_support import UNIT_CONTEXT, Synth, synthesize
from test_infra_iam_conformance import BUCKET, TABLE, _context, _inbox_environment, _object_created

from npa_workflow import wiring
from npa_workflow.protocol import environment
from npa_workflow.protocol import functions as function_table
from npa_workflow.protocol.definitions import definition_digest

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("infra-redeploy")]
SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {{name: redeploy}}
config: {{nap: "4", fail: ""}}
initial: slow
states:
  slow:
    run: {{shell: 'sleep {{{{config.nap}}}}; test -z "{{{{config.fail}}}}"'}}
    next: {after}
  {after}: {{run: {{shell: "true"}}, terminal: true}}
"""


def _synth(tmp: Path, after: str) -> Synth:
    specs = tmp / f"specs-{after}"
    specs.mkdir()
    (specs / "redeploy.yaml").write_text(SPEC.format(after=after))
    return synthesize(UNIT_CONTEXT, tmp / f"cdk-{after}", specs_dir=specs)


def _definition(synth: Synth, arns: dict[str, str]) -> str:
    text = synth.definition_text(synth.stack.workflows.machines["redeploy"])
    for slot in function_table.MACHINE_INVOKED:
        text = text.replace(slot.placeholder, arns[slot.name])
    return text


def _publish_catalog(synth: Synth, s3: Any) -> None:
    root = synth.outdir / synth.stack.catalog.asset.asset_path
    for path in root.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket=BUCKET, Key="catalog/" + path.relative_to(root).as_posix(), Body=path.read_bytes())


@pytest.mark.timeout(300)
def test_a_deploy_of_a_changed_spec_mid_wave_leaves_the_run_on_its_definition_and_refuses_a_resume_on_the_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from functions.inbox.handler import handler as inbox_handler
    from functions.watch.handler import handler as watch_handler
    from npa_workflow.embedded_aws.moto_fixes import moto_fixes
    from npa_workflow.embedded_aws.moto_lambda import in_process_lambdas
    from npa_workflow.embedded_aws.moto_server import start_moto_server
    from npa_workflow.stack_client import StackClient, StackError

    before, after = _synth(tmp_path, "after"), _synth(tmp_path, "renamed")
    workdir = tmp_path / "work"
    workdir.mkdir()
    shutil.copy(tmp_path / "specs-after" / "redeploy.yaml", workdir)
    server = start_moto_server()
    try:
        env = {**server.client_env(REGION), environment.LEDGER_TABLE: TABLE, environment.BUCKET: BUCKET,
               environment.EXECUTOR: "local", environment.LOCAL_STATE_DIR: str(tmp_path / "jobs"),
               "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_TRACE_DISABLED": "true",
               **_inbox_environment(before)}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(workdir)
        wiring.clear_cache()
        with moto_fixes(), in_process_lambdas(apply_function_env=False):
            session = boto3.session.Session(region_name=REGION)
            s3, sfn, aws_lambda, iam = (session.client(n) for n in ("s3", "stepfunctions", "lambda", "iam"))
            s3.create_bucket(Bucket=BUCKET)
            s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
            wiring.engine_from_environment().ledger.create_table()
            role = iam.create_role(RoleName="moto-needs-a-role", AssumeRolePolicyDocument=json.dumps({
                "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                        "Principal": {"Service": "lambda.amazonaws.com"}}]}))
            role_arn = role["Role"]["Arn"]
            arns = {slot.name: aws_lambda.create_function(
                FunctionName=before.logical_id(before.stack.engine.functions[slot.name]), Runtime="python3.11",
                Role=role_arn, Handler=f"iam_conformance.{slot.name}", Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
                Timeout=900)["FunctionArn"] for slot in function_table.MACHINE_INVOKED}
            machine_arn = sfn.create_state_machine(name=before.stack.workflows.names["redeploy"], roleArn=role_arn,
                                                   definition=_definition(before, arns),
                                                   type="STANDARD")["stateMachineArn"]
            _publish_catalog(before, s3)

            def submit(name: str, variables: dict[str, str]) -> dict[str, Any]:
                body = json.dumps({"apiVersion": "npa.workflow.run/v1", "spec": "redeploy", "vars": variables})
                put = s3.put_object(Bucket=BUCKET, Key=f"inbox/{name}.yaml", Body=body)
                started = inbox_handler(_object_created(f"inbox/{name}.yaml", put["VersionId"]), _context("inbox"))
                assert started["status"] == "started" and started["machine"] == "deployed", started
                return started

            def tick_until(done: Any, what: str) -> None:
                deadline = time.monotonic() + scaled(120)
                while not done():
                    assert time.monotonic() < deadline, what
                    watch_handler({"id": "tick", "source": "aws.events"}, _context("watch"))
                    time.sleep(0.3)

            def status(started: dict[str, Any]) -> str:
                return sfn.describe_execution(executionArn=started["execution_arn"])["status"]

            ledger = wiring.engine_from_environment().ledger
            in_flight = submit("in-flight", {"nap": "6"})
            failing = submit("failing", {"nap": "0", "fail": "yes"})
            tick_until(lambda: status(failing) == "FAILED", "the failing run did not fail")
            tick_until(lambda: any(w.run_id == in_flight["run_id"] and w.job_id for w in ledger.active_waves()),
                       "the in-flight run's wave did not start")

            # The deploy, mid-wave: the changed spec's synthesized definition replaces the machine's (same name).
            assert after.stack.workflows.names["redeploy"] == before.stack.workflows.names["redeploy"]
            sfn.update_state_machine(stateMachineArn=machine_arn, definition=_definition(after, arns))
            _publish_catalog(after, s3)
            assert any(w.run_id == in_flight["run_id"] for w in ledger.active_waves())  # still mid-wave

            tick_until(lambda: status(in_flight) != "RUNNING", "the in-flight run did not end")
            assert status(in_flight) == "SUCCEEDED"
            entered = [e["stateEnteredEventDetails"]["name"] for e in sfn.get_execution_history(
                executionArn=in_flight["execution_arn"])["events"] if "stateEnteredEventDetails" in e]
            assert "after" in entered and "renamed" not in entered  # it ran the definition it started with

            # The failed run was pinned to the old definition: a new execution on the new one is refused.
            record = ledger.get_run(failing["run_id"])
            assert record.definition_digest == definition_digest(json.loads(_definition(before, arns)))
            client = StackClient(session, bucket=BUCKET, ledger_table=TABLE, endpoint_url=server.endpoint_url)
            with pytest.raises(StackError) as refused:
                client.resume(failing["run_id"])
            message = str(refused.value)
            assert "a deploy changed state machine" in message and "submit the spec again as a new run" in message
            assert len(sfn.list_executions(stateMachineArn=machine_arn)["executions"]) == 2  # nothing started
    finally:
        wiring.clear_cache()
        server.stop()
